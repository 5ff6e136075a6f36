#pragma once
// Q, K, V tensors from .npy files, split into (batch, head) slices, and attention outputs
// written back with the same leading shape. Accepted shapes: (L, d), (H, L, d), (B, H, L, d).
#include <cstdint>
#include <string>
#include <vector>

#include "favor/feature_maps.hpp"
#include "favor/projections.hpp"
#include "favor/tensor.hpp"

namespace favor {

struct HeadTensors {
    std::vector<std::size_t> lead;   // leading dimensions: (), (H) or (B, H)
    std::vector<Mat<double>> q, k, v;   // one (L, d) / (Lk, d) / (Lk, dv) matrix per head
    std::size_t L() const { return q.empty() ? 0 : q[0].shape(0); }
    std::size_t d() const { return q.empty() ? 0 : q[0].shape(1); }
};

// Loads and checks q, k, v: rank 2 to 4, the same leading dimensions, q and k the same
// width d, k and v the same length, q and k the same length when `causal`, every entry
// finite. Messages name the offending file. Throws Error.
HeadTensors load_qkv(const std::string& q, const std::string& k, const std::string& v, bool causal);

// Writes per-head (L, c) matrices as one array of shape lead + (L, c).
void save_heads(const std::string& path, const std::vector<std::size_t>& lead,
                const std::vector<Mat<double>>& heads, bool as_float32);

struct ApplyOptions {
    bool exact = false;
    FeatureMap map;
    Projection projection = Projection::orthogonal;
    std::size_t m = 256;
    std::uint64_t seed = 0, trial = 0;
    bool causal = false;
    bool float32 = false;   // compute precision (outputs are returned as float64)
    int threads = 0;
};

// `favor apply` as typed on the command line, before any check.
struct ApplyRequest {
    bool exact = false, causal = false;
    std::string features, projection = "orthogonal", A, dtype = "float64";
    std::size_t m = 0;
    std::uint64_t seed = 0, trial = 0;
    double epsilon = 0.0;
    int threads = 0;
};

// Checks a request and resolves its names: either exact or features with m >= 1; epsilon
// >= 0; A ("optimal", the default, or a number < 1/8) only for oprf. Throws Error
// "apply: --FLAG ..." naming the flag.
ApplyOptions resolve_apply(const ApplyRequest& r);

// Exact or approximate attention output of every head (W drawn as a run draws it).
std::vector<Mat<double>> apply_attention(const HeadTensors& in, const ApplyOptions& opt);

}  // namespace favor
