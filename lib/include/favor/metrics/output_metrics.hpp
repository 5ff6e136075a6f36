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

// nonfinite: number of NaN / Inf entries.
template <class T>
std::size_t count_nonfinite(const Mat<T>& a);

}  // namespace favor
