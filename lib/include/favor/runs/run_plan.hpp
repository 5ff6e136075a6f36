#pragma once
// Planning a run before any work (`favor run` and `favor validate`): the shapes of a config's
// .npy inputs, and the thread count the request, the memory budget and the address-space
// limit allow, with a warning for every lowering. The estimates themselves are cost_model.hpp's.
#include <optional>
#include <string>
#include <vector>

#include "favor/core/byte_sizes.hpp"
#include "favor/core/resources.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/grid.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/runs/cost_model.hpp"

namespace favor {

// The .npy shapes of an approximation config with npy inputs (headers read and checked, the
// files exist, the shapes fit together); nullopt for any other config.
std::optional<QkvShapes> npy_shapes(const Config& cfg);

struct RunPlan {
    int threads = 1;                    // what the run uses
    Cost cost;                          // the estimate at that thread count
    std::vector<std::string> warnings;  // one per lowering of the request, in order
};
// Threads for a run: `requested` (0: all hardware threads) clamped to the sane maximum, then to
// what `budget` and the address-space limit hold. Throws Error when even one thread does not fit.
RunPlan plan_run(const Config& cfg, int requested, const Shard& shard, const QkvShapes* npy,
                 const MemoryBudget& budget);

}  // namespace favor
