// float32 against float64 with the same W where one shift for all keys used to underflow:
// keys are shifted per row and summed relative to a running max (docs/design.md 2.2-2.3).
#include <catch2/catch.hpp>
#include <cmath>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/attention/pairwise_pass.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/metrics/output_metrics.hpp"

#include "helpers.hpp"

using namespace favor;
using namespace favor_test;

namespace {
// Worst over rows of max_c |a - b| / max_c |b|.
template <class T>
double worst_row_rel(const Mat<T>& a, const Mat<double>& b) {
    double worst = 0;
    for (std::size_t i = 0; i < b.shape(0); ++i) {
        double diff = 0, scale = 0;
        for (std::size_t c = 0; c < b.shape(1); ++c) {
            diff = std::max(diff, std::fabs(double(a(i, c)) - b(i, c)));
            scale = std::max(scale, std::fabs(b(i, c)));
        }
        worst = std::max(worst, std::isfinite(diff) ? diff / scale : INFINITY);
    }
    return worst;
}
}  // namespace

TEST_CASE("float32 FAVOR agrees with float64 on inputs with a 6x-norm outlier key", "[attention][precision]") {
    const std::string kind = GENERATE(std::string("positive"), std::string("hyperbolic"), std::string("oprf"));
    const std::size_t at = GENERATE(std::size_t(0), std::size_t(700));   // the outlier key's position
    const bool causal = GENERATE(false, true);
    CAPTURE(kind, at, causal);
    // d = 64, L spanning two chunks of the causal prefix sums and several steps.
    const std::size_t L = 1100, d = 64, dv = 8, m = 64;
    QKV in = random_inputs(21, L, d, dv, 1.0);
    for (std::size_t c = 0; c < d; ++c) in.k(at, c) *= 6.0;
    const FeatureMapPtr f = map_named(kind);
    const Mat<double> W = draw_projection(Projection("orthogonal"), m, d, 21, 0);
    const Mat<float> q32 = cast_mat<float>(in.q), k32 = cast_mat<float>(in.k), v32 = cast_mat<float>(in.v);
    // The same (float-rounded) inputs in both precisions.
    const Mat<double> q = cast_mat<double>(q32), k = cast_mat<double>(k32), v = cast_mat<double>(v32);
    const Mat<double> o64 = favor_attention(fitted(f, W, q, k), q, k, v, causal).out;
    const Mat<float> o32 = favor_attention(fitted(f, cast_mat<float>(W), q32, k32), q32, k32, v32, causal).out;
    REQUIRE(count_nonfinite(o64) == 0);
    REQUIRE(count_nonfinite(o32) == 0);
    REQUIRE(worst_row_rel(o32, o64) < 1e-4);
    if (causal && at == 0)   // row 0 sees key 0 alone: its output is v_0 exactly
        for (std::size_t c = 0; c < dv; ++c) REQUIRE(o32(0, c) == Approx(v32(0, c)).epsilon(1e-5));
    if (!causal) {
        const Mat<float> fused = favor_forward(fitted(f, cast_mat<float>(W), q32, k32), q32, k32, v32);
        REQUIRE(worst_row_rel(fused, o64) < 1e-4);
    }
}

TEST_CASE("float32 trig at scale 10 reports the negative fraction float64 does", "[metrics][precision]") {
    // |y|^2 / 2 spreads over hundreds across the keys: under one shift for all keys most key
    // features underflowed in float32 and their (negative) A_hat entries read as 0.
    const std::size_t L = 512, d = 16, m = 64;
    const QKV in = random_inputs(3, L, d, d, 10.0);
    const FeatureMapPtr f = map_named("trig");
    const Mat<double> W = draw_projection(Projection("orthogonal"), m, d, 3, 0);
    const Mat<float> q32 = cast_mat<float>(in.q), k32 = cast_mat<float>(in.k);
    const Mat<double> q = cast_mat<double>(q32), k = cast_mat<double>(k32);
    const Approximation<double> a64 = favor_attention(fitted(f, W, q, k), q, k, in.v);
    const Approximation<float> a32 =
        favor_attention(fitted(f, cast_mat<float>(W), q32, k32), q32, k32, cast_mat<float>(in.v));
    PairwiseRequest req;
    req.negative_fraction = true;
    const Mat<double> X = scale_rows(q), Y = scale_rows(k);
    const double n64 = pairwise_metrics(X, Y, a64.q, a64.k, req).negative_fraction;
    const double n32 = pairwise_metrics(X, Y, Features<double>{cast_mat<double>(a32.q.phi), a32.q.log_scale},
                                        Features<double>{cast_mat<double>(a32.k.phi), a32.k.log_scale}, req)
                           .negative_fraction;
    CAPTURE(n32, n64);
    REQUIRE(n64 > 0.4);
    REQUIRE(std::fabs(n32 - n64) < 0.01);
}

TEST_CASE("NaN entries of A_hat count as negative (not >= 0)", "[metrics]") {
    // relu features of row 0 all 0: D_0 = 0 and row 0 of A_hat is 0/0 = NaN.
    const std::size_t L = 4, d = 2, F = 3;
    Mat<double> X = Mat<double>::from_shape({L, d}), Y = Mat<double>::from_shape({L, d});
    X.fill(0.5);
    Y.fill(0.25);
    Features<double> fq{Mat<double>::from_shape({L, F}), std::vector<double>(L, 0.0)};
    Features<double> fk{Mat<double>::from_shape({L, F}), std::vector<double>(L, 0.0)};
    fq.phi.fill(1.0);
    fk.phi.fill(1.0);
    for (std::size_t c = 0; c < F; ++c) fq.phi(0, c) = 0.0;
    PairwiseRequest req;
    req.negative_fraction = req.attention_mse = true;
    const PairwiseResult r = pairwise_metrics(X, Y, fq, fk, req);
    REQUIRE(r.negative_fraction == 0.25);   // row 0's 4 of 16 entries
    REQUIRE(std::isnan(r.attention_mse));
}
