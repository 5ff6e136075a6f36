#pragma once
// Runs an experiment config and returns its tables: the one library entry point that the
// CLI and the tests call (style.md: a thin driver).
#include <atomic>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "favor/experiments/config.hpp"
#include "favor/experiments/grid.hpp"
#include "favor/experiments/run_result.hpp"

namespace favor {

RunResult run_experiment(const Config& cfg, const RunOptions& opt = {});

// Key and metric columns of an approximation errors.csv (shared with `favor merge`).
const std::vector<std::string>& approximation_key_columns();
// The columns a baseline row is matched on in summary.csv: L, d, scale[, head].
std::vector<std::string> baseline_key_columns(bool per_head);

// What a journal must match for `favor run --resume`: the resolved config (without
// output_dir), the shard, the build, and for npy inputs the size and mtime of each file.
nlohmann::json run_identity(const Config& cfg, const Shard& shard);

// "favor 0.1.0 (git abc1234, Release, GNU 12.2.0, -march=native, OpenBLAS ...)".
std::string version_text();

// Version, git commit, build type, compiler, BLAS, threads, CPU, host, start time.
nlohmann::json environment_info(int threads);

}  // namespace favor
