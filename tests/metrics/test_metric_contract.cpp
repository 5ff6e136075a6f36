// Contract tests that walk the metric table (metric_table.hpp): every entry, including one
// added tomorrow, is checked for its value on exact attention, finiteness, float32 against
// float64, thread invariance, its head reduction, its cells and `favor list`. The values
// come through the table's own evaluators (output_values, forward_values, pairwise_values),
// as the approximation runner makes them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_linear.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/io/npy.hpp"
#include "favor/metrics/metric_table.hpp"

#include "helpers.hpp"

using namespace favor;

namespace {

// L spans three query blocks and key tiles (256, 256, 8): the thread count can matter.
constexpr std::size_t kL = 520, kD = 4, kDv = 3, kM = 8;

struct Problem {
    QKV in;
    Mat<double> X, Y, exact;   // scaled q, k (L, d); exact attention (L, dv)
    Mat<double> G;             // upstream gradient (L, dv)
    Gradients<double> grad;    // exact attention's gradients for G
};

Problem problem(std::uint64_t seed) {
    Problem p{random_inputs(seed, kL, kD, kDv, 1.0), {}, {}, {}, upstream_gradient(seed, kL, kDv, 0), {}};
    p.X = scale_rows(p.in.q), p.Y = scale_rows(p.in.k);
    p.exact = exact_attention(p.in.q, p.in.k, p.in.v);
    p.grad = exact_attention_backward(p.in.q, p.in.k, p.in.v, p.G);
    return p;
}

template <class T>
Gradients<double> widen(const Gradients<T>& g) {
    return {cast_mat<double>(g.dQ), cast_mat<double>(g.dK), cast_mat<double>(g.dV)};
}

// Features that give exact softmax attention: phi(x_i) = exp(s_ij - max_j s_ij) over the keys
// j with log scale max_j s_ij, phi(y_j) = e_j (F = Lk), so phi(x_i).phi(y_j) = exp(s_ij).
std::pair<Features<double>, Features<double>> exact_features(const Mat<double>& X, const Mat<double>& Y) {
    const std::size_t L = X.shape(0), Lk = Y.shape(0);
    Features<double> fq{Mat<double>::from_shape({L, Lk}), std::vector<double>(L)};
    Features<double> fk{Mat<double>::from_shape({Lk, Lk}), std::vector<double>(Lk, 0.0)};
    Mat<double> S = Mat<double>::from_shape({L, Lk});
    S.fill(0.0);
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t j = 0; j < Lk; ++j)
            for (std::size_t c = 0; c < X.shape(1); ++c) S(i, j) += X(i, c) * Y(j, c);
    fk.phi.fill(0.0);
    for (std::size_t j = 0; j < Lk; ++j) fk.phi(j, j) = 1.0;
    for (std::size_t i = 0; i < L; ++i) {
        double mx = S(i, 0);
        for (std::size_t j = 1; j < Lk; ++j) mx = std::max(mx, S(i, j));
        fq.log_scale[i] = mx;
        for (std::size_t j = 0; j < Lk; ++j) fq.phi(i, j) = std::exp(S(i, j) - mx);
    }
    return {fq, fk};
}

// Every metric of exact attention against itself: the output against the exact output, no
// overflow, the pass over the exact features.
MetricValues exact_values(const Problem& p, int threads) {
    const std::vector<std::string> cols = run_metric_names();
    MetricValues v;
    output_values(cols, p.exact, p.exact, v);
    upstream_values(cols, p.exact, p.exact, p.G, v);
    forward_values(cols, ForwardCounts{0, p.exact.size()}, v);
    const auto [fq, fk] = exact_features(p.X, p.Y);
    const PairwiseRequest req = pairwise_request(cols, false, nullptr, 0, p.X, p.Y);
    pairwise_values(cols, req, pairwise_metrics(p.X, p.Y, fq, fk, req, threads), v);
    gradient_values(cols, p.grad, p.grad, v);
    TrialGradients trials;
    for (int t = 0; t < 3; ++t) trials.add(p.grad);
    trial_gradient_values(cols, p.grad, trials, v);
    return v;
}

// Every metric of positive random features (m = kM, seed 3) in dtype T, as the runner makes
// them (the unfused forward, so the forward counts are there too).
template <class T>
MetricValues estimator_values(const Problem& p, int threads) {
    const std::vector<std::string> cols = run_metric_names();
    const Mat<T> q = cast_mat<T>(p.in.q), k = cast_mat<T>(p.in.k), vv = cast_mat<T>(p.in.v);
    const Variant var = parse_variant({{"features", "positive"}}, Field{"test", ""}, false, "");
    const Estimator<T> est = make_estimator<T>(var, kM, kD, 3, 0).for_inputs(q, k);
    MetricValues v;
    const auto t0 = std::chrono::steady_clock::now();
    const Approximation<T> a = favor_attention(est, q, k, vv, false, threads);
    clock_values(cols, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), v);
    output_values(cols, p.exact, a.out, v);
    upstream_values(cols, p.exact, a.out, p.G, v);
    forward_values(cols, {a.overflow, a.entries}, v);
    const PairwiseRequest req = pairwise_request(cols, false, est.map, kM, p.X, p.Y);
    pairwise_values(cols, req,
                    pairwise_metrics(p.X, p.Y, softmax_rows(p.X, p.Y, false, threads),
                                     EstimatorRows<T>(est, q, Side::query, threads),
                                     EstimatorRows<T>(est, k, Side::key, threads), req, threads),
                    v);
    const Mat<T> G = cast_mat<T>(p.G);
    gradient_values(cols, p.grad, widen(favor_backward(est, q, k, vv, G, false, threads)), v);
    TrialGradients trials;   // trials 0, 1, 2 of the cell, as the runner adds them
    for (std::uint64_t t = 0; t < 3; ++t)
        trials.add(widen(favor_backward(make_estimator<T>(var, kM, kD, 3, t).for_inputs(q, k), q, k, vv, G, false, threads)));
    trial_gradient_values(cols, p.grad, trials, v);
    return v;
}

double value(const MetricValues& v, const MetricInfo& m) {
    const auto it = v.find(m.name);
    REQUIRE(it != v.end());
    REQUIRE(it->second.has_value());
    return *it->second;
}

}  // namespace

TEST_CASE("every metric of the table: exact attention gives its perfect value", "[metric_contract]") {
    const Problem p = problem(1);
    const MetricValues v = exact_values(p, 1);
    for (const MetricInfo& m : metric_table()) {
        if (!m.perfect || m.source == MetricInfo::Source::model) continue;   // model: favor.swap_in's (Python tests)
        CAPTURE(m.name);
        // Exact up to float64 rounding of the softmax and of Out.
        REQUIRE(std::fabs(value(v, m) - *m.perfect) <= 1e-12);
    }
}

TEST_CASE("every metric of the table: finite, float32 agrees with float64, thread-invariant, cells as written",
          "[metric_contract]") {
    const Problem p = problem(2);
    const MetricValues v64 = estimator_values<double>(p, 1), v32 = estimator_values<float>(p, 1);
    const MetricValues v64t = estimator_values<double>(p, 3);
    for (const MetricInfo& m : metric_table()) {
        if (m.source == MetricInfo::Source::model) continue;
        CAPTURE(m.name);
        const double a = value(v64, m), b = value(v32, m);
        REQUIRE(std::isfinite(a));
        REQUIRE(metric_cell_problem(m.name, metric_cell(v64, m.name)).empty());
        if (m.source == MetricInfo::Source::clock) continue;   // not deterministic
        // float32 features and outputs: relative differences of a few hundred float32 roundings
        // of the entries, which the errors (about 1e-1 relative here) magnify by at most ~10.
        REQUIRE(std::fabs(a - b) <= 1e-4 * std::max(std::fabs(a), std::fabs(b)) + 1e-30);
        const double c = value(v64t, m);
        REQUIRE(std::memcmp(&a, &c, sizeof a) == 0);   // bitwise: the sums run in a fixed order
    }
}

// The approximation runner on two heads (a (2, L, d) .npy input), with one row per head and
// with one row for both: the row for both is each metric's declared reduction of the two.
// Two trials, so that the metrics over a cell's trials have a value (the rows of trial 0).
TEST_CASE("every metric of the table combines two heads by its declared rule", "[metric_contract]") {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("favor_metric_contract_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const Problem h0 = problem(4), h1 = problem(5);
    auto write = [&](const char* name, const Mat<double>& a, const Mat<double>& b) {
        std::vector<double> both(a.begin(), a.end());
        both.insert(both.end(), b.begin(), b.end());
        write_npy((dir / name).string(), {2, a.shape(0), a.shape(1)}, both.data(), false);
    };
    write("q.npy", h0.in.q, h1.in.q), write("k.npy", h0.in.k, h1.in.k), write("v.npy", h0.in.v, h1.in.v);
    auto run = [&](bool per_head) {
        nlohmann::json j = {{"experiment", "approximation"}, {"variants", {{{"features", "positive"}}}},
                            {"m", kM}, {"trials", 2}, {"metrics", run_metric_names()}};
        j["inputs"] = {{"source", "npy"}, {"per_head", per_head}, {"q", (dir / "q.npy").string()},
                       {"k", (dir / "k.npy").string()}, {"v", (dir / "v.npy").string()}};
        return run_experiment(parse_config(j, (dir / "c.json").string())).errors;
    };
    const Table heads = run(true), all = run(false);
    std::filesystem::remove_all(dir);
    REQUIRE(heads.rows.size() == 4);   // (trial, head) in that order
    REQUIRE(all.rows.size() == 2);
    for (const MetricInfo& m : metric_table()) {
        CAPTURE(m.name);
        if (m.source == MetricInfo::Source::clock || m.source == MetricInfo::Source::model) continue;   // not deterministic; not a run's
        const std::size_t c = heads.column(m.name);
        const double sum = std::stod(heads.rows[0][c]) + std::stod(heads.rows[1][c]);
        const double want = m.heads == MetricInfo::Reduce::sum ? sum : sum / 2.0;
        REQUIRE(all.rows[0][all.column(m.name)] == metric_cell({{m.name, want}}, m.name));
    }
    // The summed metrics are 0 on both heads here (nonfinite) or skipped (seconds): the rule
    // itself on values of every entry, and a blank head makes the combination blank.
    for (const MetricInfo& m : metric_table()) {
        CAPTURE(m.name);
        const MetricValues v0{{m.name, 1.5}}, v1{{m.name, 4.0}}, blank{{m.name, std::nullopt}};
        REQUIRE(*combine_heads({v0, v1}, {m.name}).at(m.name) == (m.heads == MetricInfo::Reduce::sum ? 5.5 : 2.75));
        REQUIRE(combine_heads({v0, blank}, {m.name}).empty());
    }
}

TEST_CASE("a run computes every metric but the model's, and a config naming a model metric is refused",
          "[metric_contract]") {
    for (const MetricInfo& m : metric_table()) {
        CAPTURE(m.name);
        const auto names = run_metric_names();
        const bool listed = std::find(names.begin(), names.end(), m.name) != names.end();
        REQUIRE(listed == (m.source != MetricInfo::Source::model));
        if (listed) continue;
        nlohmann::json j = {{"experiment", "approximation"}, {"variants", {{{"features", "positive"}}}},
                            {"m", 8}, {"metrics", {"output_mse", m.name}},
                            {"inputs", {{"source", "random"}, {"L", 16}, {"d", 4}}}};
        nlohmann::json ok = j;
        ok["metrics"] = {"output_mse"};
        REQUIRE_NOTHROW(parse_config(ok, "c.json"));   // the same config without it is valid
        REQUIRE_THROWS_WITH(parse_config(j, "c.json"),
                            Catch::Contains("metrics[1]") &&
                                Catch::Contains("favor.swap_in"));
    }
}

TEST_CASE("favor list names every metric of the table with its summary", "[metric_contract][cli]") {
    const std::string out = favor_test::favor_list_output();
    REQUIRE(!out.empty());
    for (const MetricInfo& m : metric_table()) {
        CAPTURE(m.name);
        const std::string direction = m.higher_is_better ? " (higher is better)" : "";
        REQUIRE(out.find("  " + std::string(m.name) + "  " + m.description + direction + "\n") != std::string::npos);
    }
}
