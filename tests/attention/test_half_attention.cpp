// The half-precision emulation (docs/design.md section 2.6) end to end: where an unshifted
// positive map breaks in float16 and the shifted one on the same inputs does not, every
// estimator at scale 0.25 within 10x of its float64 error, and the emulated exact attention.
#include <catch2/catch.hpp>
#include <cmath>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/metrics/output_metrics.hpp"

#include "helpers.hpp"

using namespace favor;
using namespace favor_test;

namespace {
// Q, K, V cast to float and rounded as a run in this dtype rounds them.
struct Rounded {
    Mat<float> q, k, v;
};
Rounded rounded(const QKV& in, Rounding r) {
    Rounded o{cast_mat<float>(in.q), cast_mat<float>(in.k), cast_mat<float>(in.v)};
    for (Mat<float>* m : {&o.q, &o.k, &o.v}) round_to(r, m->data(), m->size());
    return o;
}

// The variant {"features": name, ...extra} as an estimator in float with this rounding and
// in float64, the same W (seed 7, trial 0), fitted to the (rounded) inputs.
Variant variant(const std::string& features, nlohmann::json extra = nlohmann::json::object()) {
    extra["features"] = features;
    return parse_variant(extra, Field{"test", ""}, false, "");
}

double rel_diff(const Mat<float>& a, const Mat<double>& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        const double e = double(a.data()[i]) - b.data()[i];
        num += e * e;
        den += b.data()[i] * b.data()[i];
    }
    return std::sqrt(num / den);
}
}  // namespace

TEST_CASE("float16: the unshifted positive map overflows where the shifted one stays finite", "[half][precision]") {
    // Keys that share a direction, as trained keys with a common component do: k_j = g_j +
    // d^{1/4} w_0 (g_j ~ N(0, 0.5^2)), w_0 the first row of W, so every scaled key is about
    // w_0 and its feature 0 about exp(w_0.w_0 - |w_0|^2/2) / sqrt(m) = exp(|w_0|^2 / 2) / 8,
    // |w_0|^2 ~ chi^2(16) (about e^8 / 8 = 370 at the mean): each value fits float16, but
    // the key sum phiK^T 1 of L = 1024 of them (about 4e5) is far beyond 65504. Stored as
    // Inf, it makes every D Inf: the output rows come out 0 (finite, and wrong).
    const std::size_t L = 1024, d = 16, m = 64;
    QKV in = random_inputs(5, L, d, d, 0.5);
    const Variant shifted = variant("positive", {{"projection", "orthogonal"}});
    const Variant plain = variant("positive", {{"projection", "orthogonal"}, {"shift", false}});
    const Mat<double> W = draw_projection(Projection("orthogonal"), m, d, 7, 0);
    for (std::size_t j = 0; j < L; ++j)
        for (std::size_t c = 0; c < d; ++c) in.k(j, c) += 2.0 * W(0, c);   // d^{1/4} = 2
    const Rounded h = rounded(in, Rounding::fp16);
    auto run = [&](const Variant& v, Rounding r) {
        return favor_attention(make_estimator<float>(v, m, d, 7, 0, r).for_inputs(h.q, h.k), h.q, h.k, h.v);
    };
    const Mat<double> q = cast_mat<double>(h.q), k = cast_mat<double>(h.k), v = cast_mat<double>(h.v);
    auto run64 = [&](const Variant& var) {
        return favor_attention(make_estimator<double>(var, m, d, 7, 0).for_inputs(q, k), q, k, v).out;
    };
    const Approximation<float> broken = run(plain, Rounding::fp16);
    const double broken_rel = rel_diff(broken.out, run64(plain));
    CAPTURE(broken.overflow, broken.entries, count_nonfinite(broken.out), broken_rel);
    REQUIRE(broken.overflow > 0);
    REQUIRE(!(broken_rel < 0.5));   // NaN counts as broken too
    // The same unshifted map in float32 (same rounded inputs, no rounding after them) is finite.
    const Approximation<float> f32 = run(plain, Rounding::none);
    REQUIRE(f32.overflow == 0);
    REQUIRE(count_nonfinite(f32.out) == 0);

    // Shifted: finite, nothing overflows, and close to the same estimator in float64 (same
    // W, the same rounded inputs). Bound: every stored value carries a relative rounding of
    // at most u = 2^-11 = 4.9e-4; the projections' absolute error |w.x| u (|w.x| up to about
    // 20 here) moves a feature by up to 1% relative, and the few roundings after it (phi,
    // phiK^T [V, 1], the output) add about 3u; those errors are independent across features
    // and keys and partly average out, so 2e-2 bounds the output's relative error with
    // room (measured: 4.8e-3).
    const Approximation<float> saved = run(shifted, Rounding::fp16);
    REQUIRE(saved.overflow == 0);
    REQUIRE(count_nonfinite(saved.out) == 0);
    const double rel = rel_diff(saved.out, run64(shifted));
    CAPTURE(rel);
    REQUIRE(rel < 2e-2);
}

TEST_CASE("at scale 0.25 every estimator in float16 and bfloat16 stays within 10x of its float64 output error",
          "[half][precision]") {
    const std::string name = GENERATE(from_range(feature_names()));
    const Rounding r = GENERATE(Rounding::fp16, Rounding::bf16);
    CAPTURE(name, rounding_name(r));
    const std::size_t L = 512, d = 16, m = 64;
    const QKV in = random_inputs(11, L, d, d, 0.25);
    const Mat<double> ref = exact_attention(in.q, in.k, in.v);
    const Variant v = variant(name);
    const Mat<double> o64 = favor_attention(make_estimator<double>(v, m, d, 3, 0).for_inputs(in.q, in.k), in.q, in.k, in.v).out;
    const Rounded h = rounded(in, r);
    const Approximation<float> a =
        favor_attention(make_estimator<float>(v, m, d, 3, 0, r).for_inputs(h.q, h.k), h.q, h.k, h.v);
    const double e64 = output_mse(ref, o64), e16 = output_mse(ref, a.out);
    // A map nearly exact at this scale (taylor2: error (x.y)^3/6) meets the rounding floor
    // instead: the error of exact attention itself emulated in this format.
    const double floor = output_mse(ref, exact_attention_rounded(h.q, h.k, h.v, r, false, 1));
    CAPTURE(e64, e16, e16 / e64, floor);
    REQUIRE(count_nonfinite(a.out) == 0);
    REQUIRE(a.overflow == 0);
    REQUIRE(e16 <= 10 * std::max(e64, floor));
}

TEST_CASE("half-rounded W and features are representable in the format", "[half]") {
    const std::size_t L = 64, d = 8, m = 16;
    const QKV in = random_inputs(2, L, d, d, 1.0);
    const Rounded h = rounded(in, Rounding::fp16);
    const Estimator<float> est = make_estimator<float>(variant("hyperbolic"), m, d, 1, 0, Rounding::fp16);
    const Approximation<float> a = favor_attention(est.for_inputs(h.q, h.k), h.q, h.k, h.v);
    auto all_fp16 = [](const Mat<float>& x) {
        for (float f : x)
            if (round_fp16(f) != f) return false;
        return true;
    };
    CHECK(all_fp16(est.W));
    CHECK(all_fp16(a.q.phi));
    CHECK(all_fp16(a.k.phi));
    CHECK(all_fp16(a.out));
    CHECK(a.entries == 2 * L * 2 * m + 2 * m * (d + 1));   // features of both sides and phiK^T [V, 1]
}

TEST_CASE("emulated exact attention: float32 without rounding, within the half rounding bound with it",
          "[half][attention]") {
    const bool causal = GENERATE(false, true);
    const std::size_t L = GENERATE(std::size_t(100), std::size_t(1500));
    CAPTURE(causal, L);
    const std::size_t d = 16;
    const QKV in = random_inputs(9, L, d, d, 1.0);
    const Mat<double> ref = exact_attention(in.q, in.k, in.v, causal);
    const Rounded f = rounded(in, Rounding::none);
    // Without rounding: the softmax of exact_attention in float32 (relative 1e-5 is about
    // 100 float32 ulps, for the sums over up to 1500 keys).
    REQUIRE(rel_diff(exact_attention_rounded(f.q, f.k, f.v, Rounding::none, causal, 2), ref) < 1e-5);
    // float16: inputs, scores (|s| up to ~8 here), probabilities and output each rounded with
    // relative error <= 2^-11 = 4.9e-4; the scores' absolute error |s| 2^-11 <= 4e-3 moves
    // a probability by that relative amount; the sum of these, 1e-2, bounds the output's
    // relative error (measured: 4.6e-4 to 6.4e-4). bfloat16: u = 2^-8, so 8x that (measured:
    // 4.1e-3 to 5.0e-3).
    const Rounded h = rounded(in, Rounding::fp16);
    const double e16 = rel_diff(exact_attention_rounded(h.q, h.k, h.v, Rounding::fp16, causal, 2), ref);
    const Rounded b = rounded(in, Rounding::bf16);
    const double ebf = rel_diff(exact_attention_rounded(b.q, b.k, b.v, Rounding::bf16, causal, 2), ref);
    CAPTURE(e16, ebf);
    REQUIRE(e16 < 1e-2);
    REQUIRE(ebf < 8e-2);
    REQUIRE(e16 < ebf);   // 3 fewer mantissa bits
}
