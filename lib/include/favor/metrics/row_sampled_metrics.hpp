#pragma once
// Row-sampled metrics (docs/design.md section 3.1): the metric columns evaluated on the query
// rows of a RowSample, with each one's sampling standard error (<name>_row_sem).
#include <string>
#include <vector>

#include "favor/attention/pairwise_pass.hpp"
#include "favor/core/tensor.hpp"
#include "favor/metrics/metric_table.hpp"
#include "favor/metrics/row_sample.hpp"

namespace favor {

// The output metrics of the sampled rows (exact: Out's rows (N, dv), float64; out: Out_hat's
// same rows) and the pairwise metrics from the sampled rows' own sums (per_row, in row order;
// empty when req asks nothing) into v, each as the metric of those N rows; then, unless the
// sample is all rows, <name>_row_sem of each sampled_columns() entry present: row_sem() of its
// values with each jackknife group of rows left out (a blank metric leaves it blank).
template <class T>
void sampled_values(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                    const PairwiseRequest& req, const std::vector<PairwiseSums>& per_row, const RowSample& s,
                    MetricValues& v);

// The rows `rows` of a (L, c) matrix, in that order.
template <class T>
Mat<T> take_rows(const Mat<T>& a, const std::vector<std::size_t>& rows);

}  // namespace favor
