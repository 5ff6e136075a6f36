#pragma once
// The ranking `favor compare` writes per cell (ranking_<metric>.csv): estimators ordered by the mean
// of a metric, the group not significantly different from the best, and letter groups.
#include <cstddef>
#include <string>
#include <vector>

#include "favor/io/report.hpp"

namespace favor {

// Compact letter display (Piepho 2004, "An algorithm for a letter-based representation of
// all-pairwise comparisons", insert-absorb): entries 0..n-1 in rank order; differs[i][j]
// true when i and j differ significantly (symmetric). Returns each entry's letters: two
// entries share a letter exactly when they do not differ; each letter is a maximal set of
// entries no two of which differ. Letters are assigned in the order of each group's best
// entry ("a" holds entry 0), a-z then A-Z then "{k}".
std::vector<std::string> letter_groups(const std::vector<std::vector<bool>>& differs);

// One estimator (or uniform attention) in a cell's ranking.
struct RankEntry {
    std::string name;
    std::string budget;            // the per-row budget column's value (num_features or m)
    std::size_t n = 0;             // trials (0: uniform attention, a constant)
    std::size_t nonfinite = 0;     // trials with a NaN / Inf value
    double mean = 0;
    bool uniform = false;
    std::string vs_uniform;        // the verdict against uniform: better, worse, equal, n.s., ...
};

// One cell and metric: the entries and which pairs differ (p_holm < alpha, or an exact
// difference between two deterministic entries).
struct RankCell {
    std::vector<std::string> key;  // the cell's values of the cell columns
    std::string label, metric;
    bool higher_is_better = false; // the metric's direction (metric table): rank by mean descending
    std::vector<RankEntry> entries;
    std::vector<std::vector<bool>> differs;
};

// ranking_<metric>.csv: per cell and metric, rows in rank order (best first: mean ascending, or
// descending for a higher-is-better metric; entries with non-finite trials last, unranked): cell columns, metric, rank, variant, <budget_column>,
// n, nonfinite, mean, ratio_to_best, ratio_to_uniform, vs_uniform, tied_with_best, group.
Table ranking_table(const std::vector<RankCell>& cells, const std::vector<std::string>& cell_columns,
                    const std::string& budget_column);
// One line per cell and metric: "<cell> <metric>: best: sderf 0.68x uniform; tied: saderf;
// beat uniform: 3 of 8".
std::vector<std::string> ranking_summary(const std::vector<RankCell>& cells);
// The ranking as one Markdown table per cell and metric, each under a "### <cell> <metric>" line.
std::string ranking_markdown(const Table& ranking, const std::vector<std::string>& cell_columns);

}  // namespace favor
