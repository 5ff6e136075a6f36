// favor compare: the permutation tests against brute-force references written here, the
// bootstrap interval, Holm, and compare_results on small hand-made result directories.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/io/report.hpp"
#include "favor/results/compare.hpp"
#include "favor/results/ranking.hpp"

#include "temp_dir.hpp"

namespace {

using favor_test::TempDir;

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
    const favor::Table t = favor::compare_results(dir.path.string(), opt).comparisons;
    REQUIRE(t.rows.size() == 6);   // 4 variants: 6 pairs, output_mse only
    CHECK(t.columns.front() == "a");
    CHECK(t.columns.back() == "verdict");
    CHECK(cell(t, 0, "num_features_a") == "16");
    CHECK(cell(t, 0, "a") == "x");
    CHECK(cell(t, 0, "b") == "x-copy");
    CHECK(cell(t, 0, "paired") == "yes");
    CHECK(cell(t, 0, "ratio") == "1");
    CHECK(cell(t, 0, "ci95_low") == "1");
    CHECK(cell(t, 0, "ci95_high") == "1");
    CHECK(cell(t, 0, "ci_bonf_low") == "1");
    // The Bonferroni interval (level 1 - 0.05 / 6) holds the 95% one.
    CHECK(num(t, 2, "ci_bonf_low") <= num(t, 2, "ci95_low"));
    CHECK(num(t, 2, "ci_bonf_high") >= num(t, 2, "ci95_high"));
    CHECK(cell(t, 0, "p_value") == "1");
    CHECK(cell(t, 0, "verdict") == "n.s.");
    CHECK(cell(t, 1, "b") == "y");
    CHECK(num(t, 1, "p_value") == 2.0 / 64);
    CHECK(num(t, 1, "p_min") == 2.0 / 64);
    // Holm: 6 x 2/64 > 0.05, but the unpaired rows (6 vs 6: p_min 2/924) keep a verdict
    // reachable: 6 x 2/924 < 0.05, so n.s., not underpowered.
    CHECK(num(t, 1, "p_holm_min") == Approx(2.0 / 64));
    CHECK(cell(t, 1, "verdict") == "n.s.");
    CHECK(cell(t, 2, "b") == "z");
    CHECK(cell(t, 2, "paired") == "no");
    CHECK(cell(t, 2, "m") == "16");
    CHECK(cell(t, 2, "scale") == "1");
    // Determinism: the same table on a second call.
    CHECK(favor::compare_results(dir.path.string(), opt).comparisons.rows == t.rows);

    SECTION("progress: (0, total) before the first test, then every row up to (total, total)") {
        std::vector<std::pair<std::size_t, std::size_t>> calls;
        opt.progress = [&calls](std::size_t done, std::size_t total) { calls.emplace_back(done, total); };
        (void)favor::compare_results(dir.path.string(), opt);
        REQUIRE(calls.size() >= 2);
        CHECK(calls.front().first == 0);   // said before any test ends (the first can take long)
        CHECK(calls.front().second == calls.back().second);
        CHECK(calls.back().first == calls.back().second);
        for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first == calls[i - 1].first + 1);
    }

    SECTION("blank values are skipped; a looser alpha gives verdicts") {
        opt.metrics = {"attention_mse"};
        opt.alpha = 0.2;
        const favor::Table u = favor::compare_results(dir.path.string(), opt).comparisons;
        REQUIRE(u.rows.size() == 6);
        CHECK(cell(u, 2, "n_b") == "5");
        CHECK(cell(u, 2, "metric") == "attention_mse");
        CHECK(cell(u, 1, "verdict") == "a better");
        CHECK(cell(u, 3, "verdict") == "a better");   // x-copy vs y: Holm factor 4 after y vs z
        CHECK(cell(u, 0, "verdict") == "n.s.");
    }
    SECTION("--metric all skips nonfinite") {
        opt.metrics = {"all"};
        const favor::Table u = favor::compare_results(dir.path.string(), opt).comparisons;
        CHECK(u.rows.size() == 12);
        CHECK(cell(u, 11, "metric") == "attention_mse");
    }
    SECTION("baseline rows from summary.csv") {
        dir.write("summary.csv", "variant,features,projection,L,d,m,scale,trials,baseline_output_mse\n"
                                 "x,positive,iid,64,8,16,1,6,0.5\nx-copy,positive,iid,64,8,16,1,6,0.5\n"
                                 "y,positive,iid,64,8,16,1,6,0.5\nz,positive,orthogonal,64,8,16,1,6,0.5\n");
        const favor::Table u = favor::compare_results(dir.path.string(), opt).comparisons;
        REQUIRE(u.rows.size() == 10);
        CHECK(cell(u, 6, "a") == "x");
        CHECK(cell(u, 6, "num_features_b") == "");
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
        broken.replace(broken.find(",0.5x,"), 6, ",NaN,");   // not as favor writes it
        dir.write("errors.csv", broken);
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("line 3, column output_mse: 'NaN' is not a number"));
        opt.against = "x";
        opt.pairs = {};
        dir.write("errors.csv", csv);
        CHECK(message(dir.path.string(), opt) == "no error");
        opt.against = "xx";
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("--against: no variant 'xx'"));
        opt.against = "";
        opt.pairs = {{"x", "x"}};
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("compares a variant with itself"));
        opt.pairs = {{"x", "uniform"}};   // no summary.csv here: no baseline rows
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("--pairs: no such comparison"));
        opt.pairs = {};
        opt.match = "m";
        CHECK_THAT(message(dir.path.string(), opt), Catch::Contains("--match: unknown key 'm'"));
    }
}

TEST_CASE("compare: p_min is the smallest p each test reaches, trials_needed the first n that can pass Holm", "[compare]") {
    for (std::size_t n : {2u, 4u, 8u, 12u}) {
        std::vector<double> d;
        for (std::size_t i = 0; i < n; ++i) d.push_back(1.0 + 0.1 * double(i));   // all one sign: the extreme
        CAPTURE(n);
        CHECK(favor::signflip_p_min(n) == favor::paired_signflip_p(d));
        CHECK(favor::signflip_p_min(n) == 2.0 / std::pow(2.0, double(n)));
    }
    CHECK(favor::signflip_p_min(40) == 1.0 / 65537);   // Monte Carlo floor
    CHECK(favor::welch_p_min(5, 4) == favor::welch_permutation_p({10, 11, 12, 13, 14}, {0, 1, 2, 3}));
    CHECK(favor::welch_p_min(4, 4) == Approx(2.0 / 70));
    CHECK(std::isnan(favor::signflip_p_min(1)));
    // 30 comparisons: need 30 x 2 / 2^n < 0.05, i.e. 2^n > 1200: n = 11 (10 gives 0.0586).
    CHECK(favor::trials_needed(30, 0.05, true) == 11);
    CHECK(30 * favor::signflip_p_min(10) >= 0.05);
    CHECK(30 * favor::signflip_p_min(11) < 0.05);
    const std::size_t w = favor::trials_needed(30, 0.05, false);
    CHECK(30 * favor::welch_p_min(w, w) < 0.05);
    CHECK(30 * favor::welch_p_min(w - 1, w - 1) >= 0.05);
    // validate's warning: 4 trials, 3 variants in 2 cells (family 2 x (3 + 3) = 12): 12 x 1/8 > 0.05.
    const std::string warn = favor::compare_power_warning(2, 3, 4);
    CHECK_THAT(warn, Catch::Contains("with 4 trials no favor compare verdict is reachable"));
    CHECK_THAT(warn, Catch::Contains("9 trials would reach it"));   // 12 x 2 / 2^9 = 0.047
    CHECK(favor::compare_power_warning(2, 3, 16).empty());
    CHECK(!favor::compare_power_warning(1, 2, 1).empty());
}

namespace {

// Reference letter groups: every maximal set of entries no two of which differ, by brute
// force over all subsets (the property a compact letter display must have).
std::set<std::set<std::size_t>> ref_groups(const std::vector<std::vector<bool>>& differs) {
    const std::size_t n = differs.size();
    std::vector<std::set<std::size_t>> cliques;
    for (std::uint32_t mask = 1; mask < (1u << n); ++mask) {
        std::set<std::size_t> s;
        bool ok = true;
        for (std::size_t i = 0; i < n; ++i)
            if (mask >> i & 1) {
                for (std::size_t j : s) ok = ok && !differs[i][j];
                s.insert(i);
            }
        if (ok) cliques.push_back(s);
    }
    std::set<std::set<std::size_t>> out;
    for (const auto& c : cliques) {
        bool maximal = true;
        for (const auto& o : cliques)
            if (o.size() > c.size() && std::includes(o.begin(), o.end(), c.begin(), c.end())) maximal = false;
        if (maximal) out.insert(c);
    }
    return out;
}

std::set<std::set<std::size_t>> groups_of_letters(const std::vector<std::string>& letters) {
    std::map<char, std::set<std::size_t>> by;
    for (std::size_t i = 0; i < letters.size(); ++i)
        for (char c : letters[i]) by[c].insert(i);
    std::set<std::set<std::size_t>> out;
    for (const auto& [c, g] : by) out.insert(g);
    return out;
}

// Reference Holm, written out: sort, multiply the k-th smallest by m - k, running maximum.
std::vector<double> ref_holm(const std::vector<double>& p) {
    std::vector<std::pair<double, std::size_t>> s;
    for (std::size_t i = 0; i < p.size(); ++i) s.emplace_back(p[i], i);
    std::sort(s.begin(), s.end());
    std::vector<double> out(p.size());
    double run = 0;
    for (std::size_t k = 0; k < s.size(); ++k) {
        run = std::max(run, std::min(1.0, double(s.size() - k) * s[k].first));
        out[s[k].second] = run;
    }
    return out;
}

}  // namespace

TEST_CASE("compare: letter groups are the maximal sets of entries that do not differ", "[compare]") {
    // Hand example: 0-1 tied, 1-2 tied, 0-2 differ, 3 differs from all: a, ab, b, c.
    std::vector<std::vector<bool>> d(4, std::vector<bool>(4, false));
    auto set = [&](std::size_t i, std::size_t j) { d[i][j] = d[j][i] = true; };
    set(0, 2), set(0, 3), set(1, 3), set(2, 3);
    CHECK(favor::letter_groups(d) == std::vector<std::string>{"a", "ab", "b", "c"});
    // Random significance patterns (fixed seed) against the brute-force reference.
    std::mt19937 rng(2024);
    for (int rep = 0; rep < 200; ++rep) {
        const std::size_t n = 2 + rng() % 6;
        std::vector<std::vector<bool>> r(n, std::vector<bool>(n, false));
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = i + 1; j < n; ++j) r[i][j] = r[j][i] = rng() % 2;
        CAPTURE(rep, n);
        const auto letters = favor::letter_groups(r);
        CHECK(groups_of_letters(letters) == ref_groups(r));
        CHECK(letters[0].find('a') != std::string::npos);
    }
}

TEST_CASE("compare: ranking groups of made-up errors match a reference computed here", "[compare]") {
    TempDir dir("ranking");
    // Five variants sharing projection and seed (paired), 10 trials each: means 1, 1, 1.5,
    // 1.5, 3 with per-trial noise (sd 0.05); and a summary baseline of 2.
    const double mu[] = {1.0, 1.0, 1.5, 1.5, 3.0};
    const char* names[] = {"p", "q", "r", "s", "t"};
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0, 0.05);
    std::vector<std::vector<double>> x(5);
    std::string csv = "variant,features,projection,L,d,m,num_features,scale,trial,seed,output_mse,nonfinite\n";
    for (int v = 0; v < 5; ++v)
        for (int t = 0; t < 10; ++t) {
            x[v].push_back(mu[v] + noise(rng));
            csv += std::string(names[v]) + ",positive,iid,64,8,16,16,1," + std::to_string(t) + ",0," +
                   favor::format_number(x[v].back()) + ",0\n";
        }
    dir.write("errors.csv", csv);
    std::string sum = "variant,features,projection,L,d,m,num_features,scale,trials,baseline_output_mse\n";
    for (const char* n : names) sum += std::string(n) + ",positive,iid,64,8,16,16,1,10,2\n";
    dir.write("summary.csv", sum);
    const favor::CompareResult res = favor::compare_results(dir.path.string(), {});
    // Reference: the 10 pairs and 5 rows against uniform by brute-force sign-flip p, Holm
    // over the 15, then the groups by brute force over subsets.
    std::vector<double> p;
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < 5; ++i)
        for (int j = i + 1; j < 5; ++j) {
            std::vector<double> d;
            for (int t = 0; t < 10; ++t) d.push_back(x[i][t] - x[j][t]);
            p.push_back(ref_signflip_p(d));
            pairs.emplace_back(i, j);
        }
    for (int i = 0; i < 5; ++i) {
        std::vector<double> d;
        for (int t = 0; t < 10; ++t) d.push_back(x[i][t] - 2);
        p.push_back(ref_signflip_p(d));
        pairs.emplace_back(i, 5);
    }
    const std::vector<double> adj = ref_holm(p);
    std::vector<double> mean(6, 2.0);   // entry 5: uniform
    for (int v = 0; v < 5; ++v) mean[v] = std::accumulate(x[v].begin(), x[v].end(), 0.0) / 10;
    std::vector<std::size_t> order(6);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return mean[a] < mean[b]; });
    std::vector<std::size_t> rank_of(6);
    for (std::size_t r = 0; r < 6; ++r) rank_of[order[r]] = r;
    std::vector<std::vector<bool>> differs(6, std::vector<bool>(6, false));
    for (std::size_t k = 0; k < p.size(); ++k) {
        const std::size_t a = rank_of[pairs[k].first], b = rank_of[pairs[k].second];
        differs[a][b] = differs[b][a] = adj[k] < 0.05;
    }
    const favor::Table& t = res.ranking;
    REQUIRE(t.rows.size() == 6);
    std::vector<std::string> letters;
    for (std::size_t r = 0; r < 6; ++r) {
        CAPTURE(r);
        const std::string expect = order[r] == 5 ? "uniform" : names[order[r]];
        CHECK(cell(t, r, "variant") == expect);
        CHECK(cell(t, r, "rank") == std::to_string(r + 1));
        CHECK(cell(t, r, "tied_with_best") == (r == 0 || !differs[0][r] ? "yes" : "no"));
        letters.push_back(cell(t, r, "group"));
    }
    CHECK(groups_of_letters(letters) == ref_groups(differs));
    // The made-up data separate into {p, q} < {r, s} < uniform < {t}: the reference agrees.
    CHECK(ref_groups(differs).size() == 4);
    CHECK(cell(t, 0, "ratio_to_uniform") == favor::format_number(mean[order[0]] / 2));
    REQUIRE(res.summary.size() == 1);
    CHECK_THAT(res.summary[0], Catch::StartsWith("L=64,d=8,m=16,scale=1 output_mse: best: p"));
    CHECK_THAT(res.summary[0], Catch::Contains("; tied: q; beat uniform: 4 of 5"));
}

TEST_CASE("compare: deterministic maps, non-finite trials, --against and --pairs", "[compare]") {
    TempDir dir("det");
    // e1, e2 deterministic (the same value every trial), r1 random, n1 random with a NaN trial.
    std::string csv = "variant,features,projection,L,d,m,num_features,scale,trial,seed,output_mse,nonfinite\n";
    for (int t = 0; t < 8; ++t) {
        const std::string tail = ",64,8,16,16,1," + std::to_string(t) + ",0,";
        csv += "e1,elu," + tail + "0.5,0\n";
        csv += "e2,dpfp," + tail + "0.7,0\n";
        csv += "r1,positive,iid" + tail + favor::format_number(1.0 + 0.01 * t) + ",0\n";
        csv += "n1,positive,iid" + tail + (t == 3 ? std::string("nan") : favor::format_number(0.2 + 0.01 * t)) + ",0\n";
    }
    dir.write("errors.csv", csv);
    favor::CompareOptions opt;
    const favor::CompareResult res = favor::compare_results(dir.path.string(), opt);
    const favor::Table& t = res.comparisons;
    REQUIRE(t.rows.size() == 6);
    {   // A random map whose trials coincide (as float16 rounding can make them) stays random.
        TempDir same("same");
        std::string c = "variant,features,projection,L,d,m,num_features,scale,trial,seed,output_mse,nonfinite\n";
        for (int k = 0; k < 8; ++k)
            for (const char* v : {"h1", "h2"})
                c += std::string(v) + ",positive,iid,64,8,16,16,1," + std::to_string(k) + ",0," + (v[1] == '1' ? "0.5" : "0.7") + ",0\n";
        same.write("errors.csv", c);
        const favor::Table u = favor::compare_results(same.path.string(), opt).comparisons;
        REQUIRE(u.rows.size() == 1);
        CHECK(cell(u, 0, "paired") == "yes");
        CHECK(num(u, 0, "p_value") == 2.0 / 256);
    }
    auto row_of = [&](const std::string& a, const std::string& b) {
        for (std::size_t r = 0; r < t.rows.size(); ++r)
            if (cell(t, r, "a") == a && cell(t, r, "b") == b) return r;
        FAIL("no row " << a << " vs " << b);
        return std::size_t(0);
    };
    const std::size_t ee = row_of("e1", "e2");
    CHECK(cell(t, ee, "paired") == "exact");
    CHECK(cell(t, ee, "p_value") == "");
    CHECK(cell(t, ee, "verdict") == "a better");
    CHECK(cell(t, ee, "ci95_low") == cell(t, ee, "ratio"));
    const std::size_t er = row_of("e1", "r1");   // one-sample: r1's trials against 0.5
    CHECK(cell(t, er, "paired") == "one-sample");
    CHECK(num(t, er, "p_value") == 2.0 / 256);
    CHECK(num(t, er, "ci95_high") < 1);   // 0.5 / mean(r1*) < 1 in every resample
    const std::size_t rn = row_of("r1", "n1");
    CHECK(cell(t, rn, "verdict") == "non-finite");
    CHECK(cell(t, rn, "nonfinite") == "b: 1 of 8");
    CHECK(cell(t, rn, "p_value") == "");
    // Holm family: the 2 tested rows (e1-r1, e2-r1); the exact and non-finite rows are not tests.
    CHECK(num(t, er, "p_holm") == Approx(2 * 2.0 / 256));
    // Ranking: n1 (non-finite) last and unranked; e1 first.
    CHECK(cell(res.ranking, 0, "variant") == "e1");
    CHECK(cell(res.ranking, 3, "variant") == "n1");
    CHECK(cell(res.ranking, 3, "rank") == "");
    CHECK(cell(res.ranking, 3, "nonfinite") == "1");

    SECTION("--against and --pairs restrict the rows and Holm's family") {
        opt.against = "r1";
        const favor::Table u = favor::compare_results(dir.path.string(), opt).comparisons;
        REQUIRE(u.rows.size() == 3);
        for (std::size_t r = 0; r < 3; ++r) CHECK(cell(u, r, "b") == "r1");
        CHECK(cell(u, 0, "a") == "e1");
        opt.against = "";
        opt.pairs = {{"r1", "e1"}};   // as asked: a = r1
        const favor::Table w = favor::compare_results(dir.path.string(), opt).comparisons;
        REQUIRE(w.rows.size() == 1);
        CHECK(cell(w, 0, "a") == "r1");
        CHECK(num(w, 0, "p_holm") == 2.0 / 256);   // a family of one
        CHECK(num(w, 0, "p_holm_min") == 2.0 / 256);
        CHECK(cell(w, 0, "verdict") == "a worse");
        CHECK(num(w, 0, "ratio") == Approx(1 / num(t, er, "ratio")));
    }
}

TEST_CASE("compare: --match num_features pairs equal F, input_seed identifies trials, underpowered", "[compare]") {
    TempDir dir("match");
    // trig m = 8 (F = 16), positive m = 8 and 16 (F = 8, 16), elu at m = 8 and 16 (F = 4 both).
    // Two input seeds x 2 trials = 4 trials per variant.
    std::string csv = "variant,features,projection,L,d,m,num_features,scale,input_seed,trial,seed,output_mse,nonfinite\n";
    for (int m : {8, 16})
        for (int is = 0; is < 2; ++is)
            for (int t = 0; t < 2; ++t) {
                const std::string mid = ",64,4," + std::to_string(m) + ",";
                const std::string tail = ",1," + std::to_string(is) + "," + std::to_string(t) + ",0,";
                const double z = 0.1 * (2 * is + t);
                if (m == 8) csv += "trig-iid,trig,iid" + mid + "16" + tail + favor::format_number(5 + z) + ",0\n";
                csv += "positive-iid,positive,iid" + mid + std::to_string(m) + tail + favor::format_number(1 + z + (m == 8)) + ",0\n";
                csv += "elu,elu," + mid + "4" + tail + "3,0\n";
            }
    dir.write("errors.csv", csv);
    favor::CompareOptions opt;
    opt.match = "num_features";
    const favor::CompareResult res = favor::compare_results(dir.path.string(), opt);
    const favor::Table& t = res.comparisons;
    CHECK(t.has_column("num_features"));
    CHECK(t.has_column("m_a"));
    bool found = false;
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
        if (cell(t, r, "a") == "trig-iid" && cell(t, r, "b") == "positive-iid") {
            found = true;
            CHECK(cell(t, r, "num_features") == "16");
            CHECK(cell(t, r, "m_a") == "8");
            CHECK(cell(t, r, "m_b") == "16");
            CHECK(cell(t, r, "n_a") == "4");
            CHECK(cell(t, r, "paired") == "no");   // different m: not the same W
            CHECK(num(t, r, "p_value") == Approx(2.0 / 70));   // separated, 4 vs 4
            CHECK(cell(t, r, "verdict") == "a worse");   // the only test: Holm factor 1
        }
    }
    CHECK(found);
    // elu appears once, in its own F = 4 cell, at its smallest m.
    std::size_t elu_rows = 0;
    for (std::size_t r = 0; r < res.ranking.rows.size(); ++r)
        if (cell(res.ranking, r, "variant") == "elu") {
            ++elu_rows;
            CHECK(cell(res.ranking, r, "num_features") == "4");
            CHECK(cell(res.ranking, r, "m") == "8");
            CHECK(cell(res.ranking, r, "n") == "4");
        }
    CHECK(elu_rows == 1);
    CHECK(res.warnings.empty());
    // At alpha 0.01 the 4 vs 4 test (p_min 2/70) cannot reach a verdict: underpowered, and
    // the warning names 5 trials (2 / C(10, 5) = 0.0079).
    opt.alpha = 0.01;
    const favor::CompareResult low = favor::compare_results(dir.path.string(), opt);
    CHECK(cell(low.comparisons, 0, "verdict") == "underpowered");
    REQUIRE(low.warnings.size() == 1);
    CHECK_THAT(low.warnings[0], Catch::Contains("1 of 1 rows underpowered"));
    CHECK_THAT(low.warnings[0], Catch::Contains("5 trials per variant would reach it"));
    // Without --match: cells by m; at m = 8 trig (F = 16) meets positive (F = 8).
    const favor::Table by_m = favor::compare_results(dir.path.string(), {}).comparisons;
    CHECK(cell(by_m, 0, "m") == "8");
    CHECK(cell(by_m, 0, "a") == "trig-iid");
    CHECK(cell(by_m, 0, "num_features_a") == "16");
    CHECK(cell(by_m, 0, "num_features_b") == "8");
    CHECK(cell(by_m, 0, "paired") == "yes");
}
