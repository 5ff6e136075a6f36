#include "favor/theory.hpp"

#include <algorithm>
#include <cmath>

namespace favor {

double mse_trig_iid(double x2, double y2, double xy, std::size_t m) {
    // exp(|z|^2) SM^-2 = exp(x2 + y2); expm1 keeps (1 - exp(-|u|^2)) accurate near x = y.
    const double one_minus = -std::expm1(-u2_of(x2, y2, xy));
    return std::exp(x2 + y2) * one_minus * one_minus / (2.0 * double(m));
}

double mse_positive_iid(double x2, double y2, double xy, std::size_t m) {
    const double z2 = z2_of(x2, y2, xy);
    return std::exp(z2 + 2.0 * xy) * -std::expm1(-z2) / double(m);
}

double mse_hyperbolic_iid(double x2, double y2, double xy, std::size_t m) {
    return 0.5 * -std::expm1(-z2_of(x2, y2, xy)) * mse_positive_iid(x2, y2, xy, m);
}

double theorem2_bound(double x2, double y2, double xy, std::size_t m, std::size_t d) {
    const double c = std::exp(xy) - std::exp(-0.5 * (x2 + y2));
    double pairs = 0.0;   // sum over blocks of n_b (n_b - 1)
    for (std::size_t done = 0; done < m; done += d) {
        const double n = double(std::min(d, m - done));
        pairs += n * (n - 1.0);
    }
    return mse_positive_iid(x2, y2, xy, m) - 2.0 * c * c * pairs / ((double(d) + 2.0) * double(m) * double(m));
}

double oprf_feature_variance(double A, double x2, double y2, double xy, std::size_t d) {
    const double z2 = z2_of(x2, y2, xy);
    const double dd = double(d);
    const double log_first = dd * std::log1p(-4.0 * A) - 0.5 * dd * std::log1p(-8.0 * A) +
                             2.0 * (1.0 - 4.0 * A) * z2 / (1.0 - 8.0 * A) - x2 - y2;
    return std::exp(log_first) - std::exp(2.0 * xy);
}

double oprf_optimal_A(double rho) {
    return (1.0 - 2.0 * rho - std::sqrt((2.0 * rho + 1.0) * (2.0 * rho + 1.0) + 8.0 * rho)) / 16.0;
}

}  // namespace favor
