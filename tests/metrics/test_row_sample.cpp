// Row-sampled metrics (docs/design.md 3.1): the row draw, the sampled computations against
// the full ones, the coverage of the stated interval, and N = L giving today's tables.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <set>

#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/pairwise_pass.hpp"
#include "favor/core/rng.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/io/report.hpp"
#include "favor/metrics/output_metrics.hpp"
#include "favor/metrics/row_sample.hpp"
#include "favor/metrics/row_sampled_metrics.hpp"
#include "helpers.hpp"

using namespace favor;
using nlohmann::json;

TEST_CASE("query rows: uniform without replacement, or one per stratum (causal)", "[row_sample]") {
    const RowSample u = draw_query_rows(7, 0, 1000, 100, false), c = draw_query_rows(7, 0, 1000, 100, true);
    REQUIRE(u.rows.size() == 100);
    REQUIRE(std::set<std::size_t>(u.rows.begin(), u.rows.end()).size() == 100);   // no repeats
    REQUIRE(std::is_sorted(u.rows.begin(), u.rows.end()));
    REQUIRE(u.rows.back() < 1000);
    REQUIRE(!u.stratified);
    REQUIRE(c.stratified);
    for (std::size_t s = 0; s < 100; ++s) REQUIRE((c.rows[s] >= s * 10 && c.rows[s] < s * 10 + 10));
    REQUIRE(draw_query_rows(7, 1, 1000, 100, false).rows != u.rows);   // the input seed's own stream
    REQUIRE(draw_query_rows(7, 0, 1000, 100, false).rows == u.rows);   // a pure function
    REQUIRE(draw_query_rows(7, 0, 50, 100, true).all());
    REQUIRE(row_sem(1.0, {1.0, 2.0}, draw_query_rows(7, 0, 50, 50, false)) == 0.0);
}

namespace {
// The coverage case's size: L = 16384, N = 1024 (the issue's), d = 8, m = 32. Under the
// sanitizers (CI's ASan + UBSan pass, about 40x slower on these loops) the same paths run at
// L = 2048, N = 256 for their memory checks, without the coverage counts: that statistical
// property is checked by the Release passes (gcc, clang, BLIS).
#ifdef FAVOR_TEST_SANITIZED
constexpr std::size_t kProblemL = 2048, kProblemN = 256;
constexpr bool kCountCoverage = false;
#else
constexpr std::size_t kProblemL = 16384, kProblemN = 1024;
constexpr bool kCountCoverage = true;
#endif

// One attention problem at L = kProblemL (d = 8, m = 32: the test stays fast), its full
// metrics and each query row's pairwise sums, computed once.
struct Problem {
    QKV in;
    Estimator<double> est;
    Mat<double> exact, out;
    PairwiseRequest req;
    std::vector<PairwiseSums> rows;
    double mse, tv;
};

Problem problem(bool causal) {
    const std::size_t L = kProblemL, d = 8, m = 32;
    Problem p{random_inputs(11, L, d, d, 1.0), {}, {}, {}, {}, {}, 0, 0};
    Mat<double> W = Mat<double>::from_shape({m, d});
    fill_normal(stream_key({11, tag("test-W")}), W.data(), W.size());
    p.est = favor_test::fitted(favor_test::map_named("positive"), W, p.in.q, p.in.k);
    p.exact = exact_attention(p.in.q, p.in.k, p.in.v, causal);
    p.out = favor_forward(p.est, p.in.q, p.in.k, p.in.v, causal);
    p.mse = output_mse(p.exact, p.out);
    p.req.attention_tv = true;
    p.req.causal = causal;
    const Mat<double> X = scale_rows(p.in.q), Y = scale_rows(p.in.k);
    p.tv = pairwise_metrics(X, Y, softmax_rows(X, Y, causal), EstimatorRows<double>(p.est, p.in.q, Side::query),
                            EstimatorRows<double>(p.est, p.in.k, Side::key), p.req, 1, &p.rows)
               .attention_tv;
    return p;
}

std::vector<PairwiseSums> sums_at(const std::vector<PairwiseSums>& all, const std::vector<std::size_t>& rows) {
    std::vector<PairwiseSums> out;
    for (std::size_t r : rows) out.push_back(all[r]);
    return out;
}
}  // namespace

TEST_CASE("row-sampled output MSE and TV: the stated interval covers the full value", "[row_sample]") {
    for (const bool causal : {false, true}) {
        CAPTURE(causal);
        const Problem p = problem(causal);
        const std::size_t L = p.exact.shape(0), N = kProblemN;
        REQUIRE(std::fabs(pairwise_result([&] {
                              PairwiseSums t;
                              for (const auto& r : p.rows) t.add(r);
                              return t;
                          }(), p.req).attention_tv - p.tv) <= 1e-12 * p.tv);   // per-row sums add up to the pass's

        // The library's sampled path (exact rows, the sampled queries' features against all
        // keys at their positions) is the full computation's rows, up to rounding.
        const RowSample s0 = draw_query_rows(100, 0, L, N, causal);
        const Mat<double> ex = exact_attention_rows(p.in.q, s0.rows, p.in.k, p.in.v, causal);
        const Mat<double> ex_full = take_rows(p.exact, s0.rows);
        for (std::size_t k = 0; k < ex.size(); ++k) REQUIRE(std::fabs(ex.data()[k] - ex_full.data()[k]) <= 1e-12);
        PairwiseRequest rq = p.req;
        rq.positions = s0.rows.data();
        const Mat<double> Xs = scale_rows(take_rows(p.in.q, s0.rows)), Y = scale_rows(p.in.k);
        const Mat<double> qs = take_rows(p.in.q, s0.rows);
        std::vector<PairwiseSums> own;
        pairwise_metrics(Xs, Y, softmax_rows(Xs, Y, causal, 1, s0.rows.data()), EstimatorRows<double>(p.est, qs, Side::query),
                         EstimatorRows<double>(p.est, p.in.k, Side::key), rq, 2, &own);
        for (std::size_t r = 0; r < N; ++r) {
            REQUIRE(own[r].pairs == p.rows[s0.rows[r]].pairs);
            REQUIRE(std::fabs(own[r].tv - p.rows[s0.rows[r]].tv) <= 1e-12);
        }

        // Coverage: 40 row draws of the same problem; the estimate lies within the stated
        // interval, kRowInterval = 2.576 row SEMs (docs/design.md 3.1), of the full value in at
        // least 36 (90%). Per-row errors are heavy-tailed (early causal rows, rare large
        // rows), so the normal 1.96 interval covers only about 91% here (400 draws); the
        // stated one about 97% (docs/design.md 3.1), so 36 or more of 40 fails with
        // probability about 0.02 at a random seed; the seeds are fixed.
        int mse_in = 0, tv_in = 0;
        for (std::uint64_t rep = 0; rep < 40; ++rep) {
            const RowSample s = draw_query_rows(1000 + rep, 0, L, N, causal);
            MetricValues v;
            sampled_values({"output_mse", "attention_tv"}, take_rows(p.exact, s.rows), take_rows(p.out, s.rows), p.req,
                           sums_at(p.rows, s.rows), s, v);
            const double mse_sem = *v["output_mse_row_sem"], tv_sem = *v["attention_tv_row_sem"];
            REQUIRE(mse_sem > 0);
            REQUIRE(tv_sem > 0);
            mse_in += std::fabs(*v["output_mse"] - p.mse) <= kRowInterval * mse_sem;
            tv_in += std::fabs(*v["attention_tv"] - p.tv) <= kRowInterval * tv_sem;
        }
        if (kCountCoverage) {
            CHECK(mse_in >= 36);
            CHECK(tv_in >= 36);
        }
    }
}

TEST_CASE("query_rows: N >= L gives today's tables bitwise, N < L adds the _row_sem columns", "[row_sample]") {
    for (const bool causal : {false, true}) {
        json j = json::parse(R"({"name": "t", "seed": 5,
            "inputs": {"source": "random", "L": [300, 700], "d": 8},
            "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "oprf"}],
            "m": 16, "trials": 2,
            "metrics": ["output_mse", "output_rel_error", "attention_mse", "attention_tv", "attention_kl",
                        "kernel_mse", "negative_fraction"]})");
        j["causal"] = causal;
        const RunResult today = run_experiment(parse_config(j, "t.json"));
        j["query_rows"] = 700;
        const RunResult all = run_experiment(parse_config(j, "t.json"));
        REQUIRE(to_csv(all.errors) == to_csv(today.errors));
        REQUIRE(to_csv(all.summary) == to_csv(today.summary));
        j["query_rows"] = 500;   // L = 300: all rows (row SEM 0); L = 700: 500 sampled rows
        const RunResult some = run_experiment(parse_config(j, "t.json"));
        const Table& e = some.errors;
        REQUIRE(e.has_column("attention_tv_row_sem"));
        REQUIRE(some.summary.has_column("baseline_output_mse_row_sem"));
        for (std::size_t r = 0; r < e.rows.size(); ++r) {
            const double sem = std::stod(e.rows[r][e.column("output_mse_row_sem")]);
            if (e.rows[r][e.column("L")] == "300") {
                REQUIRE(sem == 0.0);
                REQUIRE(e.rows[r][e.column("output_mse")] == today.errors.rows[r][today.errors.column("output_mse")]);
            } else {
                REQUIRE(sem > 0.0);
            }
        }
    }
}

TEST_CASE("row-sampled runs of output metrics only: the uniform baseline over every key", "[row_sample]") {
    // Without a pairwise metric the sampled heads hold no scaled keys (3.1); the baseline read
    // its key count from them, so it averaged no keys: NaN non-causal, SIGSEGV causal (issue
    // 36). Its numbers must be those of the run that also lists a pairwise metric.
    for (const bool causal : {false, true}) {
        json j = json::parse(R"({"name": "t", "seed": 5, "query_rows": 100,
            "inputs": {"source": "random", "L": [300], "d": 8},
            "variants": [{"features": "positive", "projection": "orthogonal"}], "m": 16, "trials": 2,
            "metrics": ["output_mse", "output_rel_error"]})");
        j["causal"] = causal;
        const Table out = run_experiment(parse_config(j, "t.json")).summary;
        j["metrics"].push_back("attention_tv");
        const Table with_pairs = run_experiment(parse_config(j, "t.json")).summary;
        REQUIRE(out.rows.size() == 1);
        for (const char* c : {"baseline_output_mse", "baseline_output_rel_error", "baseline_output_mse_row_sem",
                              "baseline_output_rel_error_row_sem", "output_mse_mean"}) {
            CAPTURE(causal, c);
            const std::string cell = out.rows[0][out.column(c)];
            REQUIRE(std::isfinite(std::stod(cell)));
            REQUIRE(std::stod(cell) > 0.0);
            REQUIRE(cell == with_pairs.rows[0][with_pairs.column(c)]);
        }
    }
}
