#pragma once
// Result tables (docs/design.md section 6): CSV, Markdown and summary statistics.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace favor {

// A table of already formatted cells. Empty cell: not applicable.
struct Table {
    std::vector<std::string> columns;
    std::vector<std::vector<std::string>> rows;

    std::size_t column(const std::string& name) const;   // index; throws Error if absent
    bool has_column(const std::string& name) const;
};

// Shortest text that reads back to the same double (so CSVs round-trip exactly);
// "nan" / "inf" / "-inf" for non-finite values, "" for nullopt (not applicable).
std::string format_number(std::optional<double> v);
std::string format_count(std::size_t v);
// Strict readers of exactly what those write (merge reads tables with them, --resume its
// journal): a count in decimal without leading zeros; a number in from_chars' form, finite,
// or also nan / inf / -inf when `nonfinite`. False for anything else ("1,2", "abc", " 1").
bool parse_count(const std::string& s, std::size_t& v);
bool parse_real(const std::string& s, double& v, bool nonfinite);

std::string to_csv(const Table& t);
// A number cell shown to `digits` significant digits (integers and non-numbers as they are).
std::string short_number(const std::string& cell, int digits);
// Markdown with numbers shown to `digits` significant digits.
std::string to_markdown(const Table& t, int digits = 4);
// Parses a CSV written by to_csv. No cell holds a comma, quote or newline (variant names are
// checked: variant.hpp), so nothing is quoted; a quote is refused.
Table parse_csv(const std::string& text, const std::string& file);
Table read_csv(const std::string& path);

struct Stats {
    double mean = 0, std = 0, sem = 0, median = 0, p10 = 0, p90 = 0;
    std::size_t n = 0;
};
// The p-quantile with linear interpolation between order statistics (numpy's default,
// Hyndman & Fan type 7); NaN for no values.
double quantile(std::vector<double> xs, double p);
// Mean, sample standard deviation (n - 1), standard error of the mean, median, 10th and 90th
// percentiles; std and sem are NaN for n < 2.
Stats describe(const std::vector<double>& xs);

// One summary row per group of errors.csv rows that agree on `key_columns`: the keys,
// `trials`, then <metric>_mean, _std, _sem, _median, _p10, _p90 for each metric column, and single-valued
// columns (`plain_columns`, e.g. kernel_mse_theory) as their mean.
Table summarize(const Table& errors, const std::vector<std::string>& key_columns,
                const std::vector<std::string>& metric_columns,
                const std::vector<std::string>& plain_columns);

// `left` with the other columns of `right` appended, matched on the columns `on` (a left
// row without a match gets empty cells).
// Rows grouped by `on` (in order of first appearance) with the mean of each of `value_columns`
// (blank if any row's cell is blank): the baselines' mean over input seeds (summary.csv).
Table group_means(const Table& t, const std::vector<std::string>& on, const std::vector<std::string>& value_columns);

Table join_columns(const Table& left, const Table& right, const std::vector<std::string>& on);

}  // namespace favor
