#pragma once
// The per-row output metrics (docs/design.md section 3): an estimator's output Out_hat
// (L, dv, float32 or float64) against the exact output Out (L, dv, float64). The metric table
// (metric_table.hpp) points at these.
#include <cstddef>

#include "favor/core/tensor.hpp"

namespace favor {

// output_mse: mean over i, c of (Out - Out_hat)^2. exact: (L, dv) float64.
template <class T>
double output_mse(const Mat<double>& exact, const Mat<T>& approx);

// output_rel_error: ||Out - Out_hat||_F / ||Out||_F.
template <class T>
double output_rel_error(const Mat<double>& exact, const Mat<T>& approx);

// The loss-aware errors (issue 55 item 5), for the upstream gradient G = dLoss/dOut (L, dv,
// float64: a capture's g.npy, inputs.grad). loss_delta: sum over i, c of G_ic (Out_hat - Out)_ic,
// the first-order change of the loss the approximation makes (Taylor: Loss(Out_hat) - Loss(Out)
// = <G, Out_hat - Out> + O(|Out_hat - Out|^2)).
template <class T>
double loss_delta(const Mat<double>& exact, const Mat<T>& approx, const Mat<double>& G);

// output_rel_error over the rows G reads (G_i != 0: the positions the loss looks at, e.g. an
// MQAR model's query positions); NaN when G has no non-zero row or Out is 0 on those rows.
template <class T>
double read_rows_rel_error(const Mat<double>& exact, const Mat<T>& approx, const Mat<double>& G);

// nonfinite: number of NaN / Inf entries.
template <class T>
std::size_t count_nonfinite(const Mat<T>& a);

}  // namespace favor
