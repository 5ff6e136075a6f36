#pragma once
// Runs an experiment config and returns its tables: the one library entry point that the
// CLI and the tests call (style.md: a thin driver).
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "favor/config.hpp"
#include "favor/grid.hpp"
#include "favor/report.hpp"

namespace favor {

struct RunOptions {
    int threads = 0;     // 0: all cores
    Shard shard;
    // Called after each finished (cell, trial) with (done, total), from any thread.
    std::function<void(std::size_t, std::size_t)> progress;
};

struct RunResult {
    Table errors;            // approximation: one row per cell and trial
    Table summary;           // one row per cell
    Table timing;            // timing experiments
    std::string notes_md;    // extra Markdown after the table (e.g. the crossover L)
    nlohmann::json info;     // run.json
};

RunResult run_experiment(const Config& cfg, const RunOptions& opt = {});

// Key and metric columns of an approximation errors.csv (shared with `favor merge`).
const std::vector<std::string>& approximation_key_columns();

// Writes the files of `r` into `dir` (created if missing), each atomically.
void write_results(const RunResult& r, const std::string& dir);

// "favor 0.1.0 (git abc1234, Release, GNU 12.2.0, -march=native, OpenBLAS ...)".
std::string version_text();

// Version, git commit, build type, compiler, BLAS, threads, CPU, host, start time.
nlohmann::json environment_info(int threads);

}  // namespace favor
