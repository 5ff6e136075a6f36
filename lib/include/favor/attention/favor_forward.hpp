#pragma once
// The whole FAVOR estimator of attention from Q, K, V: feature maps with the shared W, then
// linear attention (docs/design.md section 2.2); favor_attention materialises both feature
// matrices, favor_forward fuses the features into the linear-attention passes.
// Block sizes: attention_blocks.hpp.
#include "favor/attention/attention_blocks.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/features.hpp"

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
Approximation<T> favor_attention(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V,
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
Mat<T> favor_forward(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V,
                     bool causal = false, int threads = 1);
// The same into `out`, whose storage is reused when it already has the shape (L, dv): a
// caller that runs many cells (the approximation runner) keeps one output per thread
// instead of mapping and zeroing a fresh one per cell.
template <class T>
void favor_forward_into(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out,
                        bool causal = false, int threads = 1);
// The non-causal fused forward's feature pass alone, for benchmarks (favor_bench's feature-map
// rate): the features of every row of Q and of K made block by block as favor_forward makes
// them (fused_rows rows, each block into a buffer the running thread keeps, each row with its
// own shift), then dropped. Throws std::logic_error where favor_forward would not run fused.
template <class T>
void favor_feature_pass(const Estimator<T>& est, MatView<T> Q, MatView<T> K, int threads = 1);
// Whether favor_forward(_into) runs fused for an estimator of `map` with this rounding and
// shift (and some keys); otherwise it returns favor_attention's output, made from both (L, F)
// feature matrices. The memory estimate (cost_model.cpp) charges the path this names.
bool forward_fused(const FeatureMap& map, Rounding rounding, bool shift, bool causal);

// What the backward pass needs from its forward, kept by the forward as autograd keeps it in
// a training step (FlashAttention keeps each row's log-sum-exp the same way): the output, the
// key sums and each row's denominator, O(F dv + L dv) beside the inputs, never an (L, F)
// matrix (docs/design.md section 2.7). With Psi_j = exp(lk_j - key_shift) phi(y_j) (lk_j the
// key's own log scale, key_shift = max_j lk_j):
//   KV1 = Psi^T [V, 1]  (F x (dv + 1), row-major),  den_i = D_i = phi(x_i) . KV1[:, dv].
// Empty KV1: nothing saved (backward_saves is false); favor_backward_saved then recomputes.
template <class T>
struct ForwardState {
    Mat<T> out;                // (L, dv)
    std::vector<T> KV1;        // (F x (dv + 1)), or empty
    double key_shift = 0.0;    // M
    std::vector<T> den;        // (L)
    bool saved() const { return !KV1.empty(); }
};
// Whether favor_forward_saved keeps a state for the fused backward (backward_fused.cpp): non-causal,
// row-normalised, a blockwise key shift and a gradient (FeatureMap::gradient_refusal), no half
// emulation, some keys. (The causal backward and every other case run from both (L, F)
// feature matrices: backward_linear.cpp.)
bool backward_saves(const FeatureMap& map, Rounding rounding, bool causal, std::size_t keys);
// favor_forward's output and, where backward_saves, the state above from the same fused
// passes (the numbers of favor_forward for est.shift = true; the features are made with their
// shifts whatever est.shift says, as favor_backward makes them). Q: (L, d), K: (Lk, d), V: (Lk, dv).
template <class T>
ForwardState<T> favor_forward_saved(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V,
                                    bool causal = false, int threads = 1);

}  // namespace favor
