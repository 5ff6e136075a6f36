// The gradient metrics (docs/design.md section 3): the runner's cells against their
// definitions computed here from the backward passes, the uniform baseline's dQ = dK = 0,
// the mean and spread over trials against a two-pass computation, and npy inputs with the
// upstream gradient given as a file.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "favor/attention/backward_linear.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/io/npy.hpp"
#include "favor/metrics/gradient_metrics.hpp"
#include "favor/metrics/output_metrics.hpp"

using namespace favor;

namespace {
Gradients<double> random_gradients(std::uint64_t seed) {
    const QKV a = random_inputs(seed, 7, 3, 2, 1.0);
    return {a.q, a.k, a.v};
}

double cell(const Table& t, std::size_t row, const std::string& col) { return std::stod(t.rows.at(row).at(t.column(col))); }

const std::vector<std::string> kGradMetrics = {"grad_q_rel_error", "grad_k_rel_error", "grad_v_rel_error", "grad_cosine",
                                               "grad_bias_rel"};
}  // namespace

TEST_CASE("TrialGradients: Welford's mean and spread equal the two-pass sums", "[gradient_metrics]") {
    std::vector<Gradients<double>> g;
    TrialGradients t;
    for (std::uint64_t s = 1; s <= 5; ++s) t.add(g.emplace_back(random_gradients(s)));
    double spread = 0;
    auto part = [&](auto member) {
        const std::size_t n = (g[0].*member).size();
        for (std::size_t k = 0; k < n; ++k) {
            double mean = 0;
            for (const auto& x : g) mean += (x.*member).data()[k] / 5.0;
            REQUIRE((t.mean().*member).data()[k] == Approx(mean).epsilon(1e-14).margin(1e-15));
            for (const auto& x : g) spread += ((x.*member).data()[k] - mean) * ((x.*member).data()[k] - mean);
        }
    };
    part(&Gradients<double>::dQ), part(&Gradients<double>::dK), part(&Gradients<double>::dV);
    REQUIRE(t.spread() == Approx(spread).epsilon(1e-13));
    // The floor of the exact gradient itself is 0, the bias of its mean 0; one trial: no floor.
    TrialGradients same;
    for (int i = 0; i < 3; ++i) same.add(g[0]);
    REQUIRE(grad_bias_rel(g[0], same) == 0.0);
    REQUIRE(grad_bias_floor(g[0], same) == 0.0);
    TrialGradients one;
    one.add(g[1]);
    REQUIRE(std::isnan(grad_bias_floor(g[0], one)));
}

TEST_CASE("gradient metrics: the runner's cells are their definitions, uniform attention's dQ and dK errors are 1",
          "[gradient_metrics]") {
    const std::size_t L = 300, d = 4, dv = 3, m = 8, trials = 3;
    const std::uint64_t seed = 5;
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        nlohmann::json j = {{"seed", seed}, {"inputs", {{"source", "random"}, {"L", L}, {"d", d}, {"d_v", dv}, {"scale", 0.7}}},
                            {"variants", {{{"features", "hyperbolic"}, {"projection", "orthogonal"}}, {{"features", "nystrom"}}}},
                            {"m", m}, {"trials", trials}, {"causal", false}, {"metrics", kGradMetrics}};
        if (causal) j["variants"] = {{{"features", "hyperbolic"}, {"projection", "orthogonal"}}}, j["causal"] = true;
        const RunResult r = run_experiment(parse_config(j, "grad.json"));
        const QKV in = random_inputs(seed, L, d, dv, 0.7);
        const Mat<double> G = upstream_gradient(seed, L, dv, 0);
        const Gradients<double> exact = exact_attention_backward(in.q, in.k, in.v, G, causal);
        const Config cfg = parse_config(j, "grad.json");
        TrialGradients acc;
        for (std::size_t t = 0; t < trials; ++t) {
            const Estimator<double> est = make_estimator<double>(cfg.variants[0], m, d, seed, t).for_inputs(in.q, in.k);
            const Gradients<double> g = favor_backward(est, in.q, in.k, in.v, G, causal);
            acc.add(g);
            // Cells are written in the shortest round-trip form: the same doubles.
            REQUIRE(cell(r.errors, t, "grad_q_rel_error") == output_rel_error(exact.dQ, g.dQ));
            REQUIRE(cell(r.errors, t, "grad_k_rel_error") == output_rel_error(exact.dK, g.dK));
            REQUIRE(cell(r.errors, t, "grad_v_rel_error") == output_rel_error(exact.dV, g.dV));
            REQUIRE(cell(r.errors, t, "grad_cosine") == grad_cosine(exact, g));
        }
        for (std::size_t t = 0; t < trials; ++t) {
            REQUIRE(cell(r.errors, t, "grad_bias_rel") == grad_bias_rel(exact, acc));
            REQUIRE(cell(r.errors, t, "grad_bias_floor") == grad_bias_floor(exact, acc));
        }
        // Uniform attention does not depend on Q or K: exactly 1 (its gradient is 0).
        REQUIRE(cell(r.summary, 0, "baseline_grad_q_rel_error") == 1.0);
        REQUIRE(cell(r.summary, 0, "baseline_grad_k_rel_error") == 1.0);
        REQUIRE(cell(r.summary, 0, "baseline_grad_v_rel_error") < 1.0);
        if (!causal)   // nystrom has no gradient: its gradient cells are blank
            for (const auto& c : kGradMetrics) REQUIRE(r.errors.rows.at(trials).at(r.errors.column(c)).empty());
    }
}

TEST_CASE("gradient metrics on npy heads: inputs.grad holding the drawn G gives the drawn run's numbers",
          "[gradient_metrics]") {
    const auto dir = std::filesystem::temp_directory_path() / ("favor_grad_metrics_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::size_t L = 40, d = 4, dv = 3;
    std::vector<double> q, k, v, g;
    for (std::size_t h = 0; h < 2; ++h) {
        const QKV in = random_inputs(10 + h, L, d, dv, 0.8);
        const Mat<double> G = upstream_gradient(2, L, dv, h);
        q.insert(q.end(), in.q.begin(), in.q.end()), k.insert(k.end(), in.k.begin(), in.k.end());
        v.insert(v.end(), in.v.begin(), in.v.end()), g.insert(g.end(), G.begin(), G.end());
    }
    write_npy((dir / "q.npy").string(), {2, L, d}, q.data(), false);
    write_npy((dir / "k.npy").string(), {2, L, d}, k.data(), false);
    write_npy((dir / "v.npy").string(), {2, L, dv}, v.data(), false);
    write_npy((dir / "g.npy").string(), {2, L, dv}, g.data(), false);
    nlohmann::json j = {{"seed", 2}, {"variants", {{{"features", "positive"}}}}, {"m", 8}, {"trials", 2},
                        {"metrics", kGradMetrics}};
    j["inputs"] = {{"source", "npy"}, {"per_head", true}, {"q", (dir / "q.npy").string()},
                   {"k", (dir / "k.npy").string()}, {"v", (dir / "v.npy").string()}};
    const Table drawn = run_experiment(parse_config(j, "g.json")).errors;
    j["inputs"]["grad"] = (dir / "g.npy").string();
    const Table given = run_experiment(parse_config(j, "g.json")).errors;
    j["inputs"]["grad"] = (dir / "q.npy").string();   // (2, L, d): not the output's shape
    REQUIRE_THROWS_WITH(run_experiment(parse_config(j, "g.json")), Catch::Contains("g.json: inputs.grad: ") &&
                                                                       Catch::Contains("expected (2, 40, 3)"));
    std::filesystem::remove_all(dir);
    REQUIRE(drawn.rows.size() == 4);
    REQUIRE(drawn.rows == given.rows);
    REQUIRE(std::stod(drawn.rows[0][drawn.column("grad_q_rel_error")]) !=
            std::stod(drawn.rows[1][drawn.column("grad_q_rel_error")]));   // the heads differ
}
