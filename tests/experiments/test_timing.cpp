// The timing experiment: table shape and columns, flop counts, the crossover rule, and the
// hand-written vectorised exp at the edges of its range. Never the speed itself.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "favor/core/memory.hpp"
#include "favor/core/vmath.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/timing.hpp"

#include "helpers.hpp"

using namespace favor;
using nlohmann::json;

TEST_CASE("timing table has every column, one row per variant x L x m, skips recorded", "[timing]") {
    const json j = json::parse(R"({
        "name": "t", "experiment": "timing", "seed": 1, "dtype": "float32",
        "inputs": {"source": "random", "L": [64, 32, 128], "d": 8},
        "variants": [{"features": "exact"}, {"features": "positive", "projection": "orthogonal"},
                     {"features": "trig", "projection": "iid"}],
        "m": [4, 16], "repeats": 3, "warmup": 1})");
    RunOptions opt;
    opt.threads = 2;
    const RunResult r = run_experiment(parse_config(j, "t.json"), opt);
    REQUIRE(r.timing.columns == timing_columns());
    for (const char* c : {"variant", "L", "d", "m", "dtype", "threads", "repeats", "median_s", "min_s",
                          "max_s", "gflops", "gemm_ratio", "speedup_vs_exact", "peak_bytes", "status"})
        REQUIRE(r.timing.has_column(c));
    REQUIRE(r.timing.rows.size() == (1 + 2 * 2) * 3);
    const std::size_t L = r.timing.column("L"), med = r.timing.column("median_s"),
                      mn = r.timing.column("min_s"), mx = r.timing.column("max_s"),
                      sp = r.timing.column("speedup_vs_exact"), st = r.timing.column("status"),
                      var = r.timing.column("variant"), m = r.timing.column("m");
    std::vector<std::string> Ls;
    for (std::size_t i = 0; i < 3; ++i) Ls.push_back(r.timing.rows[i][L]);
    REQUIRE(Ls == std::vector<std::string>{"32", "64", "128"});   // ascending L
    for (const auto& row : r.timing.rows) {
        CAPTURE(row[var], row[L], row[m]);
        REQUIRE(row[st] == "ok");
        REQUIRE(std::stod(row[mn]) <= std::stod(row[med]));
        REQUIRE(std::stod(row[med]) <= std::stod(row[mx]));
        REQUIRE(std::stod(row[sp]) > 0);
        REQUIRE(row[r.timing.column("threads")] == "2");
        REQUIRE(row[m].empty() == (row[var] == "exact"));
        REQUIRE(row[r.timing.column("features_s")].empty() == (row[var] == "exact"));
        // gemm_ratio = median_s / (flops at the gemm rate of this run) = rate / gflops.
        const double rate = r.info["timing"]["gemm_gflops"].get<double>();
        REQUIRE(rate > 0);
        REQUIRE(std::stod(row[r.timing.column("gemm_ratio")]) * std::stod(row[r.timing.column("gflops")]) ==
                Approx(rate).epsilon(1e-5));   // both columns printed to 6 significant digits
    }
    REQUIRE(r.notes_md.find("positive-orthogonal") != std::string::npos);
}

TEST_CASE("a cell over the time budget is a row with a status and no numbers", "[timing]") {
    const json j = json::parse(R"({
        "name": "t", "experiment": "timing", "dtype": "float64",
        "inputs": {"source": "random", "L": [16, 1024, 2048], "d": 4},
        "variants": [{"features": "exact"}], "repeats": 1, "warmup": 0, "time_budget_s": 1e-9})");
    const RunResult r = run_experiment(parse_config(j, "t.json"), {});
    REQUIRE(r.timing.rows.size() == 3);
    REQUIRE(r.timing.rows[0][r.timing.column("status")] == "ok");
    for (std::size_t i = 1; i < 3; ++i) {
        REQUIRE(r.timing.rows[i][r.timing.column("status")].rfind("skipped: over time budget", 0) == 0);
        REQUIRE(r.timing.rows[i][r.timing.column("median_s")].empty());
        REQUIRE(r.timing.rows[i][r.timing.column("peak_bytes")].empty());
    }
}

TEST_CASE("min_time_s: more timed runs until they add up to it, counted in repeats, and checked", "[timing]") {
    json j = json::parse(R"({
        "name": "t", "experiment": "timing", "dtype": "float32",
        "inputs": {"source": "random", "L": [16, 32], "d": 4},
        "variants": [{"features": "exact"}, {"features": "positive"}], "m": 4, "repeats": 2, "warmup": 0,
        "min_time_s": 0.002})");
    const Config cfg = parse_config(j, "t.json");
    const RunResult r = run_experiment(cfg, {});
    const std::size_t reps = r.timing.column("repeats"), med = r.timing.column("median_s");
    for (const auto& row : r.timing.rows) {
        // At least `repeats` runs, at most kMaxTimedRuns; the runs stop once they add up to 2 ms,
        // so n x the largest time reaches it (unless the cap stopped them), and a run past the
        // repeats was taken only while the earlier ones fell short: (n - 1) x the smallest < 2 ms.
        // (How many runs a load-free machine needs is not asserted: it depends on the load.)
        const double n = std::stod(row[reps]);
        const double lo = std::stod(row[r.timing.column("min_s")]), hi = std::stod(row[r.timing.column("max_s")]);
        REQUIRE(n >= 2);
        REQUIRE(n <= double(kMaxTimedRuns));
        if (n < double(kMaxTimedRuns)) REQUIRE(n * hi >= 0.002);
        if (n > 2) REQUIRE((n - 1) * lo < 0.002);
        REQUIRE(std::stod(row[med]) > 0);
    }
    REQUIRE(r.notes_md.find("add up to 0.002 s") != std::string::npos);
    REQUIRE(cfg.resolved()["min_time_s"] == 0.002);
    // The predicted cell time (time budget, validate): warm-ups, then the longer of repeats and min_time_s.
    REQUIRE(cfg.timing.cell_seconds(1e-5, 0) == Approx(0.002));
    REQUIRE(cfg.timing.cell_seconds(0.01, 0.5) == Approx(2 * 0.01 + 2 * 0.5));
    for (const double bad : {0.0, -1.0, 1e5}) {
        j["min_time_s"] = bad;
        REQUIRE_THROWS_WITH(parse_config(j, "t.json"), Catch::Contains("t.json: min_time_s: must be > 0 and at most 3600"));
    }
}

TEST_CASE("flop counts", "[timing]") {
    // exact: 2 L Lk (d + dv); causal counts the visible pairs L(L+1)/2.
    REQUIRE(exact_attention_flops(100, 100, 8, 4, false) == 2.0 * 100 * 100 * 12);
    REQUIRE(exact_attention_flops(100, 100, 8, 4, true) == 2.0 * (100 * 101 / 2) * 12);
    REQUIRE(exact_attention_flops(3, 2, 1, 1, true) == 2.0 * (1 + 2 + 2) * 2);
    // FAVOR: 2 (L + Lk) m d + 2 (L + Lk) F (dv + 1), F = m or 2m.
    const FeatureMapPtr pos = favor_test::map_named("positive"), trig = favor_test::map_named("trig");
    REQUIRE(favor_attention_flops(*pos, 16384, 16384, 64, 64, 256) ==
            2.0 * 32768 * 256 * 64 + 2.0 * 32768 * 256 * 65);
    REQUIRE(favor_attention_flops(*trig, 10, 20, 4, 3, 5) == 2.0 * 30 * 5 * 4 + 2.0 * 30 * 10 * 4);
}

TEST_CASE("crossover: the L from which the fast curve stays below", "[timing]") {
    using O = std::optional<double>;
    const std::vector<std::size_t> Ls = {1, 2, 4, 8};
    REQUIRE(crossover_L(Ls, {O(2), O(1), O(1), O(1)}, {O(1), O(2), O(4), O(8)}) == std::size_t(2));
    REQUIRE(crossover_L(Ls, {O(0.5), O(3), O(1), O(1)}, {O(1), O(2), O(4), O(8)}) == std::size_t(4));
    REQUIRE(!crossover_L(Ls, {O(2), O(3), O(5), O(9)}, {O(1), O(2), O(4), O(8)}));
    // Skipped (missing) slow values do not break the run.
    REQUIRE(crossover_L(Ls, {O(2), O(1), O(1), O(1)}, {O(1), O(2), O(), O()}) == std::size_t(2));
}

TEST_CASE("peak RSS is measured and sees a 64 MB allocation", "[timing]") {
    const bool reset = reset_peak_rss();
    const std::size_t before = peak_rss_bytes();
    REQUIRE(before > 0);
    const std::size_t bytes = std::size_t(64) << 20;
    {
        // Volatile stores: the compiler may neither drop them nor elide the allocation
        // (clang removes an unused new/delete pair otherwise).
        std::vector<char> big(bytes);
        volatile char* p = big.data();
        for (std::size_t i = 0; i < bytes; i += 4096) p[i] = char(i);
    }
    // Resident pages of the touched buffer raise the peak (VmHWM) by about its size.
    if (reset) REQUIRE(peak_rss_bytes() >= before + bytes * 9 / 10);
    else REQUIRE(peak_rss_bytes() >= bytes * 9 / 10);
}

TEMPLATE_TEST_CASE("vexp at the edges: overflow, underflow, subnormals, NaN", "[vmath]", float, double) {
    using T = TestType;
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> x = {T(0), T(-1), T(1), T(10), inf, -inf, nan, T(1e6), T(-1e6)};
    const T big = std::is_same<T, float>::value ? T(88.5) : T(709.5);     // largest finite results
    const T sub = std::is_same<T, float>::value ? T(-95) : T(-720);       // subnormal results
    x.push_back(big);
    x.push_back(sub);
    x.push_back(big + T(1));   // overflows
    std::vector<T> y = x;
    // Pad to full SIMD batches so every value goes through the vector path.
    while (y.size() % 64) y.push_back(T(0));
    exp_shifted(y.data(), y.size(), T(0));
    for (std::size_t i = 0; i < x.size(); ++i) {
        CAPTURE(x[i], y[i]);
        if (std::isnan(x[i])) {
            REQUIRE(std::isnan(y[i]));
            continue;
        }
        const long double ref = std::exp(static_cast<long double>(x[i]));
        if (ref > static_cast<long double>(std::numeric_limits<T>::max())) {
            REQUIRE(y[i] == inf);
        } else if (ref < static_cast<long double>(std::numeric_limits<T>::min())) {
            // subnormal / underflow range: within one subnormal step (denorm_min)... of the true value
            REQUIRE(std::fabs(static_cast<long double>(y[i]) - ref) <=
                    4 * static_cast<long double>(std::numeric_limits<T>::denorm_min()) + 1e-6L * ref);
        } else {
            REQUIRE(std::fabs((static_cast<long double>(y[i]) - ref) / ref) <
                    3 * static_cast<long double>(std::numeric_limits<T>::epsilon()));
        }
    }
}

TEMPLATE_TEST_CASE("vectorised reductions and sincos match scalar references", "[vmath]", float, double) {
    using T = TestType;
    const std::size_t n = GENERATE(1, 7, 16, 33, 100, 1000);
    CAPTURE(n);
    std::vector<T> p(n), s(n), c(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = T(std::sin(0.37 * double(i)) * 20.0 - 5.0);
    T mx = p[0];
    double sq = 0;
    for (std::size_t i = 0; i < n; ++i) {
        mx = std::max(mx, p[i]);
        sq += double(p[i]) * double(p[i]);
    }
    REQUIRE(max_of(p.data(), n) == mx);
    REQUIRE(sum_squares(p.data(), n) == Approx(sq).epsilon(1e-12));
    std::vector<T> e = p;
    const double sum = exp_shifted_sum(e.data(), n, mx);
    double ref = 0;
    for (std::size_t i = 0; i < n; ++i) ref += std::exp(double(p[i]) - double(mx));
    REQUIRE(sum == Approx(ref).epsilon(std::is_same<T, float>::value ? 1e-5 : 1e-13));
    sincos_scale(p.data(), s.data(), c.data(), n, T(0.5), T(2));
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(s[i] == Approx((std::sin(double(p[i])) + 0.5) * 2).margin(std::is_same<T, float>::value ? 1e-5 : 1e-13));
        REQUIRE(c[i] == Approx((std::cos(double(p[i])) + 0.5) * 2).margin(std::is_same<T, float>::value ? 1e-5 : 1e-13));
    }
}
