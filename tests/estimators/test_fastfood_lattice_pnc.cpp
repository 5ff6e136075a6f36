// The fastfood, lattice and orthogonal-pnc projections (lib/src/estimators/projections/fastfood.cpp,
// lattice.cpp, orthogonal_pnc.cpp):
// their constructions and distributional properties beyond the registry contract
// (test_projection_contract.cpp), and the positive estimator with them. Fixed seeds;
// tolerances are numbers of standard errors of the trials' own spread.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <vector>

#include "helpers.hpp"
#include "projplus_stats.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/qmc.hpp"
#include "favor/estimators/structured.hpp"

using namespace favor;
using favor_test::describe;
using favor_test::dot_rows;
using favor_test::positive_estimates;
using favor_test::Sample;

namespace {
// Mean and standard error of the columns of `x` (T samples, independent trials) against want.
void require_means(const std::vector<std::vector<double>>& x, const std::vector<double>& want, double nse) {
    for (std::size_t k = 0; k < want.size(); ++k) {
        std::vector<double> col;
        for (const auto& row : x) col.push_back(row[k]);
        const auto [mean, se] = favor_test::mean_se(col);
        CAPTURE(k, mean, se, want[k]);
        REQUIRE(std::fabs(mean - want[k]) < nse * se);
    }
}
}  // namespace

TEST_CASE("fastfood: row norms are the chi(p) draws, E[w w^T] = I_d at every row, truncated or not",
          "[projections][fastfood][stats]") {
    // d = 8 (p = 8, square blocks) and d = 5 (p = 8, truncated): m = 12 rows (a block and a
    // half). Per row r, the trial means of W_ri W_rj over T = 2000 trials within 5 standard
    // errors of delta_ij.
    for (std::size_t d : {8u, 5u}) {
        const std::size_t m = 12, T = 2000, p = next_pow2(d);
        std::vector<std::vector<double>> prods;
        for (std::uint64_t t = 0; t < T; ++t) {
            const Mat<double> W = draw_projection(Projection("fastfood"), m, d, 77, t);
            if (d == p) {   // |w_r| = chi(p)_r from the norm stream, exactly (S of S H G Pi H B)
                const std::uint64_t key = stream_key({77, tag("W-fastfood-norms"), d, t});
                for (std::size_t r = 0; r < m; ++r)
                    REQUIRE(std::sqrt(dot_rows(W, r, r)) == Approx(chi_at(key, r, p)).epsilon(1e-13));
            }
            std::vector<double> row;
            for (std::size_t r = 0; r < m; ++r)
                for (std::size_t i = 0; i < d; ++i)
                    for (std::size_t j = i; j < d; ++j) row.push_back(W(r, i) * W(r, j));
            prods.push_back(row);
        }
        std::vector<double> want;
        for (std::size_t r = 0; r < m; ++r)
            for (std::size_t i = 0; i < d; ++i)
                for (std::size_t j = i; j < d; ++j) want.push_back(i == j ? 1.0 : 0.0);
        CAPTURE(d);
        require_means(prods, want, 5.0);
    }
}

TEST_CASE("fastfood: a block before S is H G Pi H B: rows of equal norm, Gram H G^2 H / (|G|^2/p)",
          "[projections][fastfood]") {
    // With d = p the unit rows u_i of a block have u_i.u_j = (H diag(G^2) H)_ij / (|G|^2 / p):
    // its trace is p and, H being symmetric orthogonal, its eigenvalues are p G_l^2 / |G|^2,
    // so sum_ij (u_i.u_j)^2 = p^2 sum_l G_l^4 / |G|^4, with G the block's normals.
    const std::size_t d = 16;
    const Mat<double> W = draw_projection(Projection("fastfood"), d, d, 5, 0);
    const std::uint64_t block = stream_key({5, tag("W-fastfood-block"), d, 0, 0});
    std::vector<double> G(d);
    fill_normal(stream_key({block, 1}), G.data(), d);
    double g2 = 0, g4 = 0;
    for (double g : G) g2 += g * g, g4 += g * g * g * g;
    double frob = 0;
    for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < d; ++j) {
            const double c = dot_rows(W, i, j) / std::sqrt(dot_rows(W, i, i) * dot_rows(W, j, j));
            frob += c * c;
        }
    REQUIRE(frob == Approx(double(d * d) * g4 / (g2 * g2)).epsilon(1e-12));
}

TEST_CASE("lattice: the first 2^k rows are the shifted rank-1 lattice {l z / 2^k + Delta}", "[projections][lattice]") {
    // Phi(W_ij) - Delta_j mod 1 is l z_j / 2^k: times 2^k an integer; coordinate 1 (z_1 = 1)
    // takes each of the 2^k values once (one point per stratum); the lattice is closed under
    // addition (point a + point b mod 1 is a point).
    const std::size_t d = 6, m = 64;
    const Mat<double> W = draw_projection(Projection("lattice"), m, d, 9, 4);
    const std::uint64_t key = stream_key({9, tag("W-lattice-shift"), d, 4});
    std::vector<std::vector<long>> pts(m, std::vector<long>(d));
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < d; ++j) {
            double u = 0.5 * std::erfc(-W(i, j) / std::sqrt(2.0)) - uniform_at(key, j);
            u -= std::floor(u);
            const double scaled = u * double(m);
            CAPTURE(i, j, scaled);
            REQUIRE(std::fabs(scaled - std::round(scaled)) < 1e-7);
            pts[i][j] = long(std::lround(scaled)) % long(m);
        }
    std::set<long> first;
    for (const auto& p : pts) first.insert(p[0]);
    REQUIRE(first.size() == m);
    std::set<std::vector<long>> all(pts.begin(), pts.end());
    for (std::size_t a = 0; a < m; a += 7)
        for (std::size_t b = 0; b < m; b += 5) {
            std::vector<long> s(d);
            for (std::size_t j = 0; j < d; ++j) s[j] = (pts[a][j] + pts[b][j]) % long(m);
            REQUIRE(all.count(s) == 1);
        }
}

TEST_CASE("lattice: the positive estimator is unbiased, and its MSE below iid at m = 64", "[projections][lattice][stats]") {
    // Unbiased: every row is N(0, I_d) (the random shift makes each point uniform), so the
    // mean of N estimates is within 5 standard errors of SM at the three d = 4 points.
    const std::size_t N = 4000;
    const auto pts = favor_test::small_norm_points();
    for (std::size_t m : {4u, 64u})
        for (std::size_t i = 0; i < pts.size(); ++i) {
            const Sample s = describe(positive_estimates(Projection("lattice"), m, pts[i], N, 9100 + i), pts[i].sm());
            CAPTURE(m, i, pts[i].sm(), s.mean, s.se, s.mse, s.mse_se);
            REQUIRE(std::fabs(s.mean - pts[i].sm()) < 5.0 * s.se);
            if (m == 64) {
                const Sample iid = describe(positive_estimates(Projection("iid"), m, pts[i], N, 9100 + i), pts[i].sm());
                CAPTURE(iid.mse, iid.mse_se);
                REQUIRE(s.mse + 4.0 * std::hypot(s.mse_se, iid.mse_se) < iid.mse);
            }
        }
}

TEST_CASE("orthogonal-pnc: ORF's directions, the norms of rows 2k, 2k+1 antithetic: F(r_a) + F(r_b) = 1",
          "[projections][pnc]") {
    // chi(4) CDF F(r) = 1 - exp(-r^2/2) (1 + r^2/2); d = 5 (odd): the block's last row alone,
    // with F(r) = P(5/2, r^2/2) (not checked here). Directions are orthogonal's, same stream.
    const auto F4 = [](double r) { return 1.0 - std::exp(-0.5 * r * r) * (1.0 + 0.5 * r * r); };
    for (std::uint64_t t = 0; t < 50; ++t) {
        const Mat<double> W = draw_projection(Projection("orthogonal-pnc"), 12, 4, 21, t);
        const Mat<double> O = draw_projection(Projection("orthogonal"), 12, 4, 21, t);
        for (std::size_t r = 0; r < 12; ++r) {
            const double nw = std::sqrt(dot_rows(W, r, r)), no = std::sqrt(dot_rows(O, r, r));
            for (std::size_t c = 0; c < 4; ++c) REQUIRE(W(r, c) / nw == Approx(O(r, c) / no).margin(1e-13));
            if (r % 2 == 1) {
                const double na = std::sqrt(dot_rows(W, r - 1, r - 1));
                REQUIRE(F4(na) + F4(nw) == Approx(1.0).margin(1e-13));
            }
        }
    }
    const Mat<double> odd = draw_projection(Projection("orthogonal-pnc"), 10, 5, 21, 0);
    REQUIRE(odd.shape(0) == 10);
}

TEST_CASE("orthogonal-pnc: trig MSE below orthogonal's (paired: same directions)", "[projections][pnc][stats]") {
    // d = m = 4, |x| = |y| = 0.5 at angle 2 (a random frame per trial is not needed: both are
    // rotation invariant). The paired difference of squared errors over N trials is below 0 by
    // more than 4 of its standard errors (measured: MSE 0.0034 against 0.0056 at m = 16).
    const std::size_t N = 4000, m = 4;
    const double a = 2.0;
    const favor_test::Pair p = favor_test::make_pair({0.5, 0, 0, 0}, {0.5 * std::cos(a), 0.5 * std::sin(a), 0, 0});
    const FeatureMapPtr trig = favor_test::map_named("trig");
    const std::vector<double> pnc = favor_test::kernel_estimates(*trig, Projection("orthogonal-pnc"), m, p, N, 31);
    const std::vector<double> orf = favor_test::kernel_estimates(*trig, Projection("orthogonal"), m, p, N, 31);
    std::vector<double> diff(N);
    for (std::size_t t = 0; t < N; ++t)
        diff[t] = (pnc[t] - p.sm()) * (pnc[t] - p.sm()) - (orf[t] - p.sm()) * (orf[t] - p.sm());
    const auto [dm, dse] = favor_test::mean_se(diff);
    const Sample s = describe(pnc, p.sm());
    CAPTURE(dm, dse, s.mse, s.mean, s.se);
    REQUIRE(dm + 4.0 * dse < 0.0);
    REQUIRE(std::fabs(s.mean - p.sm()) < 5.0 * s.se);   // unbiased (rows exactly N(0, I_d))
}
