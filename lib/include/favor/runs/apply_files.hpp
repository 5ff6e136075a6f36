#pragma once
// `favor apply` from files to files: what it writes (the output, and with --grad the
// gradients, named after --out), checked before any work, all computed before anything is
// written (design.md section 4, "apply").
#include <optional>
#include <string>
#include <vector>

#include "favor/runs/apply_grad.hpp"

namespace favor {

// The gradients' files: OUT.npy -> OUT_dq.npy, OUT_dk.npy, OUT_dv.npy (a trailing ".npy" of
// --out replaced, any other name extended: out -> out_dq.npy).
std::vector<std::string> gradient_paths(const std::string& out);

// Before any work: every output (--out, and the gradients' files with --grad) can be written
// (check_output_file) and is a different file from every input (--q, --k, --v, --grad) and
// from the others (check_distinct_files). Throws Error "apply: ...".
void check_apply_files(const QkvSource& src, const std::optional<std::string>& grad, const std::string& out);

// What apply writes, all of it computed before the first file is written.
struct ApplyResults {
    std::vector<Mat<double>> out;
    std::optional<HeadGradients> grads;
};
// The output of every head and, with `grad` (G's file in the axes `layout`, as q's; read and
// checked first: shape, finite), the gradients.
ApplyResults compute_apply(const HeadTensors& in, const ApplyOptions& opt, const std::optional<std::string>& grad,
                           const std::string& layout);

// Writes --out, then the gradients' files (float32 files unless opt.dtype is float64), in the
// inputs' `layout` (empty: favor's order).
// Returns "" when every entry is finite, else one line (apply then exits 3): the first file
// with non-finite entries ("apply: 3 of 48 dq entries are not finite (first: head 0, row 2);
// likely cause: ... (written to OUT_dq.npy)"), and the names of the others with some.
std::string write_apply(const ApplyResults& r, const HeadTensors& in, const ApplyOptions& opt, const std::string& out,
                        const std::string& layout);

}  // namespace favor
