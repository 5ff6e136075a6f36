#pragma once
// Exact softmax attention and linear (random-feature) attention, docs/design.md section 2.
#include <vector>

#include "favor/feature_maps.hpp"
#include "favor/tensor.hpp"

namespace favor {

// Rows per block of the L x L passes: a function of L only (never of the thread count), so
// results are the same however the blocks are spread; a block holds about 2^21 entries.
std::size_t block_rows(std::size_t L);

// Out = rownormalize(exp(Q K^T / sqrt d)) V, row max subtracted before exp, computed in row
// blocks: memory O(block x L). Causal: row i attends to keys j <= i.
// Row blocks of fixed size, each over key tiles with a running row max (the
// rescaling is exact up to rounding); the numbers do not depend on `threads`.
// Q: (L, d), K: (Lk, d), V: (Lk, dv); returns (L, dv).
template <class T>
Mat<T> exact_attention(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal = false,
                       int threads = 1);

// Out_hat = D^{-1} phiQ (phiK^T V), D = diag(phiQ (phiK^T 1)): O(L F dv), no L x L matrix.
// Without `normalise`, phiQ (phiK^T V) (maps that are not row-normalised: nystrom).
// Causal: prefix sums G_i = sum_{j<=i} phiK_j [v_j, 1]^T, in blocks of rows.
// phiQ: (L, F), phiK: (Lk, F), V: (Lk, dv); returns (L, dv).
// key_log_scale (Lk, or empty for all 0): key row j stands for exp(key_log_scale[j]) phiK_j
// (Features::log_scale). Keys are summed per block relative to the block's largest log scale
// and the blocks rescaled to the largest; causal prefix sums keep a running max and rescale
// what was accumulated when it grows (online softmax), so row i weighs key j <= i by
// exp(lk_j - max_{j' <= i} lk_j') <= 1 (docs/design.md section 2.2).
// Rows are split in blocks fixed by the sizes; sums over blocks are added in block order, so
// the numbers do not depend on `threads`.
template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, const std::vector<double>& key_log_scale,
                        const Mat<T>& V, bool causal = false, int threads = 1, bool normalise = true);
template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, const Mat<T>& V, bool causal = false,
                        int threads = 1, bool normalise = true);

// The two halves of non-causal linear attention (the timing experiment times them apart).
// KV1 = phiK^T [V, 1] (relative to the largest key log scale): phiK: (Lk, F), V: (Lk, dv);
// returns (F, dv + 1).
template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, const std::vector<double>& key_log_scale, const Mat<T>& V,
                           int threads = 1);
template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, const Mat<T>& V, int threads = 1);
// Out = D^{-1} phiQ KV1[:, :dv] with D = phiQ KV1[:, dv] (without `normalise`: phiQ KV1[:, :dv]).
// phiQ: (L, F), KV1: (F, dv + 1); returns (L, dv).
template <class T>
Mat<T> linear_attention_apply(const Mat<T>& phiQ, const Mat<T>& KV1, int threads = 1, bool normalise = true);

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
// features made as the chunk starts. Block boundaries depend on the sizes only, so the numbers
// do not depend on `threads`; they equal favor_attention's up to rounding. Maps whose keys
// cannot be shifted per block (FeatureMap::blockwise_key_shift) and maps that are not
// row-normalised use favor_attention.
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
// Rows per block of the fused forward's non-causal key and query passes, for L rows of F
// features of `elem` bytes from d inputs (a function of the sizes only).
std::size_t fused_rows(std::size_t L, std::size_t F, std::size_t d, std::size_t elem);

// Exact attention as a half-precision model computes it (docs/design.md section 2.6): scores
// Q K^T / sqrt(d) accumulated in float32 and stored rounded, softmax in float32 (row max
// subtracted), probabilities rounded before P V (float32 accumulation), output rounded.
// Q, K, V as given (already rounded). Rows in blocks of block_rows(Lk), each over all its
// keys (memory O(block x Lk)); the numbers do not depend on `threads`.
// Q: (L, d), K: (Lk, d), V: (Lk, dv); returns (L, dv).
Mat<float> exact_attention_rounded(const Mat<float>& Q, const Mat<float>& K, const Mat<float>& V, Rounding rounding,
                                   bool causal = false, int threads = 1);

}  // namespace favor
