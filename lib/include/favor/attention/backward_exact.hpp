#pragma once
// The backward pass of exact softmax attention (backward_linear.hpp has linear attention's):
// the gradients with respect to Q, K and V for an upstream gradient G = dLoss/dOut
// (docs/design.md section 2.7). Every function is deterministic: blocks fixed by the sizes,
// each block on one thread, sums over blocks in a fixed order, so the numbers do not depend
// on `threads`.
#include <vector>

#include "favor/core/tensor.hpp"

namespace favor {

// dQ (L, d), dK (Lk, d), dV (Lk, dv).
template <class T>
struct Gradients {
    Mat<T> dQ, dK, dV;
};

// Gradient of Out = A V, A = softmax(Q K^T / sqrt d) (causal: row i sees keys j <= i):
//   dV = A^T G,  dS = A o (G V^T - rowsum(G o Out)),  dQ = dS K / sqrt d,  dK = dS^T Q / sqrt d,
// from the forward's saved Out and row log-sum-exps (exact_attention_saved), as a training
// step has them: one pass over (key block, query tile) pairs recomputing A = exp(S - lse)
// there (FlashAttention-2's backward), five products per pair; memory O(tile x tile) per
// thread plus kExactBackwardChunks dQ partials (attention_blocks.hpp), never an L x L matrix.
// Q: (L, d), K: (Lk, d), V: (Lk, dv), G: (L, dv), out: (L, dv), lse: (L); causal needs Lk = L.
template <class T>
Gradients<T> exact_attention_backward_saved(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G,
                                            const Mat<T>& out, const std::vector<double>& lse, bool causal = false,
                                            int threads = 1);

// The same gradient from Q, K, V and G alone: exact_attention_saved, then the backward above.
template <class T>
Gradients<T> exact_attention_backward(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G,
                                      bool causal = false, int threads = 1);

// Throws Error unless Q (L, d), K (Lk, d), V (Lk, dv), G (L, dv) fit (and, causal, Lk = L).
template <class T>
void check_backward_shapes(MatView<T> Q, MatView<T> K, MatView<T> V, MatView<T> G, bool causal);

}  // namespace favor
