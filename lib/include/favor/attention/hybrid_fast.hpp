#pragma once
// The fast path of window / sinks hybrids (docs/design.md section 2.8, lib/src/attention/hybrid_fast.cpp):
// the same estimate as hybrid_attention (the reference path) up to the rounding of the compute
// dtype, in O(L (w + s + F) d) time instead of O(L Lk (d + F)):
//   Out_i = sum_j K_ij v_j / sum_j K_ij,  K_ij = exp(x_i.y_j) on E(i), phi(x_i).phi(y_j) elsewhere,
// the exact keys and the remainder keys next to the band made per block of query rows, the
// remainder keys farther away through prefix (causal) or prefix and suffix (non-causal) sums
// of phi(y_j) [v_j, 1] over whole key blocks.
#include "favor/core/tensor.hpp"

namespace favor {

template <class T>
struct Estimator;

// Whether hybrid_fast runs for this estimator: a window / sinks support (not the top-k
// oracle) and no half-precision emulation (half dtypes stay on the reference path).
template <class T>
bool hybrid_fast_applies(const Estimator<T>& est);

// All rows of the hybrid estimate (est.hybrid active, hybrid_fast_applies). Query blocks of a
// fixed size, each on one thread, key-block sums added in block order: the numbers do not
// depend on `threads`. Q: (L, d), K: (Lk, d), V: (Lk, dv); returns (L, dv).
template <class T>
Mat<T> hybrid_fast(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal = false,
                   int threads = 1);

// All rows of a hybrid: hybrid_fast where it applies, hybrid_attention otherwise (what
// favor apply, the Python module, the timing experiment and full-row approximation runs call).
template <class T>
Mat<T> hybrid_forward(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal = false,
                      int threads = 1);

// The same into `out`, whose storage is reused when it already has the shape (L, dv), as
// favor_forward_into: a caller that runs or times many calls (the timing experiment, the
// approximation runner's workers) maps and zeroes no fresh output pages per call.
template <class T>
void hybrid_forward_into(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out,
                         bool causal = false, int threads = 1);

}  // namespace favor
