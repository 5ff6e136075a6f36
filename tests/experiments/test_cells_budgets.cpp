// Equal feature budgets (`num_features`) and input replication (`input_seeds`): the cells and
// m they resolve to, the config errors, today's inputs and tables at input seed 0, and
// byte-identical shards and merges of input-seed sweeps (docs/design.md 5-7).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>

#include "favor/experiments/config.hpp"
#include "helpers.hpp"
#include "favor/core/error.hpp"
#include "favor/core/rng.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/results/merge.hpp"
#include "favor/runs/cost_model.hpp"

using namespace favor;
using favor_test::as_input;
using nlohmann::json;

namespace {

json budget_config() {
    return json::parse(R"J({
        "name": "b", "seed": 5,
        "inputs": {"source": "random", "L": 48, "d": 8, "scale": 0.5},
        "variants": [{"features": "positive", "projection": "iid"},
                     {"features": "trig", "projection": "iid"},
                     {"features": "elu"},
                     {"features": "dpfp", "nu": 1}],
        "num_features": [128, 256], "trials": 2, "metrics": ["output_mse", "attention_mse"]})J");
}

json seeds_config() {
    return json::parse(R"J({
        "name": "s", "seed": 2,
        "inputs": {"source": "random", "L": [24, 40], "d": 4, "scale": [0.5, 1.0]},
        "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "elu"}],
        "m": [4, 8], "trials": 2, "input_seeds": [0, 3, 7], "metrics": ["output_mse", "attention_kl"]})J");
}

RunResult run_with(const json& j, Shard shard = {}, int threads = 2) {
    RunOptions opt;
    opt.threads = threads;
    opt.shard = shard;
    return run_experiment(parse_config(j, "t.json"), opt);
}


// The cells of a table as column -> value maps.
std::vector<std::map<std::string, std::string>> records(const Table& t) {
    std::vector<std::map<std::string, std::string>> out;
    for (const auto& r : t.rows) {
        std::map<std::string, std::string> m;
        for (std::size_t c = 0; c < t.columns.size(); ++c) m[t.columns[c]] = r[c];
        out.push_back(m);
    }
    return out;
}

void require_same_files(const RunResult& a, const RunResult& b) {
    REQUIRE(to_csv(a.errors) == to_csv(b.errors));
    REQUIRE(to_csv(a.summary) == to_csv(b.summary));
    REQUIRE(to_csv(a.baselines) == to_csv(b.baselines));
}

}  // namespace

TEST_CASE("num_features: an equal-budget config puts positive m = 256 and trig m = 128 in one F = 256 cell", "[budgets]") {
    const RunResult r = run_with(budget_config());
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> at;   // variant -> (m, F)
    for (const auto& s : records(r.summary)) at[s.at("variant")].push_back({s.at("m"), s.at("num_features")});
    using P = std::vector<std::pair<std::string, std::string>>;
    REQUIRE(at["positive-iid"] == P{{"128", "128"}, {"256", "256"}});
    REQUIRE(at["trig-iid"] == P{{"64", "128"}, {"128", "256"}});
    // Maps whose F is fixed by d appear once, at their own F (elu: d = 8; dpfp: 2 d nu = 16).
    REQUIRE(at["elu"] == P{{"8", "8"}});
    REQUIRE(at["dpfp"] == P{{"16", "16"}});
    REQUIRE(r.errors.rows.size() == 6 * 2);
    REQUIRE(r.info["shard"]["cells"] == 6);

    // The same numbers as the m grid at the resolved m (W is a function of (seed, projection, m,
    // d, trial)): an F grid only relabels and pairs the cells.
    json mj = budget_config();
    mj.erase("num_features");
    mj["m"] = json::array({64, 128, 256});
    const RunResult byM = run_with(mj);
    std::map<std::vector<std::string>, std::string> mse;   // (variant, m, trial) -> output_mse
    for (const auto& e : records(byM.errors)) mse[{e.at("variant"), e.at("m"), e.at("trial")}] = e.at("output_mse");
    for (const auto& e : records(r.errors)) {
        const std::string m = e.at("variant") == "elu" || e.at("variant") == "dpfp" ? "64" : e.at("m");
        CAPTURE(e.at("variant"), e.at("m"));
        REQUIRE(mse.at({e.at("variant"), m, e.at("trial")}) == e.at("output_mse"));
    }

    // Shards of the F grid merge into the unsharded run, byte for byte.
    std::vector<MergeInput> shards;
    for (std::size_t k = 0; k < 4; ++k) shards.push_back(as_input(run_with(budget_config(), Shard{k, 4}, 1), std::to_string(k)));
    require_same_files(merge_inputs(shards), r);
    // An m-grid result does not merge with an F-grid one.
    REQUIRE_THROWS_WITH(merge_inputs({as_input(r, "f"), as_input(byM, "m")}), Catch::Contains("over num_features"));
}

TEST_CASE("num_features and input_seeds: config errors name the field", "[budgets][config]") {
    auto error_of = [](const std::string& path, const json& value) {
        json j = budget_config();
        set_path(j, path, value);
        return favor_test::error_of([&] { parse_config(j, "c.json"); });
    };
    REQUIRE_THAT(error_of("num_features", 255),
                 Catch::Contains("c.json: num_features: 255 columns: 'trig' (variants[1]) has 2 columns per random vector"));
    REQUIRE_THAT(error_of("m", 16), Catch::Contains("num_features: give either m or num_features"));
    REQUIRE_THAT(error_of("num_features", 1 << 18), Catch::Contains("num_features: must be"));
    REQUIRE_THAT(error_of("variants.0", json{{"features", "nystrom"}}),
                 Catch::Contains("c.json: num_features: ") && Catch::Contains("(variants[0])"));   // m > L
    REQUIRE_THAT(error_of("input_seeds", 0), Catch::Contains("c.json: input_seeds: must be"));
    REQUIRE_THAT(error_of("input_seeds", json::array()), Catch::Contains("c.json: input_seeds: must not be empty"));
    REQUIRE_THAT(error_of("input_seeds", "3"), Catch::Contains("input_seeds: must be a number of draws or a list"));
    REQUIRE(error_of("input_seeds", 2).empty());
    json npy = budget_config();
    npy["inputs"] = json::parse(R"({"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy"})");
    npy["input_seeds"] = 2;
    REQUIRE_THROWS_WITH(parse_config(npy, "c.json"), Catch::Contains("c.json: input_seeds: applies only to random inputs"));
    json kernel = json::parse(R"({"experiment": "kernel", "d": 4, "norm": 1, "angle": 0,
                                  "variants": [{"features": "positive"}], "num_features": 8})");
    REQUIRE_THROWS_WITH(parse_config(kernel, "c.json"), Catch::Contains("c.json: num_features: does not apply to \"kernel\""));

    json j = budget_config();
    j["input_seeds"] = 3;
    REQUIRE(parse_config(j, "c.json").input_seeds == std::vector<std::uint64_t>{0, 1, 2});
    j["input_seeds"] = json::array({7, 2, 7});
    REQUIRE(parse_config(j, "c.json").resolved()["input_seeds"] == json::array({2, 7}));
    for (const json& same : {json(1), json::array({0})}) {   // the default: not recorded
        j["input_seeds"] = same;
        REQUIRE(!parse_config(j, "c.json").resolved().contains("input_seeds"));
    }
}

TEST_CASE("input seed 0 draws today's inputs, other seeds draw from keys that add the seed", "[budgets]") {
    const std::size_t L = 5, d = 3, dv = 2;
    auto stream = [&](std::initializer_list<std::uint64_t> key, std::size_t n) {
        std::vector<double> v(n);
        fill_normal(stream_key(key), v.data(), n);
        for (double& x : v) x *= 0.5;
        return v;
    };
    auto flat = [](const Mat<double>& m) { return std::vector<double>(m.begin(), m.end()); };
    const QKV zero = random_inputs(9, L, d, dv, 0.5), one = random_inputs(9, L, d, dv, 0.5, {{}, 1});
    REQUIRE(flat(zero.q) == stream({9, tag("inputs-q"), d}, L * d));
    REQUIRE(flat(zero.k) == stream({9, tag("inputs-k"), d}, L * d));
    REQUIRE(flat(zero.v) == stream({9, tag("inputs-v"), dv}, L * dv));
    REQUIRE(flat(one.q) == stream({9, tag("inputs-q"), d, 1}, L * d));
    REQUIRE(flat(one.v) == stream({9, tag("inputs-v"), dv, 1}, L * dv));
    REQUIRE(flat(one.q) != flat(zero.q));
}

TEST_CASE("input_seeds: N = 1 gives today's tables, N draws aggregate over (input seed, trial)", "[budgets]") {
    json today = seeds_config();
    today.erase("input_seeds");
    const RunResult base = run_with(today);
    for (const json& same : {json(1), json::array({0})}) {
        json j = seeds_config();
        j["input_seeds"] = same;
        const RunResult r = run_with(j);
        require_same_files(r, base);
        REQUIRE(r.baselines.columns.empty());
    }
    const RunResult r = run_with(seeds_config());
    REQUIRE(r.errors.has_column("input_seed"));
    REQUIRE(r.errors.rows.size() == 3 * base.errors.rows.size());
    // Input seed 0's rows are today's rows; the others differ (new inputs, the same W).
    std::map<std::vector<std::string>, std::string> today_mse;
    for (const auto& e : records(base.errors)) today_mse[{e.at("variant"), e.at("L"), e.at("m"), e.at("scale"), e.at("trial")}] = e.at("output_mse");
    std::size_t differ = 0;
    for (const auto& e : records(r.errors)) {
        const std::string& t = today_mse.at({e.at("variant"), e.at("L"), e.at("m"), e.at("scale"), e.at("trial")});
        if (e.at("input_seed") == "0") REQUIRE(e.at("output_mse") == t);
        else differ += e.at("output_mse") != t;
    }
    REQUIRE(differ == 2 * base.errors.rows.size());
    // Summaries: n = input seeds x trials; the mean over all of them; the baseline the mean of
    // the per-draw baselines.
    std::map<std::vector<std::string>, std::vector<double>> by_cell;
    for (const auto& e : records(r.errors))
        by_cell[{e.at("variant"), e.at("L"), e.at("m"), e.at("scale")}].push_back(std::stod(e.at("output_mse")));
    std::map<std::vector<std::string>, double> base_sum;
    for (const auto& b : records(r.baselines)) base_sum[{b.at("L"), b.at("scale")}] += std::stod(b.at("baseline_output_mse"));
    REQUIRE(r.baselines.rows.size() == 2 * 2 * 3);
    for (const auto& s : records(r.summary)) {
        const std::vector<double>& xs = by_cell.at({s.at("variant"), s.at("L"), s.at("m"), s.at("scale")});
        REQUIRE(s.at("trials") == "6");
        double mean = 0;
        for (double x : xs) mean += x;
        mean /= double(xs.size());
        REQUIRE(std::stod(s.at("output_mse_mean")) == Approx(mean).epsilon(1e-12));
        REQUIRE(std::stod(s.at("baseline_output_mse")) == Approx(base_sum.at({s.at("L"), s.at("scale")}) / 3).epsilon(1e-12));
    }
}

// (Resume with input seeds: test_result_dir.cpp, "resume from a journal gives byte-identical tables".)
TEST_CASE("input_seeds: shards and sweeps over input seeds reproduce the run byte for byte", "[budgets][merge]") {
    const json j = seeds_config();
    const RunResult full = run_with(j);
    std::vector<MergeInput> shards;
    for (std::size_t k = 0; k < 3; ++k) shards.push_back(as_input(run_with(j, Shard{k, 3}, 1), "s" + std::to_string(k)));
    require_same_files(merge_inputs({shards[1], shards[2], shards[0]}), full);

    // A sweep: seeds {0, 3} and {7} merge into the run of {0, 3, 7}; a run without input_seeds
    // is input seed 0.
    json a = j, b = j, none = j;
    a["input_seeds"] = json::array({0, 3});
    b["input_seeds"] = json::array({7});
    none.erase("input_seeds");
    json c = j;
    c["input_seeds"] = json::array({3, 7});
    require_same_files(merge_inputs({as_input(run_with(b), "b"), as_input(run_with(a), "a")}), full);
    const RunResult merged = merge_inputs({as_input(run_with(none), "none"), as_input(run_with(c), "c")});
    require_same_files(merged, full);
    REQUIRE(merged.info["config"]["input_seeds"] == json::array({0, 3, 7}));
    REQUIRE_THROWS_WITH(merge_inputs({as_input(run_with(a), "a"), as_input(run_with(c), "c")}),
                        Catch::Contains("input_seed=3") && Catch::Contains("is in both a and c"));
    MergeInput no_baselines = as_input(run_with(b), "b");
    no_baselines.baselines.reset();
    REQUIRE_THROWS_WITH(merge_inputs({no_baselines, as_input(run_with(a), "a")}), Catch::Contains("b/baselines.csv: missing"));

}

TEST_CASE("the cost estimate charges every input draw and the resolved m of each cell", "[budgets][limits]") {
    auto part = [](const Cost& c, const std::string& name) {
        for (const auto& [n, b] : c.parts)
            if (n == name) return b;
        return 0.0;
    };
    json one = seeds_config(), three = seeds_config();
    one.erase("input_seeds");
    one["inputs"]["L"] = three["inputs"]["L"] = 4096;
    const Cost c1 = estimate_run(parse_config(one, "c.json"), 1), c3 = estimate_run(parse_config(three, "c.json"), 1);
    REQUIRE(part(c3, "inputs") == Approx(3 * part(c1, "inputs")));   // the inputs of all draws are held
    REQUIRE(c3.seconds > 2.5 * c1.seconds);
    // num_features: trig at F = 512 costs what the m grid's trig at m = 256 costs.
    json f = budget_config(), m = budget_config();
    for (json* j : {&f, &m}) j->at("variants") = json::array({json{{"features", "trig"}}});
    f["num_features"] = 512;
    m.erase("num_features");
    m["m"] = 256;
    const Cost cf = estimate_run(parse_config(f, "c.json"), 1), cm = estimate_run(parse_config(m, "c.json"), 1);
    REQUIRE(cf.peak == cm.peak);
    REQUIRE(cf.where == cm.where);
    REQUIRE(cf.where.find("m = 256") != std::string::npos);
}
