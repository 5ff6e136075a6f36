#pragma once
// The backward pass of linear (random-feature) attention and of the whole FAVOR estimator:
// the gradients with respect to Q, K and V for an upstream gradient G = dLoss/dOut
// (docs/design.md section 2.7), deterministic as backward_exact.hpp's.
#include <vector>

#include "favor/attention/backward_exact.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/feature_grad.hpp"

namespace favor {

// Gradients of Out = D^{-1} phiQ (Psi^T [V, 1]), Psi_j = exp(lk_j - M) phiK_j (the ratio
// estimator of docs/design.md section 2.2 on stabilised features, M = max lk) with respect to
// phiQ, phiK (key_log_scale held fixed) and V.
// phiQ: (L, F), phiK: (Lk, F), key_log_scale: (Lk), V: (Lk, dv), G: (L, dv);
// returns dphiQ (L, F), dphiK (Lk, F), dV (Lk, dv). Causal (Lk = L): reverse prefix sums (one
// thread); non-causal: row blocks on up to `threads` threads, the same numbers for any count.
template <class T>
struct FeatureGradients {
    Mat<T> dphiQ, dphiK, dV;
};
template <class T>
FeatureGradients<T> linear_attention_backward(const Mat<T>& phiQ, const Mat<T>& phiK,
                                              const std::vector<double>& key_log_scale, MatView<T> V, MatView<T> G,
                                              bool causal = false, int threads = 1);

// The whole estimator's gradient (the forward is favor_attention's) with est's W and (fitted,
// then fixed) map, each side through the map's Jacobian (FeatureMap::vjp). Non-causal, where
// backward_saves (every map with a gradient): favor_forward_saved, then favor_backward_saved's
// fused pass; otherwise (causal) both feature matrices, the feature gradients above, then
// feature_vjp. est must be fitted (Estimator::for_inputs).
// Throws Error for maps without a gradient (nystrom; epsilon > 0 after a shifted exp) and for
// the emulated half dtypes. The features are made with their shifts whatever est.shift says
// (the gradient is the same: docs/design.md section 2.7). For a metric: fit est once
// (for_inputs), then favor_backward(est, Q, K, V, G) beside exact_attention_backward(Q, K, V, G).
// Q: (L, d), K: (Lk, d), V: (Lk, dv), G: (L, dv).
template <class T>
Gradients<T> favor_backward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                            const Mat<T>& G, bool causal = false, int threads = 1);

// The same from the state its forward kept (favor_forward_saved(est, Q, K, V, causal)), the
// training-step form: per block of rows the features again, the output gradient's products
// with the saved key sums, the feature Jacobians, in favor's tile kernels, no (L, F) matrix
// (twice the forward's products; favor_backward is this after favor_forward_saved). A state
// with nothing saved (causal, or !backward_saves) runs favor_backward's other path from both
// feature matrices. Throws Error where favor_backward does, and for a state of other shapes.
template <class T>
Gradients<T> favor_backward_saved(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, MatView<T> G,
                                  const ForwardState<T>& state, bool causal = false, int threads = 1);

}  // namespace favor
