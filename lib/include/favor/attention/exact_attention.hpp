#pragma once
// Exact softmax attention, in working precision and as a half-precision model computes it
// (docs/design.md sections 2.1 and 2.6). Block sizes: attention_blocks.hpp.
#include <vector>

#include "favor/attention/attention_blocks.hpp"
#include "favor/core/half.hpp"
#include "favor/core/tensor.hpp"

namespace favor {

// Out = rownormalize(exp(Q K^T / sqrt d)) V, row max subtracted before exp, computed in row
// blocks: memory O(block x L). Causal: row i attends to keys j <= i.
// Row blocks of fixed size, each over key tiles with a running row max (the
// rescaling is exact up to rounding); the numbers do not depend on `threads`.
// Q: (L, d), K: (Lk, d), V: (Lk, dv); returns (L, dv). On views (the Python module's arrays),
// T given: exact_attention<T>(Q, K, V, causal, threads).
template <class T>
Mat<T> exact_attention(MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads);
template <class T>
Mat<T> exact_attention(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal = false, int threads = 1) {
    return exact_attention<T>(MatView<T>(Q), MatView<T>(K), MatView<T>(V), causal, threads);
}
// The same into `out`, whose storage is reused when it already has the shape (L, dv) (the
// timing experiment's repeats: no fresh output pages per call).
template <class T>
void exact_attention_into(MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out, bool causal = false, int threads = 1);

// exact_attention with the statistics its backward needs (backward_exact.hpp, as
// FlashAttention's forward saves them): out bitwise equal to exact_attention's, and each
// row's log-sum-exp lse_i = log sum_{j visible} exp(S_ij), S = Q K^T / sqrt d, in float64
// (the running max plus the log of the running sum; -inf for a row that sees no key).
template <class T>
struct ExactForward {
    Mat<T> out;               // (L, dv)
    std::vector<double> lse;  // (L)
};
template <class T>
ExactForward<T> exact_attention_saved(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal = false,
                                      int threads = 1);

// The rows at ascending key positions `rows` of exact attention, computed in float64 from Q,
// K, V of either dtype (row-sampled metrics, docs/design.md 3.1): row r is row rows[r] of
// exact_attention's (causal: it sees keys j <= rows[r]), equal up to rounding, O(N Lk d) work.
// Returns (N, dv).
template <class T>
Mat<double> exact_attention_rows(const Mat<T>& Q, const std::vector<std::size_t>& rows, const Mat<T>& K,
                                 const Mat<T>& V, bool causal = false, int threads = 1);

// Exact attention as a half-precision model computes it (docs/design.md section 2.6): scores
// Q K^T / sqrt(d) accumulated in float32 and stored rounded, softmax in float32 (row max
// subtracted), probabilities rounded before P V (float32 accumulation), output rounded.
// Q, K, V as given (already rounded). Rows in blocks of block_rows(Lk), each over all its
// keys (memory O(block x Lk)); the numbers do not depend on `threads`.
// Q: (L, d), K: (Lk, d), V: (Lk, dv); returns (L, dv).
Mat<float> exact_attention_rounded(const Mat<float>& Q, const Mat<float>& K, const Mat<float>& V, Rounding rounding,
                                   bool causal = false, int threads = 1);

}  // namespace favor
