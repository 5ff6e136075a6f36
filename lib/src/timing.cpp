// The "timing" experiment (issue 5).
#include "favor/error.hpp"
#include "favor/experiment_parts.hpp"

namespace favor {

RunResult run_timing_experiment(const Config& cfg, const RunOptions&, nlohmann::json) {
    throw Error(cfg.file + ": experiment: \"timing\" is not available in this build yet");
}

}  // namespace favor
