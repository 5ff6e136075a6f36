#pragma once
// Linear attention from given feature matrices, non-causal and causal (prefix sums):
// docs/design.md section 2.2 (the linear form and its causal prefix sums: Performer,
// Choromanski et al. 2021). Block sizes: attention_blocks.hpp.
#include <vector>

#include "favor/attention/attention_blocks.hpp"
#include "favor/core/tensor.hpp"

namespace favor {

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
                        MatView<T> V, bool causal = false, int threads = 1, bool normalise = true);
template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, MatView<T> V, bool causal = false,
                        int threads = 1, bool normalise = true);

// The two halves of non-causal linear attention (the timing experiment times them apart).
// KV1 = phiK^T [V, 1] (relative to the largest key log scale): phiK: (Lk, F), V: (Lk, dv);
// returns (F, dv + 1).
template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, const std::vector<double>& key_log_scale, MatView<T> V,
                           int threads = 1);
template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, MatView<T> V, int threads = 1);
// Out = D^{-1} phiQ KV1[:, :dv] with D = phiQ KV1[:, dv] (without `normalise`: phiQ KV1[:, :dv]).
// phiQ: (L, F), KV1: (F, dv + 1); returns (L, dv).
template <class T>
Mat<T> linear_attention_apply(const Mat<T>& phiQ, const Mat<T>& KV1, int threads = 1, bool normalise = true);

}  // namespace favor
