#pragma once
// What a request costs before it starts (docs/limits.md): the peak memory of a run, `apply`,
// `gen` or `projection` estimated from the sizes alone, and a rough time. A request over the
// budget (resources.hpp) is refused with one line naming the field that drives the estimate,
// before any allocation; a run whose threads do not fit is given fewer.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "favor/core/resources.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/grid.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/runs/apply.hpp"

namespace favor {

// An estimate: peak resident memory of the whole process (bytes) and a rough wall time.
struct Cost {
    double peak = 0;        // bytes
    double seconds = 0;     // rough (an order of magnitude)
    int threads = 1;        // threads it assumes
    std::string field;      // the config field or flag that drives the largest term
    std::string where;      // the worst cell, e.g. "positive-iid at L = 65536, d = 16, m = 32768"
    std::string hint;       // what to lower
    std::vector<std::pair<std::string, double>> parts;   // the largest terms (name, bytes)
    std::string summary() const;   // "105 MiB (inputs 12 MiB, features 64 MiB, ...)"
};

// A run of `cfg` on `threads` threads (resolved, >= 1) for the cells of `shard`; `npy`: the
// shapes of npy inputs (read_qkv_shapes), needed when cfg.inputs.npy().
Cost estimate_run(const Config& cfg, int threads, const Shard& shard = {}, const QkvShapes* npy = nullptr);
// `favor apply` on tensors of these shapes; `grad`: with --grad (the backward pass after it).
Cost estimate_apply(const QkvShapes& s, const ApplyOptions& o, int threads, bool grad = false);
// `favor gen` and `favor projection`.
// basis: an input family with an anisotropic covariance (two d x d Haar blocks and QR's copy).
Cost estimate_gen(std::size_t L, std::size_t d, std::size_t dv, bool basis = false);
Cost estimate_projection(std::size_t m, std::size_t d);

// Throws Error "<name>: <field>: needs an estimated X of memory (...), more than the Y
// available (source); <hint>" when the estimate exceeds the budget.
void check_memory(const Cost& c, const MemoryBudget& b, const std::string& name);

// For a run: the largest thread count <= `threads` whose estimate fits the budget, with a
// warning when it is lower; Error (check_memory) when one thread does not fit.
ThreadPlan fit_threads(const Config& cfg, int threads, const Shard& shard, const QkvShapes* npy,
                       const MemoryBudget& b, Cost& cost);

}  // namespace favor
