#pragma once
// Backward passes: the gradients of exact softmax attention and of linear (random-feature)
// attention with respect to Q, K and V for an upstream gradient G = dLoss/dOut
// (docs/design.md section 2.7). Every function is deterministic: blocks fixed by the sizes,
// each block on one thread, sums over blocks in a fixed order, so the numbers do not depend
// on `threads`.
#include <vector>

#include "favor/estimator.hpp"
#include "favor/feature_grad.hpp"
#include "favor/tensor.hpp"

namespace favor {

// dQ (L, d), dK (Lk, d), dV (Lk, dv).
template <class T>
struct Gradients {
    Mat<T> dQ, dK, dV;
};

// Gradient of Out = A V, A = softmax(Q K^T / sqrt d) (causal: row i sees keys j <= i):
//   dV = A^T G,  dS = A o (G V^T - rowsum(G o Out)),  dQ = dS K / sqrt d,  dK = dS^T Q / sqrt d.
// Two passes: query blocks (each row's log-sum-exp, rowsum(G o Out) and dQ), then key blocks
// (dK, dV, recomputing A from the log-sum-exp); memory O(block x L), never an L x L matrix.
// Q: (L, d), K: (Lk, d), V: (Lk, dv), G: (L, dv); causal needs Lk = L.
template <class T>
Gradients<T> exact_attention_backward(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G,
                                      bool causal = false, int threads = 1);

// Gradients of Out = D^{-1} phiQ (Psi^T [V, 1]), Psi_j = exp(lk_j - M) phiK_j (the ratio
// estimator of docs/design.md section 2.2 on stabilised features, M = max lk) with respect to
// phiQ, phiK (key_log_scale held fixed) and V.
// phiQ: (L, F), phiK: (Lk, F), key_log_scale: (Lk), V: (Lk, dv), G: (L, dv);
// returns dphiQ (L, F), dphiK (Lk, F), dV (Lk, dv). Causal (Lk = L): reverse prefix sums.
template <class T>
struct FeatureGradients {
    Mat<T> dphiQ, dphiK, dV;
};
template <class T>
FeatureGradients<T> linear_attention_backward(const Mat<T>& phiQ, const Mat<T>& phiK,
                                              const std::vector<double>& key_log_scale, const Mat<T>& V,
                                              const Mat<T>& G, bool causal = false);

// The whole estimator's gradient (the forward is favor_attention's): features of Q and K with
// est's W and (fitted, then fixed) map, the feature gradients above, then each side through
// the map's Jacobian (FeatureMap::vjp). est must be fitted (Estimator::for_inputs).
// Throws Error for maps without a gradient (nystrom; epsilon > 0 after a shifted exp) and for
// the emulated half dtypes. The features are made with their shifts whatever est.shift says
// (the gradient is the same: docs/design.md section 2.7). For a metric: fit est once
// (for_inputs), then favor_backward(est, Q, K, V, G) beside exact_attention_backward(Q, K, V, G).
// Q: (L, d), K: (Lk, d), V: (Lk, dv), G: (L, dv).
template <class T>
Gradients<T> favor_backward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                            const Mat<T>& G, bool causal = false, int threads = 1);

// Throws Error unless Q (L, d), K (Lk, d), V (Lk, dv), G (L, dv) fit (and, causal, Lk = L).
template <class T>
void check_backward_shapes(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G, bool causal);

}  // namespace favor
