// The experiment runner: determinism (thread count, grid order, shards), trends, and the
// kernel experiment against Lemma 2 / Theorem 2.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <set>

#include "favor/core/error.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/io/npy.hpp"

using namespace favor;
using nlohmann::json;

namespace {

json small_config() {
    return json::parse(R"({
        "name": "t", "seed": 3,
        "inputs": {"source": "random", "L": [64, 200], "d": 8, "scale": [0.5, 1.0]},
        "variants": [{"features": "positive", "projection": "orthogonal"},
                     {"features": "trig", "projection": "iid"},
                     {"features": "oprf", "projection": "iid"}],
        "m": [8, 32], "trials": 3,
        "metrics": ["output_mse", "attention_mse", "kernel_mse", "negative_fraction"]})");
}

Table run(const json& j, int threads, Shard shard = {}) {
    RunOptions opt;
    opt.threads = threads;
    opt.shard = shard;
    return run_experiment(parse_config(j, "t.json"), opt).errors;
}

}  // namespace

TEST_CASE("a cell gives bit-identical numbers with 1 or 2 threads, in any grid order", "[experiment]") {
    const Table one = run(small_config(), 1), two = run(small_config(), 2);
    REQUIRE(to_csv(one) == to_csv(two));
    REQUIRE(one.rows.size() == 3 * 2 * 2 * 2 * 3);
    // Only m = 32 and the reversed variant list: the same rows for the same cells.
    json j = small_config();
    j["m"] = 32;
    std::swap(j["variants"][0], j["variants"][2]);
    const Table part = run(j, 2);
    std::set<std::vector<std::string>> full(one.rows.begin(), one.rows.end());
    for (const auto& r : part.rows) REQUIRE(full.count(r) == 1);
}

TEST_CASE("shards partition the cells and reproduce the unsharded rows", "[experiment]") {
    const Table all = run(small_config(), 2);
    std::multiset<std::vector<std::string>> rows;
    for (std::size_t k = 0; k < 4; ++k)
        for (const auto& r : run(small_config(), 1, Shard{k, 4}).rows) rows.insert(r);
    REQUIRE(rows == std::multiset<std::vector<std::string>>(all.rows.begin(), all.rows.end()));
}

TEST_CASE("output MSE falls with m and orthogonal beats iid at small scale", "[experiment][stats]") {
    json j = json::parse(R"({
        "name": "trend", "seed": 1,
        "inputs": {"source": "random", "L": 256, "d": 16, "scale": 0.5},
        "variants": [{"features": "positive", "projection": "iid"},
                     {"features": "positive", "projection": "orthogonal"}],
        "m": [16, 256], "trials": 8, "metrics": ["output_mse"]})");
    const RunResult r = run_experiment(parse_config(j, "trend.json"), {});
    const Table& s = r.summary;
    auto mean = [&](std::size_t row) { return std::stod(s.rows[row][s.column("output_mse_mean")]); };
    auto sem = [&](std::size_t row) { return std::stod(s.rows[row][s.column("output_mse_sem")]); };
    // rows: iid m16, iid m256, orth m16, orth m256
    REQUIRE(mean(1) + 4 * sem(1) < mean(0) - 4 * sem(0));
    REQUIRE(mean(3) + 4 * sem(3) < mean(2) - 4 * sem(2));
    REQUIRE(mean(2) < mean(0));
}

TEST_CASE("kernel experiment: within 3 standard errors of Lemma 2, orthogonal below iid and Theorem 2", "[experiment][stats]") {
    json j = json::parse(R"({
        "name": "k", "experiment": "kernel", "seed": 4, "d": 8, "m": [4, 16],
        "norm": [0.25, 0.5, 0.75], "angle": [0.0, 1.0, 2.0, 3.0], "trials": 4000,
        "variants": [{"features": "trig", "projection": "iid"},
                     {"features": "positive", "projection": "iid"},
                     {"features": "hyperbolic", "projection": "iid"},
                     {"features": "positive", "projection": "orthogonal"}]})");
    const Table s = run_experiment(parse_config(j, "k.json"), {}).summary;
    const std::size_t cv = s.column("variant"), cmse = s.column("mse"), csem = s.column("mse_sem"),
                      cth = s.column("mse_theory"), cb = s.column("theorem2_bound");
    std::size_t checked = 0;
    for (std::size_t i = 0; i < s.rows.size(); ++i) {
        const auto& r = s.rows[i];
        CAPTURE(r);
        const double mse = std::stod(r[cmse]), sem = std::stod(r[csem]);
        if (r[cv] != "positive-orthogonal") {
            // Plus the floating-point floor (SM * 1e-15)^2 where the true MSE is 0 (trig, x = y).
            const double sm = std::stod(r[s.column("sm")]);
            REQUIRE(std::fabs(mse - std::stod(r[cth])) < 3.0 * sem + 1e-30 * sm * sm);
            ++checked;
        } else {
            REQUIRE(r[cth].empty());
            // Same (m, norm, angle) row of positive-iid: 24 rows per variant.
            const auto& iid = s.rows[i - 2 * 24];
            REQUIRE(iid[cv] == "positive-iid");
            const double iid_mse = std::stod(iid[cth]), bound = std::stod(r[cb]);
            REQUIRE(bound <= iid_mse);
            REQUIRE(mse < bound + 3.0 * sem);
            // Below iid, significantly so where Theorem 2 promises a gap of over 6 standard errors.
            if (iid_mse - bound > 6.0 * sem) REQUIRE(mse < iid_mse - 3.0 * sem);
        }
    }
    REQUIRE(checked == 3 * 24);
}

TEST_CASE("kernel experiment with pairs from .npy files: the sampled rows, their norms and angle", "[experiment][kernel]") {
    // q (2, 20, 4) with unequal coordinate scales, k (20, 4): 5 pairs, rows flattened over the
    // leading dimensions, scaled by d^-1/4. Each summary row names its rows; its norm_x,
    // norm_y, angle and sm are those of the pair; gerf fits t to the unequal norms, so its
    // closed-form MSE is below oprf's (equal only where |x| = |y|). Bad files: one line
    // naming the field and the file.
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("favor_pairs_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::size_t d = 4;
    std::vector<double> q(2 * 20 * d), k(20 * d);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = (i % d < 2 ? 0.2 : 1.1) * std::sin(1.7 * double(i) + 0.3);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = 0.5 * std::cos(0.9 * double(i) + 0.1);
    write_npy((dir / "q.npy").string(), {2, 20, d}, q.data(), false);
    write_npy((dir / "k.npy").string(), {20, d}, k.data(), true);
    json j = json::parse(R"({"name": "p", "experiment": "kernel", "seed": 5, "d": 4, "m": 8, "trials": 50,
        "variants": [{"features": "oprf", "projection": "iid"}, {"features": "gerf", "projection": "iid"}]})");
    j["pairs"] = {{"q", (dir / "q.npy").string()}, {"k", (dir / "k.npy").string()}, {"count", 5}};
    const Table s = run_experiment(parse_config(j, "p.json"), {}).summary;
    REQUIRE(s.rows.size() == 10);
    const std::size_t cq = s.column("q_row"), ck = s.column("k_row"), cx = s.column("norm_x"),
                      cy = s.column("norm_y"), ca = s.column("angle"), cth = s.column("mse_theory");
    const double scale = 1.0 / std::sqrt(2.0);   // d^-1/4 at d = 4
    for (std::size_t r = 0; r < 5; ++r) {
        const auto& row = s.rows[r];
        CAPTURE(row);
        const std::size_t i = std::stoul(row[cq]), jk = std::stoul(row[ck]);
        REQUIRE(i < 40);
        REQUIRE(jk < 20);
        double x2 = 0, y2 = 0, xy = 0;
        for (std::size_t c = 0; c < d; ++c) {
            const double x = scale * q[i * d + c], y = scale * double(float(k[jk * d + c]));
            x2 += x * x, y2 += y * y, xy += x * y;
        }
        REQUIRE(std::stod(row[cx]) == Approx(std::sqrt(x2)).epsilon(1e-12));
        REQUIRE(std::stod(row[cy]) == Approx(std::sqrt(y2)).epsilon(1e-12));
        REQUIRE(std::cos(std::stod(row[ca])) == Approx(xy / std::sqrt(x2 * y2)).margin(1e-12));
        REQUIRE(std::stod(row[s.column("sm")]) == Approx(std::exp(xy)).epsilon(1e-12));
        REQUIRE(s.rows[r + 5][cq] == row[cq]);   // gerf: the same pairs
        REQUIRE(std::stod(s.rows[r + 5][cth]) < std::stod(row[cth]));
    }
    const json bad_q = {{"q", (dir / "k.npy").string()}, {"k", (dir / "q.npy").string()}, {"count", 5}};
    j["pairs"] = bad_q;
    j["d"] = 5;
    REQUIRE_THROWS_WITH(run_experiment(parse_config(j, "p.json"), {}),
                        Catch::Contains("pairs.q: ") && Catch::Contains("k.npy: shape (20, 4)"));
    j["pairs"]["q"] = (dir / "missing.npy").string();
    REQUIRE_THROWS_WITH(run_experiment(parse_config(j, "p.json"), {}), Catch::StartsWith("pairs.q: "));
    j["angle"] = 1.0;
    REQUIRE_THROWS_WITH(parse_config(j, "p.json"), Catch::Contains("angle: not allowed with \"pairs\""));
    fs::remove_all(dir);
}
