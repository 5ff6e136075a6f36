#pragma once
// What the machine offers a request (docs/limits.md): the memory it may use (/proc/meminfo,
// the cgroup, ulimit -v and -d, or --max-memory), the threads that fit (the sane maximum, and
// under an address-space limit as many as leave room for each thread's buffers), and a
// malloc that returns freed memory. Read from the OS; nothing here knows a config.
#include <cstddef>
#include <optional>
#include <string>

namespace favor {

// The memory a request may use.
struct MemoryBudget {
    std::size_t bytes = 0;
    std::string source;   // "MemAvailable", "cgroup memory.max", "ulimit -v", "--max-memory", ...
};
// --max-memory when given; otherwise the least of what /proc/meminfo (MemAvailable), the
// cgroup (memory.max - memory.current) and the address-space and data limits leave free.
MemoryBudget memory_budget(std::optional<std::size_t> max_memory = std::nullopt);

// The threads to use: `requested` (0: all hardware threads) clamped to max_threads(), and
// under an address-space limit (ulimit -v) to as many as leave room for `data_bytes`, each
// thread needing its stack, its malloc arena and OpenBLAS's buffer in address space. A
// lowered count comes with a one-line warning; Error when not even one thread fits.
struct ThreadPlan {
    int threads = 1;
    std::string warning;   // empty when the request stands
};
ThreadPlan plan_threads(int requested, double data_bytes, const std::string& flag = "--threads");

// Makes malloc return freed large buffers to the system (fixed mmap and trim thresholds
// instead of glibc's adaptive ones), so peak RSS follows the live data the estimates model
// rather than heap fragmentation (up to 6x higher). Call once at start.
void use_predictable_allocator();

}  // namespace favor
