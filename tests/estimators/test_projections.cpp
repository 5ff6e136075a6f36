// Random projections: chi(d) row norms, Haar sign balance, iid entries. Orthogonality, fixed
// norms, purity of seeding and nesting in m are checked for every projection by
// test_projection_contract.cpp.
#include <catch2/catch.hpp>
#include <cmath>

#include "helpers.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/structured.hpp"

using namespace favor;
using favor_test::dot_rows;

TEST_CASE("orthogonal row norms follow chi(d): mean and variance", "[projections][stats]") {
    const std::size_t d = GENERATE(4, 16);
    CAPTURE(d);
    // Collect norms over many trials of one block each.
    std::vector<double> norms;
    for (std::uint64_t t = 0; t < 4000; ++t) {
        const Mat<double> W = draw_projection(Projection("orthogonal"), d, d, 5, t);
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
    const Mat<double> W = draw_projection(Projection("iid"), 4096, 16, 1, 0);
    const double n = double(W.size());
    double mean = 0, var = 0;
    for (double v : W) mean += v / n;
    for (double v : W) var += (v - mean) * (v - mean) / (n - 1);
    REQUIRE(std::fabs(mean) < 4.0 / std::sqrt(n));
    REQUIRE(std::fabs(var - 1.0) < 4.0 * std::sqrt(2.0 / n));
}
