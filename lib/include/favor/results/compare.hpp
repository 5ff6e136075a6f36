#pragma once
// `favor compare`: per cell, is one estimator's error significantly below another's?
//
// Tests (valid for heavy-tailed samples with unequal variances; no normality assumed):
// - paired (same projection, seed and trial indices, so trial t of both used the same W on the
//   same inputs): sign-flip permutation test of the paired t statistic of d_t = a_t - b_t.
//   Exact when d is symmetric about 0, asymptotically valid for H0: E[d] = 0 (Janssen 1999).
// - unpaired: permutation test of the Welch t statistic. Exact under exchangeability,
//   asymptotically valid for H0: equal means with unequal variances (Janssen 1997; Chung &
//   Romano 2013, "Exact and asymptotically robust permutation tests").
// - one-sample, against a deterministic baseline c: sign-flip test of x_t - c.
// Both enumerate every sign pattern / split when there are at most 65536 of them, otherwise
// draw 65536 from the counter-based RNG (p = (1 + #{|t*| >= |t|}) / (1 + B)). Asymptotic
// validity needs finite variances.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "favor/io/report.hpp"

namespace favor {

// Permutation sizes: enumerate exactly when the number of sign patterns / splits is at most
// `exact_limit`, else draw `monte_carlo` of them.
struct PermutationOptions {
    std::size_t exact_limit = 65536;
    std::size_t monte_carlo = 65536;
};

// Relative tolerance for ties between a permuted and the observed statistic.
constexpr double kTieTolerance = 1e-12;
constexpr std::size_t kBootstrap = 10000;

// Scale-freedom: the t statistics, their permutation p-values and the ratios of means do not
// change when every value is multiplied by one c > 0, so each is computed on the values times
// 2^-e (exact), e the binary exponent of the largest |value| (scale_exponent): errors of 1e300
// or 1e-300 give the same p as errors of 1, where squares and sums would over- or underflow.
// The e of the finite values of `samples` and of `constant` (0 when all are 0).
int scale_exponent(std::initializer_list<const std::vector<double>*> samples, double constant = 0);
// The mean of x, computed scaled (finite whenever the values are).
double mean_of(const std::vector<double>& x);
// (a_t - b_t) 2^-e and (x_t - c) 2^-e, e = scale_exponent of both sides: differences that
// cannot overflow, for the sign-flip tests (whose p is scale-free).
std::vector<double> differences(const std::vector<double>& a, const std::vector<double>& b);
std::vector<double> differences(const std::vector<double>& x, double c);

// Studentized mean sqrt(n) mean(d) / sd(d) (sd with n - 1); 0 when the mean is 0, +-inf when
// sd is 0 but the mean is not. Needs n >= 2.
double paired_t(const std::vector<double>& d);
// Welch's (mean(a) - mean(b)) / sqrt(s_a^2 / n_a + s_b^2 / n_b); 0 when the means are equal,
// +-inf when both variances are 0 but the means differ. Needs n_a, n_b >= 2.
double welch_t(const std::vector<double>& a, const std::vector<double>& b);

// Two-sided sign-flip permutation p of paired_t(d): exact over all 2^n patterns when
// 2^n <= exact_limit (n <= 16 by default). 1 when every d_t is 0. Needs n >= 2.
double paired_signflip_p(const std::vector<double>& d, std::uint64_t key = 0,
                         const PermutationOptions& opt = {});
// Two-sided permutation p of welch_t over the splits of the pooled sample into groups of
// sizes n_a and n_b: exact over all C(n_a + n_b, n_a) splits when that is <= exact_limit.
// 1 when all pooled values are equal. Needs n_a, n_b >= 2.
double welch_permutation_p(const std::vector<double>& a, const std::vector<double>& b,
                           std::uint64_t key = 0, const PermutationOptions& opt = {});

// The smallest p the two tests can give with these sizes (the power floor, whatever the
// data): sign-flip with n values 2 / 2^n when enumerated (the observed pattern and its
// mirror), Welch with n_a, n_b values 1 / C(n, n_a) (2 / C when n_a = n_b: the mirror split),
// else 1 / (1 + monte_carlo). NaN for n < 2.
double signflip_p_min(std::size_t n, const PermutationOptions& opt = {});
double welch_p_min(std::size_t na, std::size_t nb, const PermutationOptions& opt = {});
// The fewest trials per variant with which Holm over `family` tests of the given kind
// (paired / one-sample sign-flip, else Welch with n per side) can reach p_holm < alpha:
// family * p_min(n) < alpha (Holm's first step; no rejection is possible without it).
// 0 if no n up to 64 does.
std::size_t trials_needed(std::size_t family, double alpha, bool signflip);
// The warning `favor validate` gives before an approximation run whose trials cannot reach
// any compare verdict: `cells` cells of `variants` variants imply per metric a family of
// cells * (V (V - 1) / 2 + V) paired / one-sample tests (every pair, and each against
// uniform). "" when a verdict is reachable.
std::string compare_power_warning(std::size_t cells, std::size_t variants, std::size_t trials, double alpha = 0.05);

// Sorted bootstrap ratios of means mean(a*) / mean(b*) over `resamples` resamples: trial
// indices drawn jointly when `paired` (a and b the same length), independently per sample
// otherwise (Efron & Tibshirani 1993, ch. 13). x / x counts as 1.
std::vector<double> ratio_bootstrap(const std::vector<double>& a, const std::vector<double>& b, bool paired,
                                    std::uint64_t key, std::size_t resamples = kBootstrap);
// The same for mean(x*) / baseline.
std::vector<double> baseline_ratio_bootstrap(const std::vector<double>& x, double baseline, std::uint64_t key,
                                             std::size_t resamples = kBootstrap);
// The central `level` percentile interval of sorted values (quantiles (1 - level) / 2 and
// (1 + level) / 2, linear interpolation as numpy's default).
std::pair<double, double> percentile_interval(const std::vector<double>& sorted, double level);
// 95% percentile intervals of the two bootstraps above.
std::pair<double, double> ratio_ci(const std::vector<double>& a, const std::vector<double>& b,
                                   bool paired, std::uint64_t key, std::size_t resamples = kBootstrap);
std::pair<double, double> baseline_ratio_ci(const std::vector<double>& x, double baseline,
                                            std::uint64_t key, std::size_t resamples = kBootstrap);

// Holm-Bonferroni adjusted p-values, in the order given.
std::vector<double> holm(const std::vector<double>& p);

struct CompareOptions {
    std::vector<std::string> metrics;   // empty: the first compared metric present (metric table
                                        // order); "all": every compared metric present
    double alpha = 0.05;
    // The family (the rows written, and Holm's): every variant against one (`uniform`
    // included), or only the listed pairs (a:b). Empty: every pair and each against uniform.
    std::string against;
    std::vector<std::pair<std::string, std::string>> pairs;
    // "num_features": cells keyed by the number of feature columns F instead of m (each
    // variant at its own m; maps whose F does not depend on m at their smallest m). Also
    // implied by a `num_features` grid in DIR/run.json's config.
    std::string match;
    // Test and bootstrap sizes (the defaults everywhere but in the fuzz target): the bootstrap
    // draws `bootstrap` resamples, more for large families (ci_bonf), at most 4x that.
    PermutationOptions permutations;
    std::size_t bootstrap = kBootstrap;
    // Called as rows finish: (done, total) over every row's test and every written row's
    // intervals (the CLI's progress line); may be empty.
    std::function<void(std::size_t done, std::size_t total)> progress;
};

// Every metric column `compare` knows (known columns absent from a file are skipped by "all").
const std::vector<std::string>& compare_metric_names();

// A result directory's tables as text (compare_results reads them; the fuzz target makes them).
struct CompareInput {
    std::string errors_name, errors;                  // errors.csv
    std::string summary_name;
    std::optional<std::string> summary;               // summary.csv, for the uniform baseline
    bool by_num_features = false;                     // run.json's config has a num_features grid
};

struct CompareResult {
    std::vector<std::string> metrics;    // the metrics compared, in order
    Table comparisons;                   // every metric's rows (the files hold one metric each)
    Table ranking;
    std::vector<std::string> cell_columns;
    std::vector<std::string> summary;    // one line per cell and metric (--summary)
    std::vector<std::string> warnings;   // underpowered rows, skipped baselines
};

// The comparisons and rankings of a result directory (see docs/design.md, "compare"): reads
// DIR/errors.csv, DIR/summary.csv (baselines) and DIR/run.json (the cell key), regular files
// only. Throws Error on bad input.
CompareResult compare_results(const std::string& dir, const CompareOptions& opt);
CompareResult compare_tables(const CompareInput& in, const CompareOptions& opt);
// The files of one metric in a result directory: comparisons_<metric>.csv, ranking_<metric>.csv
// (one pair per metric, so comparing one metric never replaces another's tables).
std::pair<std::string, std::string> compare_file_names(const std::string& metric);
// The rows of `t` (comparisons or ranking) whose metric column is `metric`.
Table metric_part(const Table& t, const std::string& metric);
// Writes each metric's pair of files into DIR (write_own_files: regular files only, never
// through a link; every file written before the first is replaced).
void write_comparisons(const std::string& dir, const CompareResult& r);
// One line naming the tests, for the top of the printed table.
std::string compare_description(const CompareOptions& opt);

}  // namespace favor
