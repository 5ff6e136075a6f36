// The per-row output metrics (docs/design.md section 3): Out_hat (L, dv) of an estimator
// against the exact output Out (L, dv, float64), entry by entry.
#include "favor/metrics/output_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace favor {

template <class T>
double output_mse(const Mat<double>& exact, const Mat<T>& approx) {
    const double* a = exact.data();
    const T* b = approx.data();
    double s = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) {
        const double e = a[k] - double(b[k]);
        s += e * e;
    }
    return s / double(exact.size());
}

template <class T>
std::size_t count_nonfinite(const Mat<T>& a) {
    std::size_t n = 0;
    for (const T& v : a) n += std::isfinite(v) ? 0 : 1;
    return n;
}

namespace {
// sum (a_k - b_k)^2 and sum a_k^2 of the entries a = exact, b = approx times 2^-e.
template <class T>
std::pair<double, double> squared_norms(const Mat<double>& exact, const Mat<T>& approx, int e) {
    double num = 0.0, den = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) {
        const double x = std::ldexp(exact.data()[k], -e), d = x - std::ldexp(double(approx.data()[k]), -e);
        num += d * d;
        den += x * x;
    }
    return {num, den};
}
}  // namespace

// The plain sums where both stay normal and finite (the bits as always); otherwise (V x 1e300:
// squares overflow; a subnormal V: they underflow to 0, NaN either way) both norms of the
// entries times 2^-e, max |Out| = f 2^e: a power of two, so the ratio is the one wanted.
template <class T>
double output_rel_error(const Mat<double>& exact, const Mat<T>& approx) {
    double num = 0.0, den = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) {
        const double e = exact.data()[k] - double(approx.data()[k]);
        num += e * e;
        den += exact.data()[k] * exact.data()[k];
    }
    const double tiny = std::numeric_limits<double>::min();
    if (std::isfinite(num) && std::isfinite(den) && den >= tiny && (num == 0.0 || num >= tiny))
        return std::sqrt(num / den);
    double top = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) top = std::max(top, std::fabs(exact.data()[k]));
    int e = 0;
    if (std::isfinite(top)) std::frexp(top, &e);
    const auto [snum, sden] = squared_norms(exact, approx, e);
    return std::sqrt(snum / sden);
}

template <class T>
double loss_delta(const Mat<double>& exact, const Mat<T>& approx, const Mat<double>& G) {
    const double *a = exact.data(), *g = G.data();
    const T* b = approx.data();
    double s = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) s += g[k] * (double(b[k]) - a[k]);
    return s;
}

template <class T>
double read_rows_rel_error(const Mat<double>& exact, const Mat<T>& approx, const Mat<double>& G) {
    const std::size_t L = exact.shape(0), dv = exact.shape(1);
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < L; ++i)
        if (std::any_of(&G(i, 0), &G(i, 0) + dv, [](double x) { return x != 0.0; })) rows.push_back(i);
    if (rows.empty()) return std::numeric_limits<double>::quiet_NaN();
    Mat<double> e = Mat<double>::from_shape({rows.size(), dv});
    Mat<T> a = Mat<T>::from_shape({rows.size(), dv});
    for (std::size_t r = 0; r < rows.size(); ++r) {
        std::copy(&exact(rows[r], 0), &exact(rows[r], 0) + dv, &e(r, 0));
        std::copy(&approx(rows[r], 0), &approx(rows[r], 0) + dv, &a(r, 0));
    }
    return output_rel_error(e, a);   // (its scaling: no overflow in the squares)
}

template double output_rel_error<float>(const Mat<double>&, const Mat<float>&);
template double output_rel_error<double>(const Mat<double>&, const Mat<double>&);
template double output_mse<float>(const Mat<double>&, const Mat<float>&);
template double output_mse<double>(const Mat<double>&, const Mat<double>&);
template std::size_t count_nonfinite<float>(const Mat<float>&);
template std::size_t count_nonfinite<double>(const Mat<double>&);
template double loss_delta<float>(const Mat<double>&, const Mat<float>&, const Mat<double>&);
template double loss_delta<double>(const Mat<double>&, const Mat<double>&, const Mat<double>&);
template double read_rows_rel_error<float>(const Mat<double>&, const Mat<float>&, const Mat<double>&);
template double read_rows_rel_error<double>(const Mat<double>&, const Mat<double>&, const Mat<double>&);

}  // namespace favor
