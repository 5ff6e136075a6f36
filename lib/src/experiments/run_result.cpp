// A run's result as its set of files (favor/experiments/run_result.hpp, docs/design.md section 6).
#include "favor/experiments/run_result.hpp"

namespace favor {

ResultFiles result_files(const RunResult& r) {
    ResultFiles files;
    const std::string name = r.info.contains("config") ? r.info["config"].value("name", std::string()) : "";
    // A table as CSV and as Markdown under the config's name, with the run's notes after it.
    auto csv_and_md = [&](const Table& t, const std::string& stem) {
        files.emplace_back(stem + ".csv", to_csv(t));
        std::string md = "# " + name + "\n\n" + to_markdown(t);
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
