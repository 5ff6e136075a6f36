#include "favor/estimators/theory.hpp"

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

double log_hyp0f1(double b, double s) {
    if (s == 0.0) return 0.0;
    // term k+1 / term k = s / ((b + k)(k + 1)) decreases in k: the largest term is at the
    // first k where it drops below 1. Sum the terms relative to it, both ways from there.
    std::size_t peak = 0;
    double log_peak = 0.0;
    while (s / ((b + double(peak)) * double(peak + 1)) > 1.0) {
        log_peak += std::log(s / ((b + double(peak)) * double(peak + 1)));
        ++peak;
    }
    double sum = 1.0, t = 1.0;
    for (std::size_t k = peak; k > 0 && t > 1e-17 * sum; --k) {   // terms below the peak
        t *= (b + double(k - 1)) * double(k) / s;
        sum += t;
    }
    t = 1.0;
    for (std::size_t k = peak; t > 1e-17 * sum; ++k) {            // terms above it
        t *= s / ((b + double(k)) * double(k + 1));
        sum += t;
    }
    return log_peak + std::log(sum);
}

double hyp0f1_neg(double b, double s) {
    if (s <= b + 1.0) {
        double sum = 1.0, t = 1.0;
        for (std::size_t k = 0; std::fabs(t) > 1e-17 * std::fabs(sum) || k < 2; ++k) {
            t *= -s / ((b + double(k)) * double(k + 1));
            sum += t;
        }
        return sum;
    }
    const double r = 2.0 * std::sqrt(s);
    if (b == 0.5) return std::cos(r);
    return std::exp(std::lgamma(b) + (1.0 - b) * std::log(0.5 * r)) * std::cyl_bessel_j(b - 1.0, r);
}

double fixed_norm_positive_ratio(double x2, double y2, double xy, std::size_t p) {
    const double z2 = z2_of(x2, y2, xy), P = double(p);
    return std::exp(log_hyp0f1(0.5 * P, 0.25 * P * z2) - 0.5 * z2);
}

double fixed_norm_trig_ratio(double x2, double y2, double xy, std::size_t p) {
    const double u2 = std::max(0.0, u2_of(x2, y2, xy)), P = double(p);
    return std::exp(0.5 * u2) * hyp0f1_neg(0.5 * P, 0.25 * P * u2);
}

double oprf_optimal_A(double rho) {
    return (1.0 - 2.0 * rho - std::sqrt((2.0 * rho + 1.0) * (2.0 * rho + 1.0) + 8.0 * rho)) / 16.0;
}

}  // namespace favor
