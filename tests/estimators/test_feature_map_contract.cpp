// The contract every feature map keeps, checked for every entry of the registry
// (feature_map_registry()), so a map added there gets these checks with no edit here:
//   - where the map estimates SM (FeatureMap::estimates_softmax), phi(x).phi(y) averaged over
//     N independent W is exp(x.y) within 5 standard errors of the sample;
//   - where it has a closed-form MSE (pair_mse_at), the sample MSE of the kernel estimate over
//     those W is the closed form within 5 standard errors of the squared errors;
//   - features and attention outputs (non-causal and, where defined, causal; favor_attention
//     and the fused favor_forward) are bitwise the same on 1 and 2 threads;
//   - float32 outputs follow float64 within float32 rounding;
//   - causal row L - 1 (which sees every key) is the non-causal row L - 1 up to rounding;
//   - `favor list` names the entry with its summary.
// Each map runs with its defaults ({"features": name}, iid W where it uses a projection), its
// data-dependent parameters fitted as the runners fit them. Fixed seeds throughout.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "helpers.hpp"
#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/variant.hpp"
#include "favor/experiments/inputs.hpp"

using namespace favor;
using favor_test::Pair;
using nlohmann::json;

namespace {

// The registry's entry names, for GENERATE.
std::vector<std::string> registry_names() {
    std::vector<std::string> n;
    for (const FeatureMapEntry& e : feature_map_registry()) n.push_back(e.name);
    return n;
}

// The variant {"features": name} with iid W where the map uses a projection.
Variant variant_of(const std::string& name) {
    json v = {{"features", name}};
    if (favor_test::map_named(name)->uses_projection()) v["projection"] = "iid";
    return parse_variant(v, Field{"contract", "variants[0]"}, false, "");
}

// W for trial t of the variant (m, d), as the runners draw it.
Mat<double> w_of(const Variant& v, std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t t) {
    return make_estimator<double>(v, m, d, seed, t).W;
}

// Whether a and b hold the same bits (NaN rows of a baseline compare equal, unlike ==).
template <class T>
bool same_bits(const Mat<T>& a, const Mat<T>& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Largest |a - b| over the largest |b|; infinite where one is NaN and the other is not.
template <class A, class B>
double rel_max_diff(const Mat<A>& a, const Mat<B>& b) {
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (std::isnan(double(a.data()[i])) != std::isnan(double(b.data()[i]))) return INFINITY;
        worst = std::max(worst, std::fabs(double(a.data()[i]) - double(b.data()[i])));
        scale = std::max(scale, std::fabs(double(b.data()[i])));
    }
    return worst / scale;
}

// Inputs of the attention checks: L = 1100 spans 5 feature blocks (256 rows), 2 blocks of the
// linear products (1024), many fused blocks and causal steps; scale 0.5 keeps trig's
// denominators away from 0.
constexpr std::size_t kL = 1100, kD = 8, kDv = 4, kM = 16;
const QKV& attention_inputs() {
    static const QKV in = random_inputs(27, kL, kD, kDv, 0.5);
    return in;
}

}  // namespace

TEST_CASE("contract: every map is unbiased where it estimates SM, its MSE the closed form where it has one",
          "[contract][stats]") {
    // N = 20000 draws of W (m = 8, d = 4) at the three small-norm points, where the squared
    // error has a finite, estimable variance. Data-dependent maps fitted to the pair (as the
    // kernel experiment fits them), then used as they are for every W.
    const std::string name = GENERATE(from_range(registry_names()));
    const Variant v = variant_of(name);
    const std::size_t N = 20000, m = 8;
    const std::vector<Pair> pts = favor_test::small_norm_points();
    for (std::size_t i = 0; i < pts.size(); ++i) {
        const Pair& p = pts[i];
        if (!v.map->estimates_softmax()) {   // then it has no closed-form MSE about SM either
            REQUIRE_FALSE(v.map->pair_mse(p.x2, p.y2, p.xy, m, 4));
            continue;
        }
        REQUIRE(v.map->is_kernel());
        const FeatureMapPtr f = v.map->resolve(p.x, p.y);
        const std::optional<double> theory = pair_mse_at(*f, p.x, p.y, m);
        std::vector<double> est(N);
        for (std::size_t t = 0; t < N; ++t) est[t] = favor_test::estimate_as_is(*f, w_of(v, m, 4, 100 + i, t), p.x, p.y);
        const favor_test::Sample s = favor_test::describe(est, p.sm());
        CAPTURE(name, i, p.sm(), s.mean, s.se, s.mse, s.mse_se, theory.value_or(-1));
        REQUIRE(std::fabs(s.mean - p.sm()) < 5.0 * s.se);
        if (theory) REQUIRE(std::fabs(s.mse - *theory) < 5.0 * s.mse_se);
    }
}

TEST_CASE("contract: features and attention outputs do not depend on the thread count", "[contract][attention]") {
    const std::string name = GENERATE(from_range(registry_names()));
    CAPTURE(name);
    const Variant v = variant_of(name);
    const QKV& in = attention_inputs();
    REQUIRE(!v.map->check_sizes(kM, kD, kL, kL));
    const Estimator<double> est = make_estimator<double>(v, kM, kD, 5, 0).for_inputs(in.q, in.k);
    const double xs = std::pow(double(kD), -0.25);
    for (Side side : {Side::query, Side::key}) {
        const Mat<double>& X = side == Side::query ? in.q : in.k;
        const Features<double> one = compute_features(est.ready_map(), X, xs, est.W, side, 1);
        const Features<double> two = compute_features(est.ready_map(), X, xs, est.W, side, 2);
        const bool same = same_bits(one.phi, two.phi) && one.log_scale == two.log_scale;
        REQUIRE(same);
    }
    for (bool causal : {false, true}) {
        if (causal && !v.map->supports_causal()) continue;
        CAPTURE(causal);
        const bool same_attention = same_bits(favor_attention(est, in.q, in.k, in.v, causal, 1).out,
                                              favor_attention(est, in.q, in.k, in.v, causal, 2).out);
        const bool same_forward =
            same_bits(favor_forward(est, in.q, in.k, in.v, causal, 1), favor_forward(est, in.q, in.k, in.v, causal, 2));
        REQUIRE(same_attention);
        REQUIRE(same_forward);
    }
}

TEST_CASE("contract: float32 follows float64 within float32 rounding, causal row L-1 is the non-causal row",
          "[contract][precision]") {
    const std::string name = GENERATE(from_range(registry_names()));
    CAPTURE(name);
    const Variant v = variant_of(name);
    const QKV& in = attention_inputs();
    const Estimator<double> e64 = make_estimator<double>(v, kM, kD, 6, 0).for_inputs(in.q, in.k);
    const Mat<float> q32 = cast_mat<float>(in.q), k32 = cast_mat<float>(in.k), v32 = cast_mat<float>(in.v);
    const Estimator<float> e32 = make_estimator<float>(v, kM, kD, 6, 0).for_inputs(q32, k32);
    const Mat<double> o64 = favor_forward(e64, in.q, in.k, in.v);
    const Mat<float> o32 = favor_forward(e32, q32, k32, v32);
    // Sums of L F terms in float32, each a product of a few rounded factors, and a division:
    // measured 1.4 to 5.1 units of float32 rounding (trig, whose sums cancel, the most) of the
    // output's scale; 64 units allowed.
    CAPTURE(rel_max_diff(o32, o64));
    REQUIRE(rel_max_diff(o32, o64) < 64 * FLT_EPSILON);
    if (!v.map->supports_causal()) return;
    const Mat<double> c64 = favor_attention(e64, in.q, in.k, in.v, true).out;
    for (std::size_t c = 0; c < kDv; ++c) {
        CAPTURE(c, c64(kL - 1, c), o64(kL - 1, c));
        // Measured up to 1.4e-17: the same sums in another order.
        REQUIRE(std::fabs(c64(kL - 1, c) - o64(kL - 1, c)) <= 1e-13 * std::max(1.0, std::fabs(o64(kL - 1, c))));
    }
}

TEST_CASE("contract: `favor list` names every map with its summary", "[contract][cli]") {
    const std::string out = favor_test::favor_list_output();
    REQUIRE(!out.empty());
    for (const FeatureMapEntry& e : feature_map_registry()) {
        CAPTURE(e.name);
        REQUIRE(out.find("\n  " + std::string(e.name) + "  " + e.summary + "\n") != std::string::npos);
    }
}
