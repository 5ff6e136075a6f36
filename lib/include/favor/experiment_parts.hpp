#pragma once
// The experiment kinds other than "approximation", each in its own source file; only
// run_experiment (experiment.cpp) calls these.
#include <nlohmann/json.hpp>

#include "favor/experiment.hpp"

namespace favor {

// "kernel": pairs (x, y) of common length and given angle (kernel_experiment.cpp).
RunResult run_kernel_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info);
// "timing": repeated timed runs of each variant (timing.cpp).
RunResult run_timing_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info);

}  // namespace favor
