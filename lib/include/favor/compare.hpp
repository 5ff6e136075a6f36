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
#include <string>
#include <utility>
#include <vector>

#include "favor/report.hpp"

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

// 95% bootstrap percentile interval (quantiles 0.025 and 0.975, linear interpolation) of
// mean(a) / mean(b) over `resamples` resamples: trial indices drawn jointly when `paired`
// (a and b the same length), independently per sample otherwise. x / x counts as 1.
std::pair<double, double> ratio_ci(const std::vector<double>& a, const std::vector<double>& b,
                                   bool paired, std::uint64_t key, std::size_t resamples = kBootstrap);
// The same for mean(x) / baseline.
std::pair<double, double> baseline_ratio_ci(const std::vector<double>& x, double baseline,
                                            std::uint64_t key, std::size_t resamples = kBootstrap);

// Holm-Bonferroni adjusted p-values, in the order given.
std::vector<double> holm(const std::vector<double>& p);

struct CompareOptions {
    std::vector<std::string> metrics;   // empty: output_mse; "all": every known metric present
    double alpha = 0.05;
};

// Every metric column `compare` knows (known columns absent from a file are skipped by "all").
const std::vector<std::string>& compare_metric_names();

// The comparisons table of a result directory (see README, "favor compare"); reads
// DIR/errors.csv and, for baseline rows, DIR/summary.csv. Throws Error on bad input.
Table compare_results(const std::string& dir, const CompareOptions& opt);
// Writes DIR/comparisons.csv atomically.
void write_comparisons(const std::string& dir, const Table& t);
// One line naming the tests, for the top of the printed table.
std::string compare_description(const CompareOptions& opt);

}  // namespace favor
