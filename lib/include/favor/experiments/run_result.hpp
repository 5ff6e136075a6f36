#pragma once
// What a run takes besides its config (RunOptions: threads, shard, progress, journal, stop) and
// what it gives back (RunResult: its tables and run.json), and how a result becomes its set of
// files (docs/design.md section 6). Shared by the experiment runners and the CLI.
#include <atomic>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "favor/experiments/grid.hpp"
#include "favor/experiments/journal.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/io/report.hpp"

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

// The files of a result set: errors.csv, summary.csv, summary.md (or timing.csv, timing.md)
// and run.json.
ResultFiles result_files(const RunResult& r);
// Replaces the result set in `out` with the files of `r`, whole (result_dir.hpp).
void write_results(const RunResult& r, OutputDir& out);

}  // namespace favor
