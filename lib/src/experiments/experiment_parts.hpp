#pragma once
// Internal to lib/src (not installed): the experiment kinds, each in its own source file; only
// run_experiment (experiment.cpp) calls these.
#include <nlohmann/json.hpp>

#include "favor/experiments/config.hpp"
#include "favor/experiments/run_result.hpp"

namespace favor {

// "approximation": attention errors against exact attention (approximation.cpp).
RunResult run_approximation_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info);
// "kernel": pairs (x, y) of common length and given angle (kernel_experiment.cpp).
RunResult run_kernel_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info);
// "timing": repeated timed runs of each variant (timing.cpp).
RunResult run_timing_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info);

}  // namespace favor
