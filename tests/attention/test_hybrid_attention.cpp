// Hybrid attention (docs/design.md section 2.8) against independent references written here
// from the formulas: exact attention when the window covers every key, windowed softmax for
// features "none", the direct formula with the same W for a positive-feature remainder (and
// the top-k oracle), Monte Carlo unbiasedness of the kernel off the support, thread and row
// invariance, float32 / float16 against float64, and the runner's tables with hybrids; the
// gradient (hybrid_backward) against central finite differences of hybrid_attention, and the
// pairwise sums (hybrid_pairwise) against windowed softmax written here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "favor/attention/backward_exact.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/hybrid_attention.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/variant.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/io/report.hpp"
#include "favor/metrics/row_sampled_metrics.hpp"
#include "backward_helpers.hpp"
#include "helpers.hpp"
#include "hybrid_helpers.hpp"

using namespace favor;
using namespace favor_test;
using nlohmann::json;

namespace {

double max_rel(const Mat<double>& ref, const Mat<double>& got) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) num = std::max(num, std::fabs(ref.data()[i] - got.data()[i])),
                                                 den = std::max(den, std::fabs(ref.data()[i]));
    return num / den;
}

// Whether key j is exact for query i, from the issue's definition (window and sinks).
bool in_support(std::size_t i, std::size_t j, std::size_t w, std::size_t s, bool causal) {
    if (causal && j > i) return false;
    if (j < s) return true;
    return causal ? j + w > i : (i > j ? i - j : j - i) < w;
}

// Out_i = sum_j K_ij v_j / sum_j K_ij with K_ij = exp(x.y) on the support and the positive
// features' phi(x).phi(y) = (1/m) sum_r exp(w_r.x - |x|^2/2) exp(w_r.y - |y|^2/2) elsewhere
// (remainder false: 0), written directly in long double. topk: the support is instead the w
// largest scores of each visible row (ties to the lower index), plus the sinks.
Mat<double> direct(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V, const Mat<double>& W,
                   std::size_t w, std::size_t s, bool causal, bool remainder, bool topk = false) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), dv = V.shape(1), m = W.shape(0);
    const long double xs = 1.0L / std::pow((long double)d, 0.25L);
    auto phi = [&](const Mat<double>& X, std::size_t i, std::size_t r) {
        long double wx = 0, n2 = 0;
        for (std::size_t c = 0; c < d; ++c) wx += W(r, c) * xs * X(i, c), n2 += xs * X(i, c) * xs * X(i, c);
        return std::exp(wx - n2 / 2) / std::sqrt((long double)m);
    };
    Mat<double> out = Mat<double>::from_shape({L, dv});
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t n = causal ? i + 1 : K.shape(0);
        std::vector<long double> score(n);
        for (std::size_t j = 0; j < n; ++j) {
            long double dot = 0;
            for (std::size_t c = 0; c < d; ++c) dot += (long double)Q(i, c) * K(j, c);
            score[j] = dot / std::sqrt((long double)d);
        }
        std::vector<char> exact(n);
        for (std::size_t j = 0; j < n; ++j) exact[j] = topk ? j < s : in_support(i, j, w, s, causal);
        if (topk) {
            std::vector<std::size_t> o(n);
            std::iota(o.begin(), o.end(), 0);
            std::stable_sort(o.begin(), o.end(), [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
            for (std::size_t t = 0; t < std::min(w, n); ++t) exact[o[t]] = 1;
        }
        std::vector<long double> num(dv, 0);
        long double den = 0;
        for (std::size_t j = 0; j < n; ++j) {
            long double k = 0;
            if (exact[j]) k = std::exp(score[j]);
            else if (remainder)
                for (std::size_t r = 0; r < m; ++r) k += phi(Q, i, r) * phi(K, j, r);
            for (std::size_t c = 0; c < dv; ++c) num[c] += k * V(j, c);
            den += k;
        }
        for (std::size_t c = 0; c < dv; ++c) out(i, c) = double(num[c] / den);
    }
    return out;
}

QKV inputs(std::size_t L, std::size_t d, double scale, std::uint64_t seed = 3) { return random_inputs(seed, L, d, d, scale); }

}  // namespace

TEST_CASE("hybrid: a window covering every key is exact attention", "[hybrid]") {
    const QKV x = inputs(40, 8, 1.0);
    for (const bool causal : {false, true})
        for (const char* support : {"window", "topk"}) {
            const json v = {{"features", "positive"}, {"projection", "iid"}, {"window", 40}, {"support", support}};
            const Estimator<double> e = estimator_of(v, 16, x.q, x.k);
            const Mat<double> got = hybrid_attention(e, x.q, x.k, x.v, causal);
            REQUIRE(max_rel(exact_attention(x.q, x.k, x.v, causal), got) < 1e-13);
        }
}

TEST_CASE("hybrid: features none is sliding-window softmax with sinks", "[hybrid]") {
    const QKV x = inputs(37, 8, 1.5);
    for (const bool causal : {false, true})
        for (const auto& [w, s] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 0}, {4, 0}, {3, 2}, {0, 3}, {9, 1}}) {
            json v = {{"features", "none"}};
            if (w) v["window"] = w;
            if (s) v["sinks"] = s;
            const Estimator<double> e = estimator_of(v, 1, x.q, x.k);
            const Mat<double> W = Mat<double>::from_shape({1, 8});
            const Mat<double> ref = direct(x.q, x.k, x.v, W, w, s, causal, false);
            REQUIRE(max_rel(ref, hybrid_attention(e, x.q, x.k, x.v, causal)) < 1e-13);
        }
}

TEST_CASE("hybrid: window, sinks and positive features equal the direct formula with the same W", "[hybrid]") {
    const QKV x = inputs(48, 8, 1.0);
    for (const bool causal : {false, true})
        for (const bool topk : {false, true}) {
            json v = {{"features", "positive"}, {"projection", "orthogonal"}, {"window", 5}, {"sinks", 2}};
            if (topk) v["support"] = "topk";
            const Estimator<double> e = estimator_of(v, 24, x.q, x.k, 4);
            const Mat<double> ref = direct(x.q, x.k, x.v, e.W, 5, 2, causal, true, topk);
            REQUIRE(max_rel(ref, hybrid_attention(e, x.q, x.k, x.v, causal)) < 1e-12);
        }
}

TEST_CASE("hybrid: the kernel is exact on the support and unbiased off it (Monte Carlo)", "[hybrid]") {
    const QKV x = inputs(10, 4, 0.6, 11);
    const std::size_t i = 8, N = 4000;
    const json v = {{"features", "positive"}, {"projection", "iid"}, {"window", 3}, {"sinks", 1}};
    std::vector<std::vector<double>> draws(10);
    for (std::size_t t = 0; t < N; ++t) {
        const std::vector<double> k = hybrid_kernel_row(estimator_of(v, 8, x.q, x.k, t), x.q, x.k, i, true);
        REQUIRE(k[9] == 0.0);   // not visible
        for (std::size_t j = 0; j <= i; ++j) draws[j].push_back(k[j]);
    }
    for (std::size_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::size_t c = 0; c < 4; ++c) dot += x.q(i, c) * x.k(j, c);
        const double sm = std::exp(dot / 2.0);   // sqrt(d) = 2
        const auto [mean, se] = mean_se(draws[j]);
        if (in_support(i, j, 3, 1, true)) {
            REQUIRE(se == Approx(0.0).margin(1e-15));
            REQUIRE(mean == Approx(sm).epsilon(1e-13));
        } else {
            REQUIRE(se > 0);
            REQUIRE(std::fabs(mean - sm) < 5 * se);
        }
    }
}

TEST_CASE("hybrid: thread count and the rows asked change no bit", "[hybrid]") {
    const QKV x = inputs(150, 16, 1.0);
    for (const bool causal : {false, true}) {
        const json v = {{"features", "sderf"}, {"projection", "iid"}, {"window", 7}, {"sinks", 1}};
        const Estimator<double> e = estimator_of(v, 32, x.q, x.k);
        const Mat<double> one = hybrid_attention(e, x.q, x.k, x.v, causal, 1);
        const Mat<double> three = hybrid_attention(e, x.q, x.k, x.v, causal, 3);
        REQUIRE(std::equal(one.begin(), one.end(), three.begin()));
        const std::vector<std::size_t> rows = {0, 33, 34, 99, 149};
        const Mat<double> some = hybrid_attention(e, x.q, x.k, x.v, causal, 2, &rows);
        for (std::size_t r = 0; r < rows.size(); ++r)
            for (std::size_t c = 0; c < 16; ++c) REQUIRE(some(r, c) == one(rows[r], c));
    }
}

TEST_CASE("hybrid: one shift for both parts keeps large scores finite, float32 and float16 near float64", "[hybrid]") {
    // Scores up to a few thousand: exp overflows in any precision without the shift.
    QKV x = inputs(64, 16, 1.0);
    for (auto& q : x.q) q *= 12.0;
    for (const char* f : {"none", "positive", "trig"}) {
        const json v = {{"features", f}, {"window", 6}, {"sinks", 1}};
        for (const bool causal : {false, true}) {
            const Estimator<double> e = estimator_of(v, 16, x.q, x.k);
            const Mat<double> ref = hybrid_attention(e, x.q, x.k, x.v, causal);
            for (double o : ref) REQUIRE(std::isfinite(o));
            if (std::string(f) == "none") REQUIRE(max_rel(direct(x.q, x.k, x.v, e.W, 6, 1, causal, false), ref) < 1e-12);
            const Mat<float> q32 = cast_mat<float>(x.q), k32 = cast_mat<float>(x.k), v32 = cast_mat<float>(x.v);
            const Estimator<float> e32 = make_estimator<float>(variant_of(v), 16, 16, 7, 0).for_inputs(q32, k32);
            const Mat<double> got32 = cast_mat<double>(hybrid_attention(e32, q32, k32, v32, causal));
            for (double o : got32) REQUIRE(std::isfinite(o));
            // Scores of ~2000 carry float32 rounding of ~2000 * 2^-24 into the exponent.
            if (std::string(f) == "none") REQUIRE(max_rel(ref, got32) < 1e-3);
        }
    }
    // float16 (emulated) of moderate inputs: within half precision of float64.
    const QKV y = inputs(64, 16, 0.5);
    const json v = {{"features", "positive"}, {"window", 8}, {"sinks", 2}};
    const Estimator<double> e = estimator_of(v, 32, y.q, y.k);
    Mat<float> q16 = cast_mat<float>(y.q), k16 = cast_mat<float>(y.k), v16 = cast_mat<float>(y.v);
    for (Mat<float>* m : {&q16, &k16, &v16}) round_to(Rounding::fp16, m->data(), m->size());
    const Estimator<float> e16 = make_estimator<float>(variant_of(v), 32, 16, 7, 0, Rounding::fp16).for_inputs(q16, k16);
    REQUIRE(max_rel(hybrid_attention(e, y.q, y.k, y.v, true), cast_mat<double>(hybrid_attention(e16, q16, k16, v16, true))) <
            1e-2);
}

TEST_CASE("hybrid: variant keys, names and refusals", "[hybrid]") {
    CHECK(variant_of({{"features", "positive"}, {"window", 16}, {"sinks", 4}}).name == "positive-iid+w16+s4");
    CHECK(variant_of({{"features", "none"}, {"window", 64}}).name == "none+w64");
    CHECK(variant_of({{"features", "elu"}, {"window", 8}, {"support", "topk"}}).name == "elu+top8");
    CHECK(variant_of({{"features", "positive"}, {"window", 16}, {"sinks", 4}}).resolved()["window"] == 16);
    CHECK(error_of([] { variant_of({{"features", "none"}}); }).find("test: features: 'none' needs") == 0);
    CHECK(error_of([] { variant_of({{"features", "positive"}, {"support", "topk"}}); }).find("test: window: must be >= 1") == 0);
    CHECK(error_of([] { variant_of({{"features", "nystrom"}, {"window", 4}}); }).find("test: window: does not apply") == 0);
    CHECK(error_of([] { variant_of({{"features", "none"}, {"window", 4}, {"projection", "iid"}}); }).find("test: projection") == 0);
    CHECK(error_of([] { variant_of({{"features", "positive"}, {"window", -1}}); }).find("test: window") == 0);
    CHECK(error_of([] { variant_of({{"features", "positive"}, {"window", 2}, {"support", "top"}}); }).find("test: support") == 0);
}

TEST_CASE("hybrid: runner tables, all rows and row-sampled (query_rows)", "[hybrid]") {
    for (const bool causal : {false, true}) {
        json j = json::parse(R"({"name": "t", "seed": 5,
            "inputs": {"source": "random", "L": 200, "d": 8},
            "variants": [{"features": "positive", "window": 200}, {"features": "none", "window": 4, "sinks": 1},
                         {"features": "positive", "window": 4, "sinks": 1}],
            "m": 16, "trials": 2, "metrics": ["output_rel_error", "attention_tv"]})");
        j["causal"] = causal;
        const RunResult all = run_experiment(parse_config(j, "t.json"));
        const Table& e = all.errors;
        for (const auto& row : e.rows) {
            if (row[e.column("variant")] == "positive-iid+w200") REQUIRE(std::stod(row[e.column("output_rel_error")]) < 1e-13);
            else REQUIRE(std::stod(row[e.column("output_rel_error")]) > 1e-3);
            const double tv = std::stod(row[e.column("attention_tv")]);   // the hybrid's explicit A_hat
            if (row[e.column("variant")] == "positive-iid+w200") REQUIRE(tv < 1e-13);
            else REQUIRE(tv > 1e-3);
        }
        j["query_rows"] = 60;
        const RunResult some = run_experiment(parse_config(j, "t.json"));
        for (const auto& row : some.errors.rows) {
            const double v = std::stod(row[some.errors.column("output_rel_error")]);
            if (row[some.errors.column("variant")] == "positive-iid+w200") REQUIRE(v < 1e-13);
            else REQUIRE((v > 1e-3 && std::stod(row[some.errors.column("output_rel_error_row_sem")]) > 0));
            const double tv = std::stod(row[some.errors.column("attention_tv")]);
            if (row[some.errors.column("variant")] == "positive-iid+w200") REQUIRE(tv < 1e-13);
            else REQUIRE((tv > 1e-3 && std::stod(row[some.errors.column("attention_tv_row_sem")]) > 0));
        }
    }
}

namespace {

// d/dX of sum(G o hybrid_attention(e, Q, K, V)) by central differences (e fitted once and held
// fixed, as the gradient holds W and the map's fitted parameters), X one of Q, K, V.
Mat<double> hybrid_fd(const Estimator<double>& e, QKV& x, Mat<double>& X, const Mat<double>& G, bool causal, double h) {
    Mat<double> d = Mat<double>::from_shape(X.shape());
    auto loss = [&] {
        const Mat<double> o = hybrid_attention(e, x.q, x.k, x.v, causal);
        double t = 0;
        for (std::size_t k = 0; k < o.size(); ++k) t += G.data()[k] * o.data()[k];
        return t;
    };
    for (std::size_t k = 0; k < X.size(); ++k) {
        const double x0 = X.data()[k];
        X.data()[k] = x0 + h;
        const double up = loss();
        X.data()[k] = x0 - h;
        const double down = loss();
        X.data()[k] = x0;
        d.data()[k] = (up - down) / (2 * h);
    }
    return d;
}

}  // namespace

TEST_CASE("hybrid: the gradient equals central finite differences", "[hybrid][grad]") {
    // Central differences: truncation ~ h^2 (the third derivative's size), rounding ~ eps / h
    // (relative, O(1) inputs); with h = 1e-5 both are ~1e-10 or below, so 1e3 (h^2 + eps / h)
    // ~ 1e-7 leaves room for the constants and still catches any wrong term (O(1) relative).
    const double h = 1e-5, tol = 1e3 * (h * h + 2.2e-16 / h);
    const std::vector<json> variants = {
        {{"features", "positive"}, {"projection", "iid"}, {"window", 3}, {"sinks", 1}},
        {{"features", "none"}, {"window", 3}, {"sinks", 1}},
        {{"features", "positive"}, {"projection", "orthogonal"}, {"window", 4}, {"sinks", 1}, {"support", "topk"}},
        {{"features", "trig"}, {"projection", "iid"}, {"window", 2}},   // log scale |x|^2/2, not a fixed shift
        {{"features", "elu"}, {"sinks", 2}}};
    for (const bool causal : {false, true})
        for (const json& v : variants) {
            QKV x = random_inputs(5, 11, 4, 3, 1.0);
            const Mat<double> G = normal(11, 3, 1.0, 17);
            const Estimator<double> e = estimator_of(v, 8, x.q, x.k, 2);
            const Gradients<double> g = hybrid_backward(e, x.q, x.k, x.v, G, causal);
            const double eq = rel_diff(g.dQ, hybrid_fd(e, x, x.q, G, causal, h));
            const double ek = rel_diff(g.dK, hybrid_fd(e, x, x.k, G, causal, h));
            const double ev = rel_diff(g.dV, hybrid_fd(e, x, x.v, G, causal, h));
            CAPTURE(v.dump(), causal, eq, ek, ev, tol);
            CHECK(eq < tol);
            CHECK(ek < tol);
            CHECK(ev < tol);
        }
    // Fewer keys than queries (non-causal): the window |i - j| < w over the keys there are.
    QKV x = random_inputs(5, 11, 4, 3, 1.0);
    x.k = normal(7, 4, 1.0, 21), x.v = normal(7, 3, 1.0, 22);
    const Mat<double> G = normal(11, 3, 1.0, 17);
    const Estimator<double> e = estimator_of(variants[0], 8, x.q, x.k, 2);
    const Gradients<double> g = hybrid_backward(e, x.q, x.k, x.v, G, false);
    CHECK(rel_diff(g.dQ, hybrid_fd(e, x, x.q, G, false, h)) < tol);
    CHECK(rel_diff(g.dK, hybrid_fd(e, x, x.k, G, false, h)) < tol);
    CHECK(rel_diff(g.dV, hybrid_fd(e, x, x.v, G, false, h)) < tol);
}

TEST_CASE("hybrid: a window covering every key has exact attention's gradient", "[hybrid][grad]") {
    const QKV x = inputs(40, 8, 1.0);
    const Mat<double> G = normal(40, 8, 1.0, 5);
    for (const bool causal : {false, true})
        for (const char* support : {"window", "topk"}) {
            const json v = {{"features", "positive"}, {"projection", "iid"}, {"window", 40}, {"support", support}};
            const Gradients<double> got = hybrid_backward(estimator_of(v, 16, x.q, x.k), x.q, x.k, x.v, G, causal);
            const Gradients<double> ref = exact_attention_backward(x.q, x.k, x.v, G, causal);
            CHECK(rel_diff(got.dQ, ref.dQ) < 1e-13);
            CHECK(rel_diff(got.dK, ref.dK) < 1e-13);
            CHECK(rel_diff(got.dV, ref.dV) < 1e-13);
        }
}

TEST_CASE("hybrid: the gradient is the same bits on 1 and 2 threads, float32 near float64, and refusals", "[hybrid][grad]") {
    const QKV x = inputs(150, 16, 1.0);
    const Mat<double> G = normal(150, 16, 1.0, 9);
    for (const bool causal : {false, true})
        for (const char* f : {"sderf", "none"}) {
            json v = {{"features", f}, {"window", 7}, {"sinks", 1}};
            if (std::string(f) != "none") v["projection"] = "iid";
            const Estimator<double> e = estimator_of(v, 32, x.q, x.k);
            const Gradients<double> one = hybrid_backward(e, x.q, x.k, x.v, G, causal, 1);
            const Gradients<double> two = hybrid_backward(e, x.q, x.k, x.v, G, causal, 2);
            REQUIRE(std::equal(one.dQ.begin(), one.dQ.end(), two.dQ.begin()));
            REQUIRE(std::equal(one.dK.begin(), one.dK.end(), two.dK.begin()));
            REQUIRE(std::equal(one.dV.begin(), one.dV.end(), two.dV.begin()));
        }
    const json v = {{"features", "positive"}, {"window", 5}, {"sinks", 1}};
    const Gradients<double> g64 = hybrid_backward(estimator_of(v, 16, x.q, x.k), x.q, x.k, x.v, G, true);
    const Mat<float> q = cast_mat<float>(x.q), k = cast_mat<float>(x.k), vv = cast_mat<float>(x.v), g = cast_mat<float>(G);
    const Estimator<float> e32 = make_estimator<float>(variant_of(v), 16, 16, 7, 0).for_inputs(q, k);
    const Gradients<float> g32 = hybrid_backward(e32, q, k, vv, g, true);
    CHECK(rel_diff(cast_mat<double>(g32.dQ), g64.dQ) < 1e-4);
    CHECK(rel_diff(cast_mat<double>(g32.dK), g64.dK) < 1e-4);
    CHECK(rel_diff(cast_mat<double>(g32.dV), g64.dV) < 1e-4);
    const json eps = {{"features", "positive"}, {"epsilon", 1e-6}, {"window", 5}};
    CHECK(error_of([&] { hybrid_backward(estimator_of(eps, 16, x.q, x.k), x.q, x.k, x.v, G); }).find("have no gradient") !=
          std::string::npos);
}

namespace {

// Windowed softmax with sinks (features none) against exact softmax, each row written from
// the definitions in long double: the sums attention, tv, kl_undefined, pairs, rows.
PairwiseSums windowed_sums(const Mat<double>& q, const Mat<double>& k, std::size_t w, std::size_t s, bool causal) {
    const std::size_t L = q.shape(0), d = q.shape(1);
    PairwiseSums t;
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t n = causal ? i + 1 : k.shape(0);
        std::vector<long double> sc(n);
        long double mx = -INFINITY, z = 0, zw = 0, tv = 0;
        for (std::size_t j = 0; j < n; ++j) {
            long double dot = 0;
            for (std::size_t c = 0; c < d; ++c) dot += (long double)q(i, c) * k(j, c);
            sc[j] = dot / std::sqrt((long double)d);
            mx = std::max(mx, sc[j]);
        }
        for (std::size_t j = 0; j < n; ++j) {
            z += std::exp(sc[j] - mx);
            if (in_support(i, j, w, s, causal)) zw += std::exp(sc[j] - mx);
        }
        for (std::size_t j = 0; j < n; ++j) {
            const long double a = std::exp(sc[j] - mx) / z;
            const long double ah = in_support(i, j, w, s, causal) ? std::exp(sc[j] - mx) / zw : 0.0L;
            t.attention += double((a - ah) * (a - ah));
            tv += std::fabs(a - ah);
            t.kl_undefined = t.kl_undefined || !(ah > 0);
        }
        t.tv += double(tv / 2), t.pairs += double(n), t.rows += 1;
    }
    return t;
}

std::vector<PairwiseSums> pairwise_of(const Estimator<double>& e, const QKV& x, const PairwiseRequest& req,
                                      int threads = 1, const std::vector<std::size_t>* rows = nullptr) {
    const Mat<double> X = scale_rows(rows ? take_rows(x.q, *rows) : x.q), Y = scale_rows(x.k);
    return hybrid_pairwise(e, x.q, x.k, X, Y, req, threads, rows);
}

PairwiseSums total_of(const std::vector<PairwiseSums>& rows) {
    PairwiseSums t;
    for (const auto& r : rows) t.add(r);
    return t;
}

}  // namespace

TEST_CASE("hybrid: pairwise metrics of the explicit A_hat", "[hybrid]") {
    const QKV x = inputs(45, 8, 1.5);
    for (const bool causal : {false, true}) {
        PairwiseRequest req;
        req.attention_mse = req.attention_tv = req.attention_kl = req.negative_fraction = req.kernel_mse = true;
        req.causal = causal;
        // A window covering every key: A_hat = A to rounding (the scores q.k / sqrt(d) against
        // x.y, each rounded differently), so attention_mse, attention_tv, attention_kl and
        // kernel_mse are 0 to rounding.
        const json all = {{"features", "positive"}, {"projection", "iid"}, {"window", 45}};
        const PairwiseResult r = pairwise_result(total_of(pairwise_of(estimator_of(all, 16, x.q, x.k), x, req)), req);
        CHECK(r.attention_mse < 1e-30);
        CHECK(r.attention_tv < 1e-14);
        CHECK(std::fabs(r.attention_kl) < 1e-14);
        CHECK(r.negative_fraction == 0.0);
        CHECK(r.kernel_mse < 1e-24);
        // Features none: A_hat is windowed softmax with sinks.
        const json none = {{"features", "none"}, {"window", 4}, {"sinks", 2}};
        const Estimator<double> e = estimator_of(none, 1, x.q, x.k);
        const std::vector<PairwiseSums> per = pairwise_of(e, x, req, 1);
        const PairwiseSums got = total_of(per), ref = windowed_sums(x.q, x.k, 4, 2, causal);
        CHECK(got.attention == Approx(ref.attention).epsilon(1e-12));
        CHECK(got.tv == Approx(ref.tv).epsilon(1e-12));
        CHECK(got.pairs == ref.pairs);
        CHECK(got.rows == ref.rows);
        CHECK(got.negative == 0.0);
        CHECK(got.kl_undefined == ref.kl_undefined);
        // Threads and the rows asked change no bit of a row's sums.
        const std::vector<PairwiseSums> two = pairwise_of(e, x, req, 2);
        const std::vector<std::size_t> rows = {0, 7, 33, 44};
        const std::vector<PairwiseSums> some = pairwise_of(e, x, req, 1, &rows);
        for (std::size_t i = 0; i < per.size(); ++i) REQUIRE(per[i].attention == two[i].attention);
        for (std::size_t s = 0; s < rows.size(); ++s) {
            REQUIRE(some[s].attention == per[rows[s]].attention);
            REQUIRE(some[s].tv == per[rows[s]].tv);
            REQUIRE(some[s].pairs == per[rows[s]].pairs);
        }
    }
}

TEST_CASE("hybrid: runner gradient and pairwise metrics", "[hybrid][grad]") {
    for (const bool causal : {false, true}) {
        json j = json::parse(R"({"name": "t", "seed": 5,
            "inputs": {"source": "random", "L": 64, "d": 8},
            "variants": [{"features": "positive", "window": 64}, {"features": "none", "window": 4, "sinks": 1},
                         {"features": "positive", "window": 4, "sinks": 1},
                         {"features": "positive", "window": 4, "epsilon": 1e-6, "name": "eps"}],
            "m": 16, "trials": 3,
            "metrics": ["output_rel_error", "attention_mse", "kernel_mse", "grad_q_rel_error", "grad_k_rel_error",
                        "grad_v_rel_error", "grad_cosine", "grad_bias_rel"]})");
        j["causal"] = causal;
        const RunResult res = run_experiment(parse_config(j, "t.json"));
        const Table& e = res.errors;
        for (const auto& row : e.rows) {
            const std::string var = row[e.column("variant")];
            CAPTURE(var, causal);
            if (var == "eps") {   // a map without a gradient: blank, the pairwise metrics not
                REQUIRE(row[e.column("grad_q_rel_error")].empty());
                REQUIRE(!row[e.column("attention_mse")].empty());
                continue;
            }
            for (const char* c : {"grad_q_rel_error", "grad_k_rel_error", "grad_v_rel_error", "grad_bias_rel", "attention_mse"}) {
                const double val = std::stod(row[e.column(c)]);
                if (var == "positive-iid+w64") REQUIRE(val < 1e-12);
                else REQUIRE(val > 1e-6);
            }
            const double floor = std::stod(row[e.column("grad_bias_floor")]);
            if (var == "positive-iid+w4+s1") REQUIRE(floor > 0.0);
            if (var == "none+w4+s1") REQUIRE(floor == 0.0);   // no W: every trial the same
            REQUIRE(row[e.column("kernel_mse")].empty() == (var == "none+w4+s1"));   // none is no kernel
            REQUIRE(row[e.column("kernel_mse_theory")].empty());
            const double cosine = std::stod(row[e.column("grad_cosine")]);
            REQUIRE(cosine > (var == "positive-iid+w64" ? 1 - 1e-12 : 0.0));
        }
    }
}
