// The estimators are right: unbiased for SM(x, y), with the MSE of Lemma 2, and orthogonal
// features below iid and within the Theorem 2 bound. Fixed seeds; every tolerance is a
// number of standard errors computed from the variance (closed form or sample).
#include <catch2/catch.hpp>
#include <cmath>

#include "helpers.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/theory.hpp"

using namespace favor;
using favor_test::Pair;
using favor_test::make_pair;
using favor_test::map_named;

namespace {

using favor_test::Sample;
using favor_test::sample;

FeatureMapPtr map_of(const std::string& k, double A = 0.0) {
    return k == "oprf" ? favor_test::map_named(k, {{"A", A}}) : favor_test::map_named(k);
}

// The closed forms, written out here from theory.hpp (not through the map's pair_mse, which
// this checks).
double lemma2(const std::string& kind, double A, const Pair& p, std::size_t m) {
    if (kind == "trig") return mse_trig_iid(p.x2, p.y2, p.xy, m);
    if (kind == "positive") return mse_positive_iid(p.x2, p.y2, p.xy, m);
    if (kind == "hyperbolic") return mse_hyperbolic_iid(p.x2, p.y2, p.xy, m);
    return oprf_feature_variance(A, p.x2, p.y2, p.xy, p.x.shape(1)) / double(m);
}

}  // namespace

// Unbiasedness and the closed-form MSE by Monte Carlo of every map at its defaults:
// test_feature_map_contract.cpp. Here the closed forms against theory.hpp, and oprf at fixed A.
TEST_CASE("the maps' closed forms are Lemma 2's, and oprf at fixed A is unbiased with that MSE", "[estimators][stats]") {
    const std::size_t N = 20000, m = 8;
    const auto [kind, A] = GENERATE(std::make_pair(std::string("trig"), 0.0), std::make_pair(std::string("positive"), 0.0),
                                    std::make_pair(std::string("hyperbolic"), 0.0), std::make_pair(std::string("oprf"), -0.2),
                                    std::make_pair(std::string("oprf"), 0.05));
    const FeatureMapPtr f = map_of(kind, A);
    const auto pts = favor_test::small_norm_points();
    for (std::size_t i = 0; i < pts.size(); ++i) {
        const Pair& p = pts[i];
        const double theory = lemma2(kind, A, p, m);
        REQUIRE(*f->pair_mse(p.x2, p.y2, p.xy, m, p.x.shape(1)) == Approx(theory).epsilon(1e-14));
        if (kind != "oprf") continue;
        const Sample s = sample(*f, Projection("iid"), m, p, N, 1000 + i);
        CAPTURE(kind, A, i, std::exp(p.xy), s.mean, s.mse, s.mse_se, theory);
        // Unbiased: the mean of N estimates is within 4 standard errors sqrt(MSE / N) of SM.
        REQUIRE(std::fabs(s.mean - std::exp(p.xy)) < 4.0 * std::sqrt(theory / double(N)));
        // Lemma 2: the sample MSE is within 4 of its standard errors of the closed form.
        REQUIRE(std::fabs(s.mse - theory) < 4.0 * s.mse_se);
    }
}

TEST_CASE("orthogonal positive features: unbiased, below iid, within the Theorem 2 bound", "[estimators][stats]") {
    const std::size_t N = 20000;
    const std::size_t m = GENERATE(4, 3, 8);   // m <= d, m < d, and two blocks (m > d)
    const FeatureMapPtr f = map_of(std::string("positive"));
    const auto pts = favor_test::small_norm_points();
    for (std::size_t i = 0; i < pts.size(); ++i) {
        const Pair& p = pts[i];
        const double iid = mse_positive_iid(p.x2, p.y2, p.xy, m);
        const double bound = theorem2_bound(p.x2, p.y2, p.xy, m, 4);
        const Sample s = sample(*f, Projection("orthogonal"), m, p, N, 2000 + i);
        CAPTURE(m, i, s.mean, s.mse, s.mse_se, iid, bound);
        REQUIRE(bound < iid);
        REQUIRE(std::fabs(s.mean - std::exp(p.xy)) < 4.0 * std::sqrt(iid / double(N)));
        REQUIRE(s.mse < bound + 4.0 * s.mse_se);
        REQUIRE(s.mse < iid);
        // Significantly below iid where Theorem 2 promises a gap of more than 8 standard errors.
        if (iid - bound > 8.0 * s.mse_se) REQUIRE(s.mse < iid - 4.0 * s.mse_se);
    }
}

TEST_CASE("orthogonal trig and hyperbolic features stay unbiased", "[estimators][stats]") {
    const std::size_t N = 20000, m = 4;
    const std::string kind = GENERATE(std::string("trig"), std::string("hyperbolic"));
    const FeatureMapPtr f = map_of(kind);
    const Pair p = favor_test::small_norm_points()[0];
    const Sample s = sample(*f, Projection("orthogonal"), m, p, N, 3000);
    CAPTURE(kind, s.mean, s.mse);
    REQUIRE(std::fabs(s.mean - std::exp(p.xy)) < 4.0 * std::sqrt(lemma2(kind, 0.0, p, m) / double(N)));
    REQUIRE(s.mse < lemma2(kind, 0.0, p, m) + 4.0 * s.mse_se);
}

TEST_CASE("closed forms agree with their equivalent forms", "[theory]") {
    for (const Pair& p : favor_test::small_norm_points()) {
        const double z2 = p.x2 + p.y2 + 2 * p.xy;
        const double alt = std::exp(-(p.x2 + p.y2)) * (std::exp(2 * z2) - std::exp(z2)) / 16.0;
        REQUIRE(mse_positive_iid(p.x2, p.y2, p.xy, 16) == Approx(alt).epsilon(1e-12));
        REQUIRE(oprf_feature_variance(0.0, p.x2, p.y2, p.xy, 4) / 16.0 == Approx(alt).epsilon(1e-12));
        // Theorem 2 equals Lemma 2 minus the stated gap for m <= d.
        const double c = std::exp(p.xy) - std::exp(-(p.x2 + p.y2) / 2);
        REQUIRE(theorem2_bound(p.x2, p.y2, p.xy, 4, 4) ==
                Approx(mse_positive_iid(p.x2, p.y2, p.xy, 4) - 2.0 * 3.0 / (4.0 * 6.0) * c * c).epsilon(1e-12));
    }
}
