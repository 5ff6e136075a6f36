#pragma once
// Runs an experiment config and returns its tables: the one library entry point that the
// CLI and the tests call (style.md: a thin driver).
#include <atomic>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "favor/config.hpp"
#include "favor/grid.hpp"
#include "favor/journal.hpp"
#include "favor/report.hpp"
#include "favor/result_dir.hpp"

namespace favor {

struct RunOptions {
    int threads = 0;     // 0: all cores
    Shard shard;
    // Called after each finished (cell, trial) with (done, total), from any thread; first once
    // with the number already done (taken from the journal) before any work.
    std::function<void(std::size_t, std::size_t)> progress;
    // Approximation and kernel runs: (cell, trial) items found in `journal` are taken from it,
    // finished ones are recorded to it; once *stop is true no new item starts (the ones in
    // flight finish) and the result comes back incomplete, without tables.
    Journal* journal = nullptr;
    const std::atomic<bool>* stop = nullptr;
};

struct RunResult {
    Table errors;            // approximation: one row per cell and trial
    Table summary;           // one row per cell
    Table baselines;         // approximation with input_seeds: baseline_<metric> per input draw (baselines.csv)
    Table timing;            // timing experiments
    std::string notes_md;    // extra Markdown after the table (e.g. the crossover L)
    nlohmann::json info;     // run.json
    bool complete = true;    // false: stopped early (RunOptions::stop), no tables
    std::size_t items_done = 0, items_total = 0, items_resumed = 0;   // (cell, input seed, trial) items
};

RunResult run_experiment(const Config& cfg, const RunOptions& opt = {});

// Key and metric columns of an approximation errors.csv (shared with `favor merge`).
const std::vector<std::string>& approximation_key_columns();
// The columns a baseline row is matched on in summary.csv: L, d, scale[, head].
std::vector<std::string> baseline_key_columns(bool per_head);

// The files of a result set: errors.csv, summary.csv, summary.md (or timing.csv, timing.md)
// and run.json.
ResultFiles result_files(const RunResult& r);
// Replaces the result set in `out` with the files of `r`, whole (result_dir.hpp).
void write_results(const RunResult& r, OutputDir& out);

// What a journal must match for `favor run --resume`: the resolved config (without
// output_dir), the shard, the build, and for npy inputs the size and mtime of each file.
nlohmann::json run_identity(const Config& cfg, const Shard& shard);

// "favor 0.1.0 (git abc1234, Release, GNU 12.2.0, -march=native, OpenBLAS ...)".
std::string version_text();

// Version, git commit, build type, compiler, BLAS, threads, CPU, host, start time.
nlohmann::json environment_info(int threads);

}  // namespace favor
