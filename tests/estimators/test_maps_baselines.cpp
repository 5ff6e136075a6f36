// The linear-attention baselines that are not estimators of SM (docs/estimators.md): elu and
// dpfp against direct computations, nystrom against its matrix formula and exact attention,
// the non-row-normalised paths (linear attention, metrics), and their config checks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/nystrom.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/experiments/timing.hpp"
#include "favor/metrics/metric_table.hpp"
#include "favor/metrics/output_metrics.hpp"

#include "helpers.hpp"

using namespace favor;
using namespace favor_test;
using nlohmann::json;

namespace {

// The estimator of a config variant for queries Q and keys K (W: the (m, d) placeholder).
Estimator<double> estimator_for(const json& variant, std::size_t m, const Mat<double>& Q, const Mat<double>& K) {
    const Variant v = parse_variant(variant, Field{"test", ""}, false, "");
    return make_estimator<double>(v, m, Q.shape(1), 0, 0).for_inputs(Q, K);
}

// elu(x) + 1 of every entry.
Mat<double> naive_elu(const Mat<double>& X) {
    Mat<double> out = X;
    for (auto& v : out) v = v > 0 ? v + 1 : std::exp(v);
    return out;
}

// dpfp written out: r = relu([x, -x]), phi = [r * np.roll(r, 1), ..., r * np.roll(r, nu)].
Mat<double> naive_dpfp(const Mat<double>& X, std::size_t nu) {
    const std::size_t L = X.shape(0), d = X.shape(1), n = 2 * d;
    Mat<double> out = Mat<double>::from_shape({L, n * nu});
    for (std::size_t i = 0; i < L; ++i) {
        std::vector<double> r(n);
        for (std::size_t c = 0; c < d; ++c) {
            r[c] = std::max(X(i, c), 0.0);
            r[d + c] = std::max(-X(i, c), 0.0);
        }
        for (std::size_t s = 1; s <= nu; ++s) {
            std::vector<double> rolled(n);   // np.roll(r, s): element k moves to k + s
            for (std::size_t k = 0; k < n; ++k) rolled[(k + s) % n] = r[k];
            for (std::size_t k = 0; k < n; ++k) out(i, (s - 1) * n + k) = r[k] * rolled[k];
        }
    }
    return out;
}

// A_hat V with A_hat = phi(X) phi(Y)^T, its rows divided by their sums when `normalise`;
// causal: pairs j <= i only.
Mat<double> explicit_output(const Mat<double>& pq, const Mat<double>& pk, const Mat<double>& V, bool normalise,
                            bool causal) {
    const std::size_t L = pq.shape(0), Lk = pk.shape(0), F = pq.shape(1), dv = V.shape(1);
    Mat<double> out = Mat<double>::from_shape({L, dv});
    out.fill(0.0);
    for (std::size_t i = 0; i < L; ++i) {
        std::vector<double> a(Lk, 0.0);
        double z = 0.0;
        for (std::size_t j = 0; j < Lk && (!causal || j <= i); ++j) {
            for (std::size_t f = 0; f < F; ++f) a[j] += pq(i, f) * pk(j, f);
            z += a[j];
        }
        for (std::size_t j = 0; j < Lk; ++j)
            for (std::size_t c = 0; c < dv; ++c) out(i, c) += (normalise ? a[j] / z : a[j]) * V(j, c);
    }
    return out;
}

double max_abs(const Mat<double>& a) {
    double w = 0;
    for (double v : a) w = std::max(w, std::fabs(v));
    return w;
}
double frobenius(const Mat<double>& a) {
    double s = 0;
    for (double v : a) s += v * v;
    return std::sqrt(s);
}
Mat<double> matmul(const Mat<double>& A, const Mat<double>& B) {
    Mat<double> C = Mat<double>::from_shape({A.shape(0), B.shape(1)});
    C.fill(0.0);
    for (std::size_t i = 0; i < A.shape(0); ++i)
        for (std::size_t k = 0; k < A.shape(1); ++k)
            for (std::size_t j = 0; j < B.shape(1); ++j) C(i, j) += A(i, k) * B(k, j);
    return C;
}
Mat<double> transpose(const Mat<double>& A) {
    Mat<double> T = Mat<double>::from_shape({A.shape(1), A.shape(0)});
    for (std::size_t i = 0; i < A.shape(0); ++i)
        for (std::size_t j = 0; j < A.shape(1); ++j) T(j, i) = A(i, j);
    return T;
}

// The Nystromformer's A_hat as matrices: softmax(X K~^T) P softmax(Q~ Y^T).
Mat<double> nystrom_matrix(const Mat<double>& X, const Mat<double>& Y, std::size_t m, const Mat<double>& P) {
    const Mat<double> ql = segment_means(X, m), kl = segment_means(Y, m);
    return matmul(matmul(softmax_rows(matmul(X, transpose(kl))), P), softmax_rows(matmul(ql, transpose(Y))));
}

double nystrom_output_mse(const QKV& in, std::size_t m, const json& extra = json::object()) {
    json v = extra;
    v["features"] = "nystrom";
    const Approximation<double> a = favor_attention(estimator_for(v, m, in.q, in.k), in.q, in.k, in.v);
    return output_mse(exact_attention(in.q, in.k, in.v), a.out);
}

}  // namespace

TEST_CASE("elu and dpfp features equal a direct computation on both sides", "[baselines]") {
    const QKV in = random_inputs(4, 37, 5, 3, 1.3);
    const Mat<double> X = scale_rows(in.q);
    const double xs = 1.0 / std::pow(5.0, 0.25);
    const Mat<double> W = xt::zeros<double>({std::size_t(7), std::size_t(5)});   // placeholder, any m
    for (const Side side : {Side::query, Side::key}) {
        const Features<double> e = compute_features(*map_named("elu"), in.q, xs, W, side);
        REQUIRE(e.phi.shape(1) == 5);
        REQUIRE(max_abs(e.phi - naive_elu(X)) < 1e-14);
        REQUIRE(std::all_of(e.log_scale.begin(), e.log_scale.end(), [](double l) { return l == 0.0; }));
        for (std::size_t nu : {1, 2, 3, 9}) {
            CAPTURE(nu);
            const Features<double> f = compute_features(*map_named("dpfp", {{"nu", nu}}), in.q, xs, W, side);
            REQUIRE(f.phi.shape(1) == 2 * 5 * nu);
            REQUIRE(max_abs(f.phi - naive_dpfp(X, nu)) < 1e-14);
            REQUIRE(std::all_of(f.log_scale.begin(), f.log_scale.end(), [](double l) { return l == 0.0; }));
        }
    }
    // num_features ignores m; epsilon is added to every feature.
    REQUIRE(map_named("dpfp", {{"nu", 3}})->num_features(64, 8) == 48);
    const Features<double> eps = compute_features(*map_named("elu", {{"epsilon", 0.25}}), in.q, xs, W, Side::query);
    REQUIRE(max_abs(eps.phi - naive_elu(X) - 0.25) < 1e-14);
}

TEST_CASE("linear attention with elu and dpfp equals the explicit normalised A_hat V, causal or not", "[baselines]") {
    const QKV in = random_inputs(5, 300, 6, 4, 1.0);
    const Mat<double> X = scale_rows(in.q), Y = scale_rows(in.k);
    const bool causal = GENERATE(false, true);
    CAPTURE(causal);
    for (const json& v : {json{{"features", "elu"}}, json{{"features", "dpfp"}}, json{{"features", "dpfp"}, {"nu", 3}}}) {
        CAPTURE(v.dump());
        const std::size_t nu = v.value("nu", 1);
        const bool elu = v["features"] == "elu";
        const Mat<double> pq = elu ? naive_elu(X) : naive_dpfp(X, nu), pk = elu ? naive_elu(Y) : naive_dpfp(Y, nu);
        const Mat<double> ref = explicit_output(pq, pk, in.v, true, causal);
        for (std::size_t m : {1, 16}) {   // m does not matter
            const Estimator<double> est = estimator_for(v, m, in.q, in.k);
            const Mat<double> out = favor_attention(est, in.q, in.k, in.v, causal).out;
            REQUIRE(max_abs(out - ref) < 1e-12 * max_abs(ref));
            REQUIRE(max_abs(favor_forward(est, in.q, in.k, in.v, causal, 2) - ref) < 1e-12 * max_abs(ref));
        }
    }
}

TEST_CASE("nystrom features give A_hat = softmax(X K~^T) pinv(softmax(Q~ K~^T)) softmax(Q~ Y^T)", "[baselines]") {
    // L not a multiple of m (uneven segments), Lk != L.
    const QKV in = random_inputs(6, 90, 8, 3, 0.9);
    const QKV keys = random_inputs(7, 70, 8, 3, 0.9);
    const Mat<double> X = scale_rows(in.q), Y = scale_rows(keys.k);
    const std::size_t m = 12;
    for (const char* pinv : {"iterative", "exact"}) {
        CAPTURE(pinv);
        const Estimator<double> est = estimator_for({{"features", "nystrom"}, {"pinv", pinv}}, m, in.q, keys.k);
        const Approximation<double> a = favor_attention(est, in.q, keys.k, keys.v);
        const Mat<double> ql = segment_means(X, m), kl = segment_means(Y, m);
        const Mat<double> k2 = softmax_rows(matmul(ql, transpose(kl)));
        const Mat<double> P = std::string(pinv) == "exact" ? exact_pinv(k2) : iterative_pinv(k2, 6);
        const Mat<double> A_hat = nystrom_matrix(X, Y, m, P);
        REQUIRE(max_abs(matmul(a.q.phi, transpose(a.k.phi)) - A_hat) < 1e-12 * max_abs(A_hat));
        const Mat<double> ref = matmul(A_hat, keys.v);   // no row normalisation
        REQUIRE(max_abs(a.out - ref) < 1e-12 * max_abs(ref));
        // The metrics read A_hat as it is: attention_mse and negative_fraction from A_hat.
        const Mat<double> A = softmax_rows(matmul(X, transpose(Y)));
        double mse = 0, neg = 0;
        for (std::size_t k = 0; k < A.size(); ++k) {
            mse += (A.data()[k] - A_hat.data()[k]) * (A.data()[k] - A_hat.data()[k]);
            neg += A_hat.data()[k] < 0 ? 1 : 0;
        }
        const std::vector<std::string> cols = {"attention_mse", "kernel_mse", "negative_fraction"};
        const PairwiseRequest req = pairwise_request(cols, false, est.map, m, X, Y);
        REQUIRE(!req.kernel_mse);   // not a kernel: no kernel_mse
        const PairwiseResult p = pairwise_metrics(X, Y, a.q, a.k, req);
        REQUIRE(p.attention_mse == Approx(mse / double(A.size())).epsilon(1e-10));
        REQUIRE(p.negative_fraction == Approx(neg / double(A.size())));
        REQUIRE(std::isnan(p.kernel_mse));
    }
    // Segments: rows [floor(l L / m), floor((l + 1) L / m)).
    const Mat<double> means = segment_means(X, m);
    double first = 0;
    for (std::size_t r = 0; r < 7; ++r) first += X(r, 0) / 7.0;   // 90 / 12: segment 0 is rows 0..6
    REQUIRE(means(0, 0) == Approx(first).epsilon(1e-14));
}

TEST_CASE("nystrom: the output error falls with m", "[baselines]") {
    const QKV in = random_inputs(0, 256, 16, 16, 0.5);
    const double e4 = nystrom_output_mse(in, 4), e16 = nystrom_output_mse(in, 16), e64 = nystrom_output_mse(in, 64);
    CAPTURE(e4, e16, e64);
    REQUIRE(e16 < e4);
    REQUIRE(e64 < 0.7 * e4);
    REQUIRE(nystrom_output_mse(in, 256) < 0.05 * e4);   // m = L: one token per landmark
}

TEST_CASE("nystrom with the exact pseudo-inverse and m = L is exact attention", "[baselines]") {
    const QKV in = random_inputs(1, 64, 8, 5, GENERATE(0.5, 1.0));
    const Mat<double> exact = exact_attention(in.q, in.k, in.v);
    const Estimator<double> est = estimator_for({{"features", "nystrom"}, {"pinv", "exact"}}, 64, in.q, in.k);
    const Mat<double> out = favor_attention(est, in.q, in.k, in.v).out;
    REQUIRE(frobenius(out - exact) < 1e-8 * frobenius(exact));
}

TEST_CASE("nystrom in float32 follows float64", "[baselines]") {
    const QKV in = random_inputs(3, 200, 8, 5, 1.0);
    const Variant v = parse_variant({{"features", "nystrom"}}, Field{"t", ""}, false, "");
    const Mat<double> o64 = favor_attention(make_estimator<double>(v, 16, 8, 0, 0).for_inputs(in.q, in.k), in.q, in.k, in.v).out;
    const Mat<float> q = cast_mat<float>(in.q), k = cast_mat<float>(in.k), val = cast_mat<float>(in.v);
    const Mat<float> o32 = favor_attention(make_estimator<float>(v, 16, 8, 0, 0).for_inputs(q, k), q, k, val).out;
    REQUIRE(count_nonfinite(o32) == 0);
    REQUIRE(frobenius(cast_mat<double>(o32) - o64) < 1e-5 * frobenius(o64));
}

TEST_CASE("the iterative pseudo-inverse approaches the exact one as iterations grow", "[baselines]") {
    const QKV in = random_inputs(2, 256, 16, 4, 1.0);
    const Mat<double> X = scale_rows(in.q), Y = scale_rows(in.k);
    const std::size_t m = GENERATE(4, 16);
    CAPTURE(m);
    const Mat<double> k2 = softmax_rows(matmul(segment_means(X, m), transpose(segment_means(Y, m))));
    const Mat<double> P = exact_pinv(k2);
    double prev = 1e300;
    for (std::size_t it : {6, 12, 24, 48, 96}) {
        const double err = frobenius(iterative_pinv(k2, it) - P) / frobenius(P);
        CAPTURE(it, err);
        REQUIRE((err <= prev || err < 1e-11));   // until rounding
        prev = err;
    }
    REQUIRE(prev < 1e-8);
    // Z_0 = A^T / (|A|_1 |A|_inf): zero iterations give the scaled transpose.
    double n1 = 0, ninf = 0;
    for (std::size_t j = 0; j < m; ++j) {
        double c = 0, r = 0;
        for (std::size_t i = 0; i < m; ++i) c += k2(i, j), r += k2(j, i);
        n1 = std::max(n1, c), ninf = std::max(ninf, r);
    }
    REQUIRE(max_abs(iterative_pinv(k2, 0) - transpose(k2) / (n1 * ninf)) < 1e-15);
    // "iterations" reaches it: more iterations, output closer to the exact-pinv one.
    const double e_exact = nystrom_output_mse(in, m, {{"pinv", "exact"}});
    const double e6 = nystrom_output_mse(in, m), e96 = nystrom_output_mse(in, m, {{"iterations", 96}});
    REQUIRE(std::fabs(e96 - e_exact) < std::fabs(e6 - e_exact));
}

TEST_CASE("maps without row normalisation: linear attention does not divide, causal or not", "[baselines]") {
    const Mat<double> pq = {{1, 2}, {-1, 0.5}, {0, 3}};
    const Mat<double> pk = {{0.5, 1}, {2, -1}, {1, 1}};
    const Mat<double> V = {{1, 0}, {0, 1}, {2, 3}};
    for (const bool causal : {false, true}) {
        const Mat<double> ref = explicit_output(pq, pk, V, false, causal);
        REQUIRE(max_abs(linear_attention(pq, pk, V, causal, 1, false) - ref) < 1e-14);
    }
}

TEST_CASE("baseline variants: config checks and the resolved config", "[baselines][config]") {
    const std::string good = R"({"name": "b", "inputs": {"source": "random", "L": 64, "d": 4},
        "variants": [{"features": "elu"}, {"features": "dpfp", "nu": 2}, {"features": "nystrom"}], "m": [8, 16]})";
    const Config c = parse_config(json::parse(good), "c.json");
    REQUIRE(c.variants[0].name == "elu");
    REQUIRE(c.variants[0].projection_label().empty());
    REQUIRE(c.variants[2].map->params() == json{{"pinv", "iterative"}, {"iterations", 6}});
    REQUIRE(!c.resolved()["variants"][0].contains("projection"));
    REQUIRE_NOTHROW(parse_config(c.resolved(), "again.json"));   // run.json's config parses again

    auto error_of = [&](const std::string& set) {
        return favor_test::error_of([&] {
            json j = json::parse(good);
            apply_set(j, set);
            parse_config(j, "c.json");
        });
    };
    const auto [set, expect] = GENERATE(table<std::string, std::string>({
        {"variants.0.projection=\"orthogonal\"", "c.json: variants[0].projection: does not apply to 'elu' (it uses no random projection)"},
        {"variants.2.projection=\"iid\"", "c.json: variants[2].projection: does not apply to 'nystrom'"},
        {"variants.1.nu=0", "c.json: variants[1].nu: must be between 1 and 64"},
        {"variants.1.nu=1.5", "c.json: variants[1].nu: must be an integer"},
        {"variants.1.nu=8", "c.json: variants[1].nu: must be <= 2d - 1 = 7"},
        {"inputs.d=1", "c.json: variants[1]: 'dpfp' needs d >= 2"},
        {"variants.0.nu=2", "c.json: variants[0].nu: applies only to features 'dpfp'"},
        {"variants.2.pinv=\"svd\"", "c.json: variants[2].pinv: must be \"iterative\""},
        {"variants.2.iterations=0", "c.json: variants[2].iterations: must be between 1 and 1000"},
        {"variants.2.epsilon=1e-6", "c.json: variants[2].epsilon: does not apply to 'nystrom'"},
        {"m=[8,128]", "c.json: m: 'nystrom' takes m landmarks, means of m segments of the rows, so m <= L; got m = 128 with L = 64 (variants[2])"},
        {"causal=true", "c.json: causal: 'nystrom' (variants[2]) has no causal form"},
    }));
    CAPTURE(set);
    REQUIRE(error_of(set).find(expect) != std::string::npos);
}

TEST_CASE("baseline variants: exact-pinv iterations, kernel experiments", "[baselines][config]") {
    const json exact_iter = json::parse(R"({"inputs": {"source": "random", "L": 64, "d": 4}, "m": 8,
        "variants": [{"features": "nystrom", "pinv": "exact", "iterations": 3}]})");
    REQUIRE_THROWS_WITH(parse_config(exact_iter, "c.json"),
                        Catch::Contains("variants[0].iterations: applies only with \"pinv\": \"iterative\""));
    const json kernel = json::parse(R"({"experiment": "kernel", "d": 4, "m": 8, "norm": 1, "angle": 0.5,
        "variants": [{"features": "elu"}, {"features": "nystrom"}]})");
    REQUIRE_THROWS_WITH(parse_config(kernel, "k.json"), Catch::Contains("k.json: variants[1].features: 'nystrom' approximates attention"));
    // causal is fine for elu and dpfp
    const json causal = json::parse(R"({"inputs": {"source": "random", "L": 64, "d": 4}, "m": 8, "causal": true,
        "variants": [{"features": "elu"}, {"features": "dpfp"}]})");
    REQUIRE_NOTHROW(parse_config(causal, "c.json"));
}

TEST_CASE("baselines: timing flops count no projection for elu and dpfp", "[baselines]") {
    const std::size_t L = 1024, d = 16, dv = 16, m = 64;
    const double attention = 2.0 * 2.0 * double(L) * 16.0 * double(dv + 1);   // F = d for elu
    REQUIRE(favor_attention_flops(*map_named("elu"), L, L, d, dv, m) == attention);
    REQUIRE(favor_attention_flops(*map_named("positive"), L, L, d, dv, m) ==
            2.0 * 2.0 * double(L) * double(m) * double(d) + 2.0 * 2.0 * double(L) * double(m) * double(dv + 1));
    REQUIRE(favor_attention_flops(*map_named("nystrom"), L, L, d, dv, m) > 2.0 * 2.0 * double(L) * double(m) * double(dv + 1));
}
