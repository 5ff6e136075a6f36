#pragma once
// The positive estimator's statistics under the projections of tests/estimators/test_qmc_simplex_plus.cpp, shared
// with the measurement behind docs/estimators.md's numbers (bench/projplus_measure.cpp).
#include <cmath>
#include <cstdint>
#include <vector>

#include "helpers.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/structured.hpp"

namespace favor_test {

// Positive-feature estimates (through the library's map) of SM at pr, W(seed, p, m, d, t).
inline std::vector<double> positive_estimates(favor::Projection p, std::size_t m, const Pair& pr, std::size_t N,
                                              std::uint64_t seed) {
    return kernel_estimates(*map_named("positive"), p, m, pr, N, seed);
}

// The positive estimator from the first m rows of W (m, d), written out:
// exp(-(|x|^2 + |y|^2) / 2) (1/m) sum_i exp(w_i . (x + y)).
inline double positive_prefix(const Mat<double>& W, std::size_t m, const std::vector<double>& x,
                              const std::vector<double>& y) {
    double xx = 0, yy = 0, s = 0;
    for (std::size_t c = 0; c < x.size(); ++c) {
        xx += x[c] * x[c];
        yy += y[c] * y[c];
    }
    for (std::size_t i = 0; i < m; ++i) {
        double t = 0;
        for (std::size_t c = 0; c < x.size(); ++c) t += W(i, c) * (x[c] + y[c]);
        s += std::exp(t);
    }
    return std::exp(-0.5 * (xx + yy)) * s / double(m);
}

// Kernel MSE of the positive estimator at |x| = |y| = 0.5, x orthogonal to y, d = 16, in a
// Haar frame drawn per trial; trials [k T, (k+1) T) for the k-th m, so the m are independent.
struct SlopeFit {
    std::vector<double> mse, mse_se;
    double slope = 0, slope_se = 0;
};

inline SlopeFit mse_by_m(favor::Projection p, const std::vector<std::size_t>& ms, std::size_t T, double angle, std::uint64_t seed) {
    const std::size_t d = 16;
    SlopeFit f;
    for (std::size_t k = 0; k < ms.size(); ++k) {
        std::vector<double> est(T);
        for (std::size_t t = 0; t < T; ++t) {
            const std::uint64_t trial = k * T + t;
            const Mat<double> F = favor::orthogonal_block(favor::stream_key({seed, favor::tag("projplus-frame"), trial}), d, true);
            std::vector<double> x(d), y(d);
            for (std::size_t c = 0; c < d; ++c) {
                x[c] = 0.5 * F(0, c);
                y[c] = 0.5 * (std::cos(angle) * F(0, c) + std::sin(angle) * F(1, c));
            }
            est[t] = positive_prefix(favor::draw_projection(p, ms[k], d, seed, trial), ms[k], x, y);
        }
        const Sample s = describe(est, std::exp(0.25 * std::cos(angle)));
        f.mse.push_back(s.mse);
        f.mse_se.push_back(s.mse_se);
    }
    // Weighted least squares of log MSE on log m, weights 1 / var(log MSE) = (MSE / se)^2.
    double sw = 0, sx = 0, sy = 0;
    for (std::size_t k = 0; k < ms.size(); ++k) {
        const double w = std::pow(f.mse[k] / f.mse_se[k], 2);
        sw += w;
        sx += w * std::log(double(ms[k]));
        sy += w * std::log(f.mse[k]);
    }
    double sxx = 0, sxy = 0;
    for (std::size_t k = 0; k < ms.size(); ++k) {
        const double w = std::pow(f.mse[k] / f.mse_se[k], 2), dx = std::log(double(ms[k])) - sx / sw;
        sxx += w * dx * dx;
        sxy += w * dx * (std::log(f.mse[k]) - sy / sw);
    }
    f.slope = sxy / sxx;
    f.slope_se = 1.0 / std::sqrt(sxx);
    return f;
}

}  // namespace favor_test
