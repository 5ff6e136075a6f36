#pragma once
// `favor apply --grad G.npy`: the gradients of the attention `favor apply` computes, for an
// upstream gradient G = dLoss/dOut (docs/design.md section 2.7).
#include <string>
#include <vector>

#include "favor/apply.hpp"

namespace favor {

// Per head: dQ (L, d), dK (Lk, d), dV (Lk, dv).
struct HeadGradients {
    std::vector<Mat<double>> dq, dk, dv;
};

// Refuses, before any work, what has no gradient (the half dtypes, maps that are not
// row-normalised: nystrom) and a G file whose header is not lead + (L, dv) (`grad_path`
// empty: not checked). Throws Error "apply: --grad: ...".
void check_apply_grad(const ApplyOptions& opt, const std::string& grad_path = "", const QkvShapes* shapes = nullptr);

// Throws Error "apply: --grad: PATH has shape ..., expected WANT (the output's shape)" unless equal.
void check_upstream_shape(const std::string& path, std::vector<std::size_t> shape, std::vector<std::size_t> want);

// G read from `path`, checked to be lead + (L, dv) as the output is, finite; one matrix per head.
std::vector<Mat<double>> load_upstream(const std::string& path, const HeadTensors& in, std::size_t dv);

// The exact (opt.variant empty) or approximate gradients of every head in opt.dtype (float32
// or float64; the half dtypes are refused), W drawn and the map fitted as apply_attention does.
HeadGradients apply_gradients(const HeadTensors& in, const std::vector<Mat<double>>& G, const ApplyOptions& opt);

// Reads G from grad_path, computes the gradients and writes dq.npy, dk.npy, dv.npy in the
// directory of out_path (shapes lead + (L, d), lead + (Lk, d), lead + (Lk, dv); float32 files
// with --dtype float32).
void write_apply_gradients(const std::string& grad_path, const std::string& out_path, const HeadTensors& in,
                           const ApplyOptions& opt);

}  // namespace favor
