// favor compare: the permutation tests against brute-force references written here, the
// bootstrap interval, Holm, and compare_results on small hand-made result directories.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "favor/compare.hpp"
#include "favor/error.hpp"
#include "favor/report.hpp"

namespace {

namespace fs = std::filesystem;

// Reference studentized statistic, by hand from the raw sums: mean / sqrt(s^2 / n) with
// s^2 = (sum x^2 - n mean^2) / (n - 1).
double ref_t(double sum, double sumsq, double n) {
    const double mean = sum / n;
    const double s2 = (sumsq - n * mean * mean) / (n - 1);
    if (mean == 0) return 0;
    return s2 <= 0 ? (mean > 0 ? INFINITY : -INFINITY) : mean / std::sqrt(s2 / n);
}

bool ref_extreme(double t, double t_obs) { return std::fabs(t) >= std::fabs(t_obs) * (1 - 1e-9); }

// Sign-flip p by recursion over the 2^n sign choices, carrying the running sums.
double ref_signflip_p(const std::vector<double>& d) {
    double s = 0, q = 0;
    for (double x : d) s += x, q += x * x;
    const double n = double(d.size()), t_obs = ref_t(s, q, n);
    double count = 0, total = 0;
    std::function<void(std::size_t, double)> rec = [&](std::size_t j, double sum) {
        if (j == d.size()) {
            total += 1;
            count += ref_extreme(ref_t(sum, q, n), t_obs);
            return;
        }
        rec(j + 1, sum + d[j]);
        rec(j + 1, sum - d[j]);
    };
    rec(0, 0.0);
    return count / total;
}

// Welch t by hand: plain mean difference over sqrt(s_a^2 / n_a + s_b^2 / n_b).
double ref_welch(double sa, double qa, double na, double sb, double qb, double nb) {
    const double ma = sa / na, mb = sb / nb;
    const double va = (qa - na * ma * ma) / (na - 1), vb = (qb - nb * mb * mb) / (nb - 1);
    return (ma - mb) / std::sqrt(va / na + vb / nb);
}

// Permutation p by recursion over every subset of the pooled values of size n_a.
double ref_welch_p(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> pooled = a;
    pooled.insert(pooled.end(), b.begin(), b.end());
    double S = 0, Q = 0;
    for (double x : pooled) S += x, Q += x * x;
    const double na = double(a.size()), nb = double(b.size());
    double sa = 0, qa = 0;
    for (double x : a) sa += x, qa += x * x;
    const double t_obs = ref_welch(sa, qa, na, S - sa, Q - qa, nb);
    double count = 0, total = 0;
    std::function<void(std::size_t, std::size_t, double, double)> rec = [&](std::size_t j, std::size_t k, double s,
                                                                             double q) {
        if (k == a.size()) {
            total += 1;
            count += ref_extreme(ref_welch(s, q, na, S - s, Q - q, nb), t_obs);
            return;
        }
        if (j == pooled.size()) return;
        rec(j + 1, k + 1, s + pooled[j], q + pooled[j] * pooled[j]);
        rec(j + 1, k, s, q);
    };
    rec(0, 0, 0.0, 0.0);
    return count / total;
}

// A fresh directory under the system temp dir, removed at the end of the scope.
struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name) {
        path = fs::temp_directory_path() / ("favor_compare_" + name + "_" + std::to_string(getpid()));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    void write(const std::string& file, const std::string& text) const { std::ofstream(path / file) << text; }
};

std::string cell(const favor::Table& t, std::size_t row, const std::string& col) { return t.rows[row][t.column(col)]; }
double num(const favor::Table& t, std::size_t row, const std::string& col) { return std::stod(cell(t, row, col)); }

const std::vector<double> kPaired = {0.31, -0.12, 1.7, 0.43, -0.25, 0.9};
// Heavy-tailed: one error 1000x the others (as the positive estimator's chi-norm tail gives).
const std::vector<double> kPairedHeavy = {0.011, -0.023, 0.052, 12.0, 0.034, -0.017};
const std::vector<double> kA = {1.2, 0.8, 1.9, 1.4, 1.1}, kB = {0.5, 0.9, 0.3, 0.7};
const std::vector<double> kAHeavy = {0.1, 0.2, 0.15, 30.0, 0.12}, kBHeavy = {0.3, 0.25, 0.28, 0.31};

}  // namespace

TEST_CASE("compare: sign-flip test: exact enumeration matches a brute-force reference", "[compare]") {
    for (const auto& d : {kPaired, kPairedHeavy, std::vector<double>{1, 1, 1, 1, 1, -1}}) {
        const double p = favor::paired_signflip_p(d);
        CHECK(p == Approx(ref_signflip_p(d)).epsilon(1e-12));
        CHECK(std::fmod(p * 64, 1.0) == 0.0);   // a multiple of 1/2^6
    }
    // Hand values: all differences of one sign and distinct sizes: only the observed pattern
    // and its mirror are as extreme, p = 2/64.
    CHECK(favor::paired_signflip_p({0.5, 0.1, 2.0, 0.3, 0.9, 1.1}) == 2.0 / 64);
    // The heavy-tailed sample: the outlier's sign dominates, so the test is not fooled into
    // significance.
    CHECK(favor::paired_signflip_p(kPairedHeavy) > 0.2);
}

TEST_CASE("compare: Welch permutation test: exact enumeration matches a brute-force reference", "[compare]") {
    CHECK(favor::welch_permutation_p(kA, kB) == Approx(ref_welch_p(kA, kB)).epsilon(1e-12));
    CHECK(favor::welch_permutation_p(kAHeavy, kBHeavy) == Approx(ref_welch_p(kAHeavy, kBHeavy)).epsilon(1e-12));
    CHECK(favor::welch_permutation_p(kB, kA) == Approx(ref_welch_p(kB, kA)).epsilon(1e-12));
    const double p = favor::welch_permutation_p(kA, kB);
    CHECK(std::fabs(p * 126 - std::round(p * 126)) < 1e-9);   // a multiple of 1 / C(9, 4)
    CHECK(p < 0.05);
    // The statistic itself against the hand formula.
    double sa = 0, qa = 0, sb = 0, qb = 0;
    for (double x : kA) sa += x, qa += x * x;
    for (double x : kB) sb += x, qb += x * x;
    CHECK(favor::welch_t(kA, kB) == Approx(ref_welch(sa, qa, 5, sb, qb, 4)).epsilon(1e-12));
}

TEST_CASE("compare: identical samples: p = 1, ratio 1, CI [1, 1]", "[compare]") {
    CHECK(favor::paired_signflip_p(std::vector<double>(7, 0.0)) == 1.0);
    CHECK(favor::welch_permutation_p(kA, kA) == 1.0);
    CHECK(favor::welch_permutation_p({2, 2, 2}, {2, 2}) == 1.0);
    CHECK(favor::welch_t(kA, kA) == 0.0);
    const auto ci = favor::ratio_ci(kAHeavy, kAHeavy, true, 42);
    CHECK(ci.first == 1.0);
    CHECK(ci.second == 1.0);
    // Too few values to studentize: no p.
    CHECK(std::isnan(favor::paired_signflip_p({1.0})));
    CHECK(std::isnan(favor::welch_permutation_p({1.0}, {2.0, 3.0})));
}

TEST_CASE("compare: Holm adjustment against a hand-computed example", "[compare]") {
    // Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> max(0.06, 0.04).
    const auto adj = favor::holm({0.01, 0.04, 0.03, 0.005});
    REQUIRE(adj.size() == 4);
    CHECK(adj[0] == Approx(0.03));
    CHECK(adj[1] == Approx(0.06));
    CHECK(adj[2] == Approx(0.06));
    CHECK(adj[3] == Approx(0.02));
    CHECK(favor::holm({0.5, 0.6}) == std::vector<double>{1.0, 1.0});
    CHECK(favor::holm({}).empty());
}

TEST_CASE("compare: clearly separated samples give the smallest possible p", "[compare]") {
    // Exact: unpaired 5 vs 4, every a above every b: only the observed split is as extreme.
    CHECK(favor::welch_permutation_p({10, 11, 12, 13, 14}, {0, 1, 2, 3}) == Approx(1.0 / 126));
    // Monte Carlo: 40 paired differences all positive, and 30 vs 30 separated samples.
    std::vector<double> d, a, b;
    for (int i = 0; i < 40; ++i) d.push_back(1.0 + 0.01 * i);
    for (int i = 0; i < 30; ++i) a.push_back(100.0 + i), b.push_back(0.5 * i);
    CHECK(favor::paired_signflip_p(d, 7) == 1.0 / 65537);
    CHECK(favor::welch_permutation_p(a, b, 7) == 1.0 / 65537);
}

TEST_CASE("compare: Monte Carlo p agrees with exact enumeration within its binomial error", "[compare]") {
    favor::PermutationOptions mc;
    mc.exact_limit = 0;   // force the random branch (65536 draws)
    auto within = [](double p_mc, double p_exact) {
        const double se = std::sqrt(p_exact * (1 - p_exact) / 65536.0);
        return std::fabs(p_mc - p_exact) <= 4 * se + 1.0 / 65537;
    };
    const std::vector<double> d = {0.4, -0.3, 0.8, 0.1, -0.2, 0.6, 0.35, -0.5, 0.9, 0.05, -0.15, 0.25};
    const double exact_d = favor::paired_signflip_p(d);
    CHECK(exact_d > 0.05);
    CHECK(exact_d < 0.5);
    CHECK(within(favor::paired_signflip_p(d, 11, mc), exact_d));
    const std::vector<double> a = {1.1, 0.7, 2.4, 1.3, 0.9, 1.6}, b = {0.8, 1.0, 0.6, 1.2, 0.5, 0.95};
    const double exact_w = favor::welch_permutation_p(a, b);
    CHECK(exact_w > 0.02);
    CHECK(within(favor::welch_permutation_p(a, b, 11, mc), exact_w));
}

TEST_CASE("compare: bootstrap ratio interval: deterministic, covers the ratio", "[compare]") {
    const auto c1 = favor::ratio_ci(kA, kB, false, 5), c2 = favor::ratio_ci(kA, kB, false, 5);
    CHECK(c1 == c2);
    const double ratio = (6.4 / 5) / (2.4 / 4);
    CHECK(c1.first < ratio);
    CHECK(c1.second > ratio);
    const auto cb = favor::baseline_ratio_ci({2, 2, 2}, 4, 5);
    CHECK(cb.first == 0.5);
    CHECK(cb.second == 0.5);
}

TEST_CASE("compare: compare_results on a hand-made result directory", "[compare]") {
    TempDir dir("results");
    // x and x-copy identical (same projection: paired); y clearly above; z another projection.
    std::string csv = "variant,features,projection,L,d,m,num_features,scale,trial,seed,output_mse,attention_mse,nonfinite\n";
    const double x[] = {0.11, 0.52, 0.23, 0.74, 0.35, 0.16};
    for (const char* v : {"x", "x-copy", "y", "z"})
        for (int t = 0; t < 6; ++t) {
            const double val = v[0] == 'y' ? 10 + x[t] : v[0] == 'z' ? 0.4 + 0.01 * t : x[t];
            const std::string att = (v[0] == 'z' && t == 2) ? "" : favor::format_number(val / 10);
            csv += std::string(v) + ",positive," + (v[0] == 'z' ? "orthogonal" : "iid") + ",64,8,16,16,1," +
                   std::to_string(t) + ",0," + favor::format_number(val) + "," + att + ",0\n";
        }
    dir.write("errors.csv", csv);
    favor::CompareOptions opt;
    const favor::Table t = favor::compare_results(dir.path.string(), opt);
    REQUIRE(t.rows.size() == 6);   // 4 variants: 6 pairs, output_mse only
    CHECK(t.columns.front() == "a");
    CHECK(t.columns.back() == "verdict");
    CHECK(!t.has_column("num_features"));
    CHECK(cell(t, 0, "a") == "x");
    CHECK(cell(t, 0, "b") == "x-copy");
    CHECK(cell(t, 0, "paired") == "yes");
    CHECK(cell(t, 0, "ratio") == "1");
    CHECK(cell(t, 0, "ci_low") == "1");
    CHECK(cell(t, 0, "ci_high") == "1");
    CHECK(cell(t, 0, "p_value") == "1");
    CHECK(cell(t, 0, "verdict") == "n.s.");
    CHECK(cell(t, 1, "b") == "y");
    CHECK(num(t, 1, "p_value") == 2.0 / 64);
    CHECK(cell(t, 1, "verdict") == "n.s.");   // Holm: 6 x 2/64 > 0.05
    CHECK(cell(t, 2, "b") == "z");
    CHECK(cell(t, 2, "paired") == "no");
    CHECK(cell(t, 2, "m") == "16");
    CHECK(cell(t, 2, "scale") == "1");
    // Determinism: the same table on a second call.
    CHECK(favor::compare_results(dir.path.string(), opt).rows == t.rows);

    SECTION("blank values are skipped; a looser alpha gives verdicts") {
        opt.metrics = {"attention_mse"};
        opt.alpha = 0.2;
        const favor::Table u = favor::compare_results(dir.path.string(), opt);
        REQUIRE(u.rows.size() == 6);
        CHECK(cell(u, 2, "n_b") == "5");
        CHECK(cell(u, 2, "metric") == "attention_mse");
        CHECK(cell(u, 1, "verdict") == "a<b");
        CHECK(cell(u, 3, "verdict") == "a<b");   // x-copy vs y: Holm factor 4 after y vs z
        CHECK(cell(u, 0, "verdict") == "n.s.");
    }
    SECTION("--metric all skips nonfinite") {
        opt.metrics = {"all"};
        const favor::Table u = favor::compare_results(dir.path.string(), opt);
        CHECK(u.rows.size() == 12);
        CHECK(cell(u, 11, "metric") == "attention_mse");
    }
    SECTION("baseline rows from summary.csv") {
        dir.write("summary.csv", "variant,features,projection,L,d,m,scale,trials,baseline_output_mse\n"
                                 "x,positive,iid,64,8,16,1,6,0.5\nx-copy,positive,iid,64,8,16,1,6,0.5\n"
                                 "y,positive,iid,64,8,16,1,6,0.5\nz,positive,orthogonal,64,8,16,1,6,0.5\n");
        const favor::Table u = favor::compare_results(dir.path.string(), opt);
        REQUIRE(u.rows.size() == 10);
        CHECK(cell(u, 6, "a") == "x");
        CHECK(cell(u, 6, "b") == "uniform");
        CHECK(cell(u, 6, "paired") == "one-sample");
        CHECK(cell(u, 6, "n_b") == "");
        CHECK(num(u, 6, "ratio") == Approx((2.11 / 6) / 0.5));
        CHECK(num(u, 8, "p_value") == 2.0 / 64);   // y: every trial above 0.5
    }
    SECTION("bad input") {
        auto message = [&](const std::string& d, const favor::CompareOptions& o) {
            try {
                favor::compare_results(d, o);
            } catch (const favor::Error& e) {
                return std::string(e.what());
            }
            return std::string("no error");
        };
        opt.metrics = {"output_mes"};
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("did you mean 'output_mse'"));
        opt.metrics = {"kernel_mse"};
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("no column 'kernel_mse'"));
        opt.metrics = {};
        opt.alpha = 1;
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("--alpha: must be in (0, 1)"));
        opt.alpha = 0.05;
        fs::create_directories(dir.path / "kernel");
        CHECK_THAT(message((dir.path / "kernel").string(), opt), Catch::Contains("approximation result's errors.csv"));
        std::string broken = csv;
        broken.replace(broken.find(",0.52,"), 6, ",0.5x,");
        dir.write("errors.csv", broken);
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("errors.csv: line 3, column output_mse: '0.5x' is not a number"));
        broken.replace(broken.find(",0.5x,"), 6, ",inf,");
        dir.write("errors.csv", broken);
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("line 3, column output_mse: 'inf' is not finite"));
    }
}
