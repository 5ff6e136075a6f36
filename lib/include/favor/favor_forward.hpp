#pragma once
// The whole FAVOR estimator of attention from Q, K, V: feature maps with the shared W, then
// linear attention (docs/design.md section 2.2); favor_attention materialises both feature
// matrices, favor_forward fuses the features into the linear-attention passes.
// Block sizes: attention_blocks.hpp.
#include "favor/attention_blocks.hpp"
#include "favor/features.hpp"
#include "favor/tensor.hpp"

namespace favor {

// The whole estimator: scale, feature maps with the shared W (m, d), linear attention,
// row-normalised or not as the map says (FeatureMap::row_normalised). Causal with a map that
// has no causal form (nystrom) throws Error.
// With est.rounding (half dtypes, T = float) the model of docs/design.md section 2.6: the
// features, the stored phiK^T [V, 1] (non-causal) and the output rounded to half; Q, K, V
// and W are taken as given (the callers round them).
template <class T>
struct Approximation {
    Mat<T> out;        // (L, dv)
    Features<T> q, k;  // the features, for the pairwise metrics
    // +-Inf entries among the features of both sides and (non-causal) the stored
    // phiK^T [V, 1], and how many entries those are: overflow_fraction = overflow / entries.
    std::size_t overflow = 0, entries = 0;
};
template <class T>
struct Estimator;
template <class T>
Approximation<T> favor_attention(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                                 bool causal = false, int threads = 1);

// favor_attention(...).out without materialising the (L, F) feature matrices (what the
// approximation runner, the timing experiment and the benchmark call). Non-causal: keys in
// fixed blocks of rows, each block's features made in a cache-resident per-thread buffer with
// the block's own shift and folded into its partial phiK^T [V, 1] at once; the partials are
// rescaled to a common shift and added in block order; then the queries per block of rows:
// features -> times KV1 -> normalise. Causal: the key features once (into storage the calling
// thread keeps), then the blocked prefix-sum pass of linear_attention with each chunk's query
// features made as the chunk starts. Block boundaries depend on the sizes only (fused_rows,
// kLinearBlockRows), so the numbers do not depend on `threads`; they equal favor_attention's up
// to rounding. Maps whose keys cannot be shifted per block (FeatureMap::blockwise_key_shift)
// and maps that are not row-normalised use favor_attention.
// Q: (L, d), K: (Lk, d), V: (Lk, dv); returns (L, dv).
template <class T>
Mat<T> favor_forward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                     bool causal = false, int threads = 1);
// The same into `out`, whose storage is reused when it already has the shape (L, dv): a
// caller that runs many cells (the approximation runner) keeps one output per thread
// instead of mapping and zeroing a fresh one per cell.
template <class T>
void favor_forward_into(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, Mat<T>& out,
                        bool causal = false, int threads = 1);
// Whether favor_forward(_into) runs fused for an estimator of `map` with this rounding and
// shift (and some keys); otherwise it returns favor_attention's output, made from both (L, F)
// feature matrices. The memory estimate (cost_model.cpp) charges the path this names.
bool forward_fused(const FeatureMap& map, Rounding rounding, bool shift, bool causal);

}  // namespace favor
