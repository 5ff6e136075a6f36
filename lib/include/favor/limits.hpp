#pragma once
// What a request costs before it starts (docs/limits.md): the peak memory of a run, `apply`,
// `gen` or `projection` estimated from the sizes alone, a rough time, the memory the system
// offers (or --max-memory), and the threads that fit. A request over the budget is refused
// with one line naming the field that drives the estimate, before any allocation; a thread
// count over the sane maximum or over what an address-space limit (ulimit -v) leaves room
// for is lowered with a warning.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "favor/apply.hpp"
#include "favor/config.hpp"
#include "favor/grid.hpp"
#include "favor/tensor_io.hpp"

namespace favor {

// "1.5 GiB", "980 MiB", "12 KiB", "512 B".
std::string format_bytes(double bytes);
// A size flag: bytes, or a number with K, M, G, T (powers of 1024; "B" / "iB" may follow),
// e.g. "8G", "512MiB", "1.5GB". Errors name `flag`.
std::size_t parse_size_text(const std::string& flag, const std::string& text);

// The memory a request may use.
struct MemoryBudget {
    std::size_t bytes = 0;
    std::string source;   // "MemAvailable", "cgroup memory.max", "ulimit -v", "--max-memory", ...
};
// --max-memory when given; otherwise the least of what /proc/meminfo (MemAvailable), the
// cgroup (memory.max - memory.current) and the address-space and data limits leave free.
MemoryBudget memory_budget(std::optional<std::size_t> max_memory = std::nullopt);

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
// `favor apply` on tensors of these shapes.
Cost estimate_apply(const QkvShapes& s, const ApplyOptions& o, int threads);
// `favor gen` and `favor projection`.
// basis: an input family with an anisotropic covariance (two d x d Haar blocks and QR's copy).
Cost estimate_gen(std::size_t L, std::size_t d, std::size_t dv, bool basis = false);
Cost estimate_projection(std::size_t m, std::size_t d);

// Throws Error "<name>: <field>: needs an estimated X of memory (...), more than the Y
// available (source); <hint>" when the estimate exceeds the budget.
void check_memory(const Cost& c, const MemoryBudget& b, const std::string& name);

// The threads to use: `requested` (0: all hardware threads) clamped to max_threads(), and
// under an address-space limit (ulimit -v) to as many as leave room for `data_bytes`, each
// thread needing its stack, its malloc arena and OpenBLAS's buffer in address space. A
// lowered count comes with a one-line warning; Error when not even one thread fits.
struct ThreadPlan {
    int threads = 1;
    std::string warning;   // empty when the request stands
};
ThreadPlan plan_threads(int requested, double data_bytes, const std::string& flag = "--threads");

// For a run: the largest thread count <= `threads` whose estimate fits the budget, with a
// warning when it is lower; Error (check_memory) when one thread does not fit.
ThreadPlan fit_threads(const Config& cfg, int threads, const Shard& shard, const QkvShapes* npy,
                       const MemoryBudget& b, Cost& cost);

// Makes malloc return freed large buffers to the system (fixed mmap and trim thresholds
// instead of glibc's adaptive ones), so peak RSS follows the live data the estimates model
// rather than heap fragmentation (up to 6x higher). Call once at start.
void use_predictable_allocator();

}  // namespace favor
