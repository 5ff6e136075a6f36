// A run's result as its set of files (favor/experiments/run_result.hpp, docs/design.md section 6).
#include "favor/experiments/run_result.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace favor {

namespace {
constexpr std::array<const char*, 6> kStats{"_mean", "_std", "_sem", "_median", "_p10", "_p90"};

// The stem of a statistic's column ("output_mse" of "output_mse_p10"), "" for any other column.
std::string stat_stem(const std::string& column) {
    for (const char* s : kStats) {
        const std::string suffix = s;
        if (column.size() > suffix.size() && column.compare(column.size() - suffix.size(), suffix.size(), suffix) == 0)
            return column.substr(0, column.size() - suffix.size());
    }
    return "";
}

// summary.md / timing.md, written to be read (summary.csv keeps every statistic): a column
// holding one value in every row is said once above the table (but the variant's), and each
// metric is one column "mean ± sem" (the mean alone when sem is empty or nan: one trial).
std::string readable_markdown(const Table& t) {
    constexpr int digits = 4;
    struct Shown {   // a column as it is, or a statistic's mean with its sem
        std::string name;
        std::size_t c;
        std::optional<std::size_t> sem;
    };
    std::vector<std::string> said;
    std::vector<Shown> shown;
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const std::string& name = t.columns[c];
        const std::string stem = stat_stem(name);
        if (!stem.empty() && t.has_column(stem + "_mean") && t.has_column(stem + "_sem")) {
            if (name == stem + "_mean") shown.push_back({stem, c, t.column(stem + "_sem")});
            continue;
        }
        const bool constant = !t.rows.empty() && std::all_of(t.rows.begin(), t.rows.end(), [&](const auto& r) {
            return r[c] == t.rows.front()[c];
        });
        if (constant && name != "variant") {
            if (!t.rows.front()[c].empty()) said.push_back(name + " = " + short_number(t.rows.front()[c], digits));
            continue;
        }
        shown.push_back({name, c, std::nullopt});
    }
    std::string out;
    if (!said.empty()) {
        out += "In every row: ";
        for (std::size_t i = 0; i < said.size(); ++i) out += (i ? ", " : "") + said[i];
        out += ".\n\n";
    }
    const bool any_stat = std::any_of(shown.begin(), shown.end(), [](const Shown& x) { return x.sem.has_value(); });
    if (any_stat)
        out += "Each metric: mean ± standard error over the trials; std, median, p10 and p90 are in the CSV.\n\n";
    Table md;
    for (const Shown& x : shown) md.columns.push_back(x.name);
    for (const auto& r : t.rows) {
        std::vector<std::string> row;
        for (const Shown& x : shown) {
            std::string cell = short_number(r[x.c], digits);
            if (x.sem && !r[*x.sem].empty() && r[*x.sem] != "nan") cell += " ± " + short_number(r[*x.sem], 2);
            row.push_back(cell);
        }
        md.rows.push_back(row);
    }
    return out + to_markdown(md, digits);
}
}  // namespace

ResultFiles result_files(const RunResult& r) {
    ResultFiles files;
    const std::string name = r.info.contains("config") ? r.info["config"].value("name", std::string()) : "";
    // A table as CSV and as Markdown under the config's name, with the run's notes after it.
    auto csv_and_md = [&](const Table& t, const std::string& stem) {
        files.emplace_back(stem + ".csv", to_csv(t));
        std::string md = "# " + name + "\n\n" + readable_markdown(t);
        if (!r.notes_md.empty()) md += "\n" + r.notes_md;
        files.emplace_back(stem + ".md", md);
    };
    if (!r.errors.columns.empty()) files.emplace_back("errors.csv", to_csv(r.errors));
    if (!r.summary.columns.empty()) csv_and_md(r.summary, "summary");
    if (!r.baselines.columns.empty()) files.emplace_back("baselines.csv", to_csv(r.baselines));
    if (!r.timing.columns.empty()) csv_and_md(r.timing, "timing");
    files.emplace_back("run.json", r.info.dump(2) + "\n");   // last: a set with run.json is whole
    return files;
}

void write_results(const RunResult& r, OutputDir& out) { out.replace(result_files(r)); }

}  // namespace favor
