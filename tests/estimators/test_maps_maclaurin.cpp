// maclaurin (random Maclaurin features, lib/src/estimators/maps/maclaurin.cpp): the features
// against a direct double loop over the documented draws, unbiasedness and the closed-form
// variance 2 I_0(2 sqrt(2M)) - exp(2 x.y) by Monte Carlo, determinism (threads, nesting in m),
// and the projections it refuses. Fixed seeds throughout.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "helpers.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/projections.hpp"

using namespace favor;
using favor_test::Pair;

namespace {

// phi_r(x) for every r by the definition (docs/estimators.md): key_r the row's float32 bits
// folded by stream_key, N_r the trailing zeros of stream (key_r, 0), signs from stream
// (key_r, 1); phi_r = sqrt(2^(N+1) / (N! m)) prod_i (w_{r,i} . x), in long double.
std::vector<double> reference_phi(const Mat<double>& W, const std::vector<double>& x) {
    const std::size_t m = W.shape(0), d = W.shape(1);
    std::vector<double> phi(m);
    for (std::size_t r = 0; r < m; ++r) {
        std::uint64_t key = tag("maclaurin-row");
        for (std::size_t c = 0; c < d; ++c) {
            const float f = float(W(r, c));
            std::uint32_t b;
            std::memcpy(&b, &f, 4);
            key = stream_key({key, b});
        }
        int N = 0;
        for (std::uint64_t j = 0;; ++j) {
            const std::uint64_t word = stream_key({key, 0, j});
            int z = 0;
            while (z < 64 && !((word >> z) & 1)) ++z;
            N += z;
            if (z < 64) break;
        }
        long double prod = 1.0L;
        for (int i = 0; i < N; ++i) {
            long double dot = 0.0L;
            for (std::size_t c = 0; c < d; ++c) {
                const std::size_t bit = std::size_t(i) * d + c;
                const bool minus = (stream_key({key, 1, bit / 64}) >> (bit % 64)) & 1;
                dot += minus ? -(long double)x[c] : (long double)x[c];
            }
            prod *= dot;
        }
        long double fact = 1.0L;
        for (int k = 2; k <= N; ++k) fact *= k;
        phi[r] = double(std::sqrt(std::pow(2.0L, N + 1) / (fact * (long double)m)) * prod);
    }
    return phi;
}

// The unstabilised features exp(log_scale_i) phi~_i of the rows X (unscaled: xs = 1).
template <class T>
Mat<double> plain_features(const FeatureMap& f, const Mat<T>& X, const Mat<T>& W, Side side, int threads = 1) {
    const Features<T> ft = compute_features<T>(f, X, 1.0, W, side, threads);
    Mat<double> out = Mat<double>::from_shape({X.shape(0), ft.phi.shape(1)});
    for (std::size_t i = 0; i < X.shape(0); ++i)
        for (std::size_t j = 0; j < ft.phi.shape(1); ++j) out(i, j) = double(ft.phi(i, j)) * std::exp(ft.log_scale[i]);
    return out;
}

// Exact second moment of one feature Z = m phi_r(x) phi_r(y), minus SM^2: the closed form.
double feature_variance(const Pair& p) {
    double s = 0;
    for (std::size_t l = 0; l < p.x.shape(1); ++l) s += p.x(0, l) * p.x(0, l) * p.y(0, l) * p.y(0, l);
    const double M = p.x2 * p.y2 + 2 * p.xy * p.xy - 2 * s;
    return 2 * std::cyl_bessel_i(0.0, 2 * std::sqrt(2 * M)) - p.sm() * p.sm();
}

}  // namespace

TEST_CASE("maclaurin features are the definition evaluated directly", "[maclaurin]") {
    const FeatureMapPtr f = favor_test::map_named("maclaurin");
    const std::size_t m = 64, d = 6, L = 7;
    const Mat<double> W = draw_projection(Projection("iid"), m, d, 3, 0);
    Mat<double> X = draw_projection(Projection("iid"), L, d, 4, 0);   // any rows; norms ~ 2.4
    for (Side side : {Side::query, Side::key}) {
        const Mat<double> phi = plain_features(*f, X, W, side);
        for (std::size_t i = 0; i < L; ++i) {
            const std::vector<double> ref = reference_phi(W, std::vector<double>(X.data() + i * d, X.data() + (i + 1) * d));
            for (std::size_t r = 0; r < m; ++r) {
                CAPTURE(i, r, phi(i, r), ref[r]);
                REQUIRE(std::fabs(phi(i, r) - ref[r]) <= 1e-12 * std::fabs(ref[r]) + 1e-300);
            }
        }
    }
    // float32: the same draws (W's rows hash as float32), the features to float32 rounding of
    // a few products.
    const Mat<double> p32 = plain_features(*f, cast_mat<float>(X), cast_mat<float>(W), Side::query);
    const Mat<double> p64 = plain_features(*f, X, W, Side::query);
    for (std::size_t k = 0; k < p64.size(); ++k)
        REQUIRE(std::fabs(p32.data()[k] - p64.data()[k]) <= 1e-4 * std::fabs(p64.data()[k]) + 1e-30);
}

TEST_CASE("maclaurin is unbiased and its variance is 2 I0(2 sqrt(2M)) - exp(2x.y)", "[maclaurin][stats]") {
    // T trials of m = 8 features (iid W, fixed seeds) at four d = 4 pairs, the last two of
    // moderately large norms (|x|^2 up to 1.8; one feature's kurtosis up to 13). The mean
    // within 4 standard errors of the closed-form variance; the sample variance of the
    // trials' estimates within 4 of its own standard errors, sqrt((mu4 - s^4) / T) with mu4
    // the sample fourth central moment.
    const FeatureMapPtr f = favor_test::map_named("maclaurin");
    const std::vector<Pair> pts = {favor_test::make_pair({.3, -.2, .5, .1}, {.4, .1, -.3, .2}),
                                   favor_test::make_pair({.6, -.4, .5, .3}, {.5, .3, -.2, .6}),
                                   favor_test::make_pair({.8, -.5, .6, .4}, {.7, .2, .5, -.3}),
                                   favor_test::make_pair({1, -.5, .4, .6}, {.9, .5, -.3, .6})};
    const std::size_t T = 20000, m = 8;
    for (std::size_t k = 0; k < pts.size(); ++k) {
        const Pair& p = pts[k];
        const std::vector<double> est = favor_test::kernel_estimates(*f, Projection("iid"), m, p, T, 50 + k, false);
        double mean = 0;
        for (double e : est) mean += e / double(T);
        double var = 0, mu4 = 0;
        for (double e : est) {
            var += (e - mean) * (e - mean) / double(T - 1);
            mu4 += std::pow(e - mean, 4) / double(T);
        }
        const double theory = feature_variance(p) / double(m);
        const std::optional<double> mse = pair_mse_at(*f, p.x, p.y, m);
        REQUIRE(mse);
        REQUIRE(*mse == Approx(theory).epsilon(1e-12));
        const double se_mean = std::sqrt(theory / double(T)), se_var = std::sqrt((mu4 - var * var) / double(T));
        WARN("maclaurin pair " << k << ": SM " << p.sm() << " mean " << mean << " (se " << se_mean << "); variance of the m = "
                               << m << " estimate " << var << " +- " << se_var << ", closed form " << theory);
        REQUIRE(std::fabs(mean - p.sm()) < 4 * se_mean);
        REQUIRE(std::fabs(var - theory) < 4 * se_var);
    }
}

TEST_CASE("maclaurin: the same numbers on 1 and 2 threads, feature r the same for every m", "[maclaurin]") {
    const FeatureMapPtr f = favor_test::map_named("maclaurin");
    const std::size_t d = 8, L = 600;   // 3 blocks of feature rows
    const Mat<double> X = draw_projection(Projection("iid"), L, d, 9, 0) * 0.3;
    const Mat<double> W64 = draw_projection(Projection("iid"), 64, d, 11, 2);
    const Mat<double> W16 = draw_projection(Projection("iid"), 16, d, 11, 2);
    for (Side side : {Side::query, Side::key}) {
        const Features<double> one = compute_features(*f, X, 1.0, W64, side, 1);
        const Features<double> two = compute_features(*f, X, 1.0, W64, side, 2);
        REQUIRE(std::memcmp(one.phi.data(), two.phi.data(), one.phi.size() * sizeof(double)) == 0);
        REQUIRE(one.log_scale == two.log_scale);
    }
    // Nested: sqrt(m) phi_r is the same for r < 16 with m = 16 and m = 64.
    const Mat<double> a = plain_features(*f, X, W16, Side::query), b = plain_features(*f, X, W64, Side::query);
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t r = 0; r < 16; ++r) {
            CAPTURE(i, r);
            REQUIRE(std::fabs(4.0 * a(i, r) - 8.0 * b(i, r)) <= 1e-13 * std::fabs(8.0 * b(i, r)) + 1e-300);
        }
}

TEST_CASE("maclaurin takes the iid projection only", "[maclaurin]") {
    REQUIRE(favor_test::map_named("maclaurin", {{"projection", "iid"}}));
    const std::string e = favor_test::error_of([] { favor_test::map_named("maclaurin", {{"projection", "orthogonal"}}); });
    CAPTURE(e);
    REQUIRE(e.find("takes only \"iid\"") != std::string::npos);
    REQUIRE(e.find("'orthogonal'") != std::string::npos);
}
