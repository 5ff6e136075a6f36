// Random projections: orthogonality, chi(d) row norms, Haar sign balance, purity of seeding.
#include <catch2/catch.hpp>
#include <cmath>

#include "helpers.hpp"
#include "favor/projections.hpp"
#include "favor/structured.hpp"
#include "favor/rng.hpp"

using namespace favor;
using favor_test::dot_rows;

TEST_CASE("orthogonal projections have orthogonal rows within each block", "[projections]") {
    const std::size_t d = GENERATE(4, 16, 64);
    const std::size_t m = GENERATE(3, 16, 40, 128);
    const Projection p = GENERATE(Projection::orthogonal, Projection::orthogonal_fixed, Projection::orthogonal_nosignfix);
    CAPTURE(d, m, projection_name(p));
    const Mat<double> W = draw_projection(p, m, d, 7, 3);
    REQUIRE(W.shape(0) == m);
    REQUIRE(W.shape(1) == d);
    for (std::size_t a = 0; a < m; ++a)
        for (std::size_t b = a + 1; b < m && b / d == a / d; ++b) {
            const double cos_ab = dot_rows(W, a, b) / std::sqrt(dot_rows(W, a, a) * dot_rows(W, b, b));
            REQUIRE(std::fabs(cos_ab) < 1e-12);
        }
    if (p == Projection::orthogonal_fixed)
        for (std::size_t a = 0; a < m; ++a) REQUIRE(std::sqrt(dot_rows(W, a, a)) == Approx(std::sqrt(double(d))).epsilon(1e-12));
}

TEST_CASE("W is a pure function of (seed, projection, m, d, trial), nested in m", "[projections]") {
    for (Projection p : {Projection::iid, Projection::orthogonal, Projection::orthogonal_fixed}) {
        const Mat<double> a = draw_projection(p, 40, 16, 11, 2), b = draw_projection(p, 40, 16, 11, 2);
        const bool same = a == b;
        REQUIRE(same);
        const Mat<double> small = draw_projection(p, 20, 16, 11, 2);
        for (std::size_t r = 0; r < 20; ++r)
            for (std::size_t c = 0; c < 16; ++c) REQUIRE(small(r, c) == a(r, c));
        const bool other_trial = draw_projection(p, 40, 16, 11, 3) != a, other_seed = draw_projection(p, 40, 16, 12, 2) != a;
        REQUIRE(other_trial);
        REQUIRE(other_seed);
    }
}

TEST_CASE("orthogonal row norms follow chi(d): mean and variance", "[projections][stats]") {
    const std::size_t d = GENERATE(4, 16);
    CAPTURE(d);
    // Collect norms over many trials of one block each.
    std::vector<double> norms;
    for (std::uint64_t t = 0; t < 4000; ++t) {
        const Mat<double> W = draw_projection(Projection::orthogonal, d, d, 5, t);
        for (std::size_t r = 0; r < d; ++r) norms.push_back(std::sqrt(dot_rows(W, r, r)));
    }
    const double n = double(norms.size());
    // chi(d): mean sqrt(2) Gamma((d+1)/2) / Gamma(d/2), variance d - mean^2.
    const double mu = std::sqrt(2.0) * std::exp(std::lgamma((d + 1) / 2.0) - std::lgamma(d / 2.0));
    const double var = double(d) - mu * mu;
    double mean = 0, m2 = 0, m4 = 0;
    for (double x : norms) mean += x / n;
    for (double x : norms) {
        m2 += (x - mean) * (x - mean) / (n - 1);
        m4 += std::pow(x - mu, 4) / n;
    }
    // Rows within a block have independent norms; standard errors from the chi moments.
    REQUIRE(std::fabs(mean - mu) < 4.0 * std::sqrt(var / n));
    const double se_var = std::sqrt((m4 - var * var) / n);
    REQUIRE(std::fabs(m2 - var) < 4.0 * se_var);
}

TEST_CASE("sign correction makes directions sign-unbiased, without it they are biased", "[projections][stats]") {
    const std::size_t d = 8, N = 3000;
    std::size_t pos_fixed = 0, pos_raw = 0, total = 0;
    for (std::uint64_t b = 0; b < N; ++b) {
        const std::uint64_t key = stream_key({99, b});
        const Mat<double> fixed = orthogonal_block(key, d, true), raw = orthogonal_block(key, d, false);
        for (std::size_t j = 0; j < d; ++j) {   // diagonal coordinates of each row
            pos_fixed += fixed(j, j) > 0;
            pos_raw += raw(j, j) > 0;
            ++total;
        }
    }
    const double p_fixed = double(pos_fixed) / double(total), p_raw = double(pos_raw) / double(total);
    CAPTURE(p_fixed, p_raw);
    // Balanced within 4 binomial standard errors (rows are not independent: use the block count).
    REQUIRE(std::fabs(p_fixed - 0.5) < 4.0 * 0.5 / std::sqrt(double(N)));
    // Householder QR without the correction makes Q_jj's sign anything but balanced.
    REQUIRE(std::fabs(p_raw - 0.5) > 0.2);
}

TEST_CASE("iid projections have standard normal entries", "[projections][stats]") {
    const Mat<double> W = draw_projection(Projection::iid, 4096, 16, 1, 0);
    const double n = double(W.size());
    double mean = 0, var = 0;
    for (double v : W) mean += v / n;
    for (double v : W) var += (v - mean) * (v - mean) / (n - 1);
    REQUIRE(std::fabs(mean) < 4.0 / std::sqrt(n));
    REQUIRE(std::fabs(var - 1.0) < 4.0 * std::sqrt(2.0 / n));
}
