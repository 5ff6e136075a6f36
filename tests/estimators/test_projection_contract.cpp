// The contract of every projection in the registry (projections.hpp), checked by walking the
// registry, so a new projection is checked the day it is added: W (m, d) is a pure function of
// (seed, m, d, trial) that changes with the trial and the seed, nested in m; d outside
// [min_d, max_d] is refused; and each property flag the entry claims holds:
//   kGaussianRows      E[w w^T] = I_d and E|w|^4 = d (d + 2) (chi(d) norms) for every row
//                      position (within 5 standard errors)
//   kOrthogonalBlocks  rows of a square block are orthogonal
//   kFixedNorm         rows of a square block have norm sqrt(d)
// Also: `favor list` names every entry with its summary.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/estimators/projections.hpp"
#include "helpers.hpp"

using namespace favor;
using favor_test::dot_rows;

namespace {
// The dimensions of `ds` the entry is defined for, or its min_d if none is.
std::vector<std::size_t> dims_for(const ProjectionEntry& e, std::vector<std::size_t> ds) {
    std::vector<std::size_t> out;
    for (std::size_t d : ds)
        if (d >= e.min_d && d <= e.max_d) out.push_back(d);
    if (out.empty()) out.push_back(e.min_d);
    return out;
}
}  // namespace

TEST_CASE("every projection: W (m, d) is a pure function of (seed, m, d, trial), nested in m", "[contract][projections]") {
    for (const ProjectionEntry& e : projection_registry())
        for (std::size_t d : dims_for(e, {6, 16})) {
            CAPTURE(e.name, d);
            const Projection p(e);
            const Mat<double> a = draw_projection(p, 40, d, 11, 2), b = draw_projection(p, 40, d, 11, 2);
            REQUIRE(a.shape(0) == 40);
            REQUIRE(a.shape(1) == d);
            const bool same = a == b;
            REQUIRE(same);
            for (std::size_t msmall : {1u, 5u, 20u, 33u}) {
                CAPTURE(msmall);
                const Mat<double> small = draw_projection(p, msmall, d, 11, 2);
                REQUIRE(small.shape(0) == msmall);
                for (std::size_t r = 0; r < msmall; ++r)
                    for (std::size_t c = 0; c < d; ++c) REQUIRE(small(r, c) == a(r, c));
            }
            const bool other_trial = draw_projection(p, 40, d, 11, 3) != a,
                       other_seed = draw_projection(p, 40, d, 12, 2) != a;
            REQUIRE(other_trial);
            REQUIRE(other_seed);
        }
}

TEST_CASE("every projection refuses d outside [min_d, max_d] with an Error naming it", "[contract][projections]") {
    for (const ProjectionEntry& e : projection_registry()) {
        CAPTURE(e.name);
        const Projection p(e);
        REQUIRE(p.name() == e.name);
        REQUIRE(Projection(e.name) == p);
        REQUIRE(e.min_d >= 1);
        REQUIRE(e.min_d <= e.max_d);
        REQUIRE(draw_projection(p, 3, e.min_d, 0, 0).shape(1) == e.min_d);
        REQUIRE_THROWS_AS(draw_projection(p, 4, e.min_d - 1, 0, 0), Error);
        REQUIRE_THROWS_WITH(draw_projection(p, 4, e.min_d - 1, 0, 0),
                            Catch::Contains(std::string("'") + e.name + "' needs d >= " + std::to_string(e.min_d)));
        if (e.max_d != kAnyD) {
            REQUIRE(draw_projection(p, 3, e.max_d, 0, 0).shape(1) == e.max_d);
            REQUIRE_THROWS_AS(draw_projection(p, 3, e.max_d + 1, 0, 0), Error);
            REQUIRE_THROWS_WITH(draw_projection(p, 3, e.max_d + 1, 0, 0),
                                Catch::Contains(std::string("'") + e.name + "' needs d <= " + std::to_string(e.max_d)));
        }
    }
    REQUIRE_THROWS_WITH(Projection("orthogonl"), Catch::Contains("unknown projection 'orthogonl', did you mean 'orthogonal'"));
}

namespace {
// Mean and standard error of T samples summed as sum, sum2 (the trials are independent).
void require_mean(double sum, double sum2, std::size_t T, double expected) {
    const double mean = sum / double(T);
    const double se = std::sqrt((sum2 / double(T) - mean * mean) / double(T - 1));
    CAPTURE(mean, se, expected);
    REQUIRE(std::fabs(mean - expected) < 5.0 * se);
}
}  // namespace

TEST_CASE("every projection with Gaussian rows: E[w w^T] = I_d, E|w|^4 = d (d + 2) at every row",
          "[contract][projections][stats]") {
    // d = 5, m = 7: a full block and two rows of the next (partial blocks keep the marginal).
    // Per row r, the means over T independent trials of W_ri W_rj (i <= j) and of |w_r|^4,
    // with standard errors from the trials' own spread (trials are independent, rows are
    // not). The 4th moment tells chi(d) norms from fixed ones (d^2 = 25 against 35 here).
    const std::size_t d = 5, m = 7, T = 2000, P = d * d + 1;
    for (const ProjectionEntry& e : projection_registry()) {
        if (!e.has(kGaussianRows) || d < e.min_d || d > e.max_d) continue;
        CAPTURE(e.name);
        std::vector<double> sum(m * P, 0.0), sum2(m * P, 0.0);
        auto add = [&](std::size_t k, double x) { sum[k] += x, sum2[k] += x * x; };
        for (std::uint64_t t = 0; t < T; ++t) {
            const Mat<double> W = draw_projection(Projection(e), m, d, 2024, t);
            for (std::size_t r = 0; r < m; ++r) {
                for (std::size_t i = 0; i < d; ++i)
                    for (std::size_t j = i; j < d; ++j) add(r * P + i * d + j, W(r, i) * W(r, j));
                add(r * P + d * d, dot_rows(W, r, r) * dot_rows(W, r, r));
            }
        }
        for (std::size_t r = 0; r < m; ++r) {
            CAPTURE(r);
            for (std::size_t i = 0; i < d; ++i)
                for (std::size_t j = i; j < d; ++j) {
                    CAPTURE(i, j);
                    require_mean(sum[r * P + i * d + j], sum2[r * P + i * d + j], T, i == j ? 1.0 : 0.0);
                }
            require_mean(sum[r * P + d * d], sum2[r * P + d * d], T, double(d * (d + 2)));
        }
    }
}

TEST_CASE("every block-orthogonal projection: rows of a square block orthogonal, fixed norms sqrt(d)",
          "[contract][projections]") {
    for (const ProjectionEntry& e : projection_registry()) {
        if (!e.has(kOrthogonalBlocks) && !e.has(kFixedNorm)) continue;
        for (std::size_t d : dims_for(e, {4, 6, 16, 64})) {
            const std::size_t B = e.block_rows(d);
            if (B != d) continue;   // hadamard at d < next_pow2(d): truncated blocks
            for (std::size_t m : {3u, 16u, 40u, 128u}) {
                CAPTURE(e.name, d, m);
                const Mat<double> W = draw_projection(Projection(e), m, d, 7, 3);
                if (e.has(kOrthogonalBlocks))
                    for (std::size_t a = 0; a < m; ++a)
                        for (std::size_t b = a + 1; b < m && b / B == a / B; ++b) {
                            const double cos_ab = dot_rows(W, a, b) / std::sqrt(dot_rows(W, a, a) * dot_rows(W, b, b));
                            REQUIRE(std::fabs(cos_ab) < 1e-12);
                        }
                if (e.has(kFixedNorm))
                    for (std::size_t a = 0; a < m; ++a)
                        REQUIRE(std::sqrt(dot_rows(W, a, a)) == Approx(std::sqrt(double(d))).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE("favor list names every projection with its summary", "[contract][projections][cli]") {
    FILE* f = popen(FAVOR_BINARY " list", "r");
    REQUIRE(f);
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    REQUIRE(pclose(f) == 0);
    const std::size_t from = out.find("projections:\n");
    REQUIRE(from != std::string::npos);
    for (const ProjectionEntry& e : projection_registry()) {
        CAPTURE(e.name);
        REQUIRE(out.find(std::string("\n  ") + e.name + "  " + e.summary + "\n", from) != std::string::npos);
    }
}
