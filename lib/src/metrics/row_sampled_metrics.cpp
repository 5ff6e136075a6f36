// Row-sampled metrics and their delete-a-group jackknife standard errors (docs/design.md 3.1).
#include "favor/metrics/row_sampled_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace favor {

template <class T>
Mat<T> take_rows(const Mat<T>& a, const std::vector<std::size_t>& rows) {
    const std::size_t c = a.shape(1);
    Mat<T> out = Mat<T>::from_shape({rows.size(), c});
    for (std::size_t r = 0; r < rows.size(); ++r) std::copy(a.data() + rows[r] * c, a.data() + (rows[r] + 1) * c, out.data() + r * c);
    return out;
}

namespace {
// The matrix without its rows [b, e).
template <class T>
Mat<T> without_rows(const Mat<T>& a, std::size_t b, std::size_t e) {
    const std::size_t n = a.shape(0), c = a.shape(1);
    Mat<T> out = Mat<T>::from_shape({n - (e - b), c});
    std::copy(a.data(), a.data() + b * c, out.data());
    std::copy(a.data() + e * c, a.data() + n * c, out.data() + b * c);
    return out;
}

// The rows' sums in row order, without the rows [b, e).
PairwiseSums sums_without(const std::vector<PairwiseSums>& per_row, std::size_t b, std::size_t e) {
    PairwiseSums t;
    for (std::size_t i = 0; i < per_row.size(); ++i)
        if (i < b || i >= e) t.add(per_row[i]);
    return t;
}

// Every metric of `columns` on the sample without the rows [b, e) (b = e: the whole sample).
template <class T>
MetricValues values_without(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                            const PairwiseRequest& req, const std::vector<PairwiseSums>& per_row, std::size_t b,
                            std::size_t e) {
    MetricValues v;
    if (b == e) output_values(columns, exact, out, v);
    else output_values(columns, without_rows(exact, b, e), without_rows(out, b, e), v);
    if (req.any()) pairwise_values(columns, req, pairwise_result(sums_without(per_row, b, e), req), v);
    return v;
}
}  // namespace

template <class T>
void sampled_values(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                    const PairwiseRequest& req, const std::vector<PairwiseSums>& per_row, const RowSample& s,
                    MetricValues& v) {
    for (const auto& [c, x] : values_without(columns, exact, out, req, per_row, 0, 0)) v[c] = x;
    if (s.all()) return;
    const std::size_t N = s.rows.size(), G = row_groups(N);
    std::map<std::string, std::vector<double>> deleted;   // per column, its value without each group
    for (std::size_t g = 0; g < G; ++g) {
        const MetricValues vg =
            values_without(columns, exact, out, req, per_row, group_begin(g, G, N), group_begin(g + 1, G, N));
        for (const auto& c : sampled_columns(columns)) {
            const auto it = vg.find(c);
            deleted[c].push_back(it != vg.end() && it->second ? *it->second : std::numeric_limits<double>::quiet_NaN());
        }
    }
    for (const auto& c : sampled_columns(columns))
        if (const auto it = v.find(c); it != v.end() && it->second) v[row_sem_column(c)] = row_sem(*it->second, deleted[c], s);
}

template void sampled_values<float>(const std::vector<std::string>&, const Mat<double>&, const Mat<float>&,
                                    const PairwiseRequest&, const std::vector<PairwiseSums>&, const RowSample&,
                                    MetricValues&);
template void sampled_values<double>(const std::vector<std::string>&, const Mat<double>&, const Mat<double>&,
                                     const PairwiseRequest&, const std::vector<PairwiseSums>&, const RowSample&,
                                     MetricValues&);
template Mat<float> take_rows<float>(const Mat<float>&, const std::vector<std::size_t>&);
template Mat<double> take_rows<double>(const Mat<double>&, const std::vector<std::size_t>&);

}  // namespace favor
