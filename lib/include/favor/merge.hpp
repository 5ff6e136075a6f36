#pragma once
// `favor merge`: combines result directories (shards of one run, or runs of one sweep) into
// one result set, recomputing the summary from the merged per-trial rows.
#include <string>
#include <vector>

#include "favor/experiment.hpp"

namespace favor {

// Rows are ordered as an unsharded run orders them: variants in order of first appearance
// in the inputs' run.json, then L, d, m, scale (kernel: d, m, norm, angle) ascending, then
// trial. A cell found in two inputs must agree exactly (same seed, same numbers), and all
// inputs must have the same columns, experiment kind and dtype; otherwise Error.
RunResult merge_results(const std::vector<std::string>& dirs);

}  // namespace favor
