#pragma once
// `favor apply --grad G.npy`: the gradients of the attention `favor apply` computes, for an
// upstream gradient G = dLoss/dOut (docs/design.md section 2.7).
#include <string>
#include <vector>

#include "favor/runs/apply.hpp"

namespace favor {

// Per head: dQ (L, d), dK (Lk, d), dV (Lk, dv).
struct HeadGradients {
    std::vector<Mat<double>> dq, dk, dv;
};

// Refuses, before any work, what has no gradient (the half dtypes, maps that are not
// row-normalised: nystrom) and a G file whose header is not lead + (L, dv) (`grad_path`
// empty: not checked). Throws Error "apply: --grad: ...".
// `layout`: G's axes, as --layout gives q's, k's and v's.
void check_apply_grad(const ApplyOptions& opt, const std::string& grad_path = "", const QkvShapes* shapes = nullptr,
                      const std::string& layout = "");

// G read from `path` (its axes `layout`, as --layout gives q's), checked to be lead + (L, dv) as
// the output is, finite; one matrix per head.
std::vector<Mat<double>> load_upstream(const std::string& path, const HeadTensors& in, std::size_t dv,
                                       const std::string& layout = "");

// The exact (opt.variant empty) or approximate gradients of every head in opt.dtype (float32
// or float64; the half dtypes are refused), W drawn and the map fitted as apply_attention does.
HeadGradients apply_gradients(const HeadTensors& in, const std::vector<Mat<double>>& G, const ApplyOptions& opt);
// Head h's gradients appended to `out` (what apply_gradients does for every head; the Python
// module calls it head by head, Ctrl-C checked between). opt checked by the caller.
void add_head_gradients(const HeadTensors& in, const std::vector<Mat<double>>& G, const ApplyOptions& opt,
                        std::size_t h, HeadGradients& out);

}  // namespace favor
