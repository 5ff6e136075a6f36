#pragma once
// The fused non-causal backward of the FAVOR estimator (backward_fused.cpp), from the state
// its forward kept (favor/attention/favor_forward.hpp ForwardState); favor_backward_saved calls it.
#include "favor/attention/backward_exact.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/estimators/estimator.hpp"

namespace favor {

// dQ, dK, dV for G (L, dv) from `state` (state.saved(), made by favor_forward_saved for the
// same est, Q, K, V): features per block, no (L, F) matrix; the numbers do not depend on
// `threads`. Shapes are the caller's to check.
template <class T>
Gradients<T> fused_backward(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, MatView<T> G,
                            const ForwardState<T>& state, int threads);

}  // namespace favor
