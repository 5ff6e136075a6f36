#pragma once
// Row-sampled metrics (docs/design.md section 3.1): the query rows a metric is evaluated on
// when a config sets `query_rows` N < L, and the standard error that sampling adds.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace favor {

// N query positions of an (L, .) attention problem, ascending, drawn from the stream
// (seed, "query-rows", L, N[, input seed]) (docs/design.md section 7): non-causal, the N rows
// of smallest uniform(key, i), a uniform draw without replacement; causal, one row per
// stratum [floor(s L / N), floor((s + 1) L / N)), uniform in it (the error of a causal row
// grows with its position, so strata over positions remove that spread). N >= L: all rows.
struct RowSample {
    std::vector<std::size_t> rows;
    std::size_t L = 0;
    bool stratified = false;
    bool all() const { return rows.size() == L; }
};
RowSample draw_query_rows(std::uint64_t seed, std::uint64_t input_seed, std::size_t L, std::size_t N, bool causal);

// The jackknife groups of a sample of N rows: G = min(N, kRowGroups) groups of consecutive
// sample rows, group g = [g N / G, (g + 1) N / G).
constexpr std::size_t kRowGroups = 1024;
// Stratified rows: consecutive groups collapsed into sets of this many for the variance.
constexpr std::size_t kCollapsed = 8;
std::size_t row_groups(std::size_t N);
std::size_t group_begin(std::size_t g, std::size_t groups, std::size_t N);

// The standard error of a metric evaluated on the sample (value `full`) from its values with
// each group left out (`deleted`, delete-a-group jackknife pseudo-values
// p_g = G full - (G - 1) deleted_g): uniform rows, (1 - N/L) s^2(p) / G; stratified rows,
// consecutive groups collapsed in sets of kCollapsed (the last set takes the rest),
// (1 - N/L) / G^2 sum over sets of k/(k-1) sum (p - mean)^2. 0 when all rows are used; NaN
// when some value is not finite.
double row_sem(double full, const std::vector<double>& deleted, const RowSample& s);

// The interval favor states for a row-sampled value x: x +- kRowInterval * row SEM (the
// normal 99% quantile: per-row errors are heavy-tailed, so the normal 95% interval covers
// less than 95%; docs/design.md 3.1 gives the measured coverage).
constexpr double kRowInterval = 2.576;

}  // namespace favor
