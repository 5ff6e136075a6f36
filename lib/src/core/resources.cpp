// Resource probing (docs/limits.md): the memory and address space the OS leaves this process,
// and the threads that fit in it, each thread taking OpenBLAS's buffer, a malloc arena and
// its stack in address space (the constants below).
#include "favor/core/resources.hpp"

#include <sys/resource.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <thread>

#include "favor/core/byte_sizes.hpp"
#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"

namespace favor {

namespace {

// Address space a thread takes whether touched or not: OpenBLAS's buffer (BUFFER_SIZE,
// 128 MiB in Debian's 0.3.21), glibc's arena reservation (64 MiB); the stack comes on top.
constexpr double kBlasBuffer = 128 * kMiB, kArena = 64 * kMiB;

// "<key>: N kB" lines of /proc files, in bytes; nullopt when absent.
std::optional<double> proc_kb(const std::string& file, const std::string& key) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0) {
            try {
                return std::stod(line.substr(key.size() + 1)) * 1024.0;
            } catch (const std::exception&) {
                return std::nullopt;
            }
        }
    return std::nullopt;
}

std::optional<double> read_number_file(const std::string& path) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word == "max") return std::nullopt;
    try {
        return std::stod(word);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// Free memory under the cgroup limits of this process (v2, then v1), if any.
std::optional<double> cgroup_free() {
    std::ifstream in("/proc/self/cgroup");
    std::optional<double> best;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("0::", 0) == 0) {   // v2: this group and its parents
            for (std::string p = line.substr(3);; p = p.substr(0, p.rfind('/'))) {
                const std::string dir = "/sys/fs/cgroup" + (p == "/" ? std::string() : p);
                const auto max = read_number_file(dir + "/memory.max");
                const auto cur = read_number_file(dir + "/memory.current");
                if (max && cur) best = std::min(best.value_or(INFINITY), std::max(0.0, *max - *cur));
                if (p.empty() || p == "/" || p.rfind('/') == std::string::npos) break;
            }
        }
    }
    if (!best) {   // v1
        const auto lim = read_number_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        const auto use = read_number_file("/sys/fs/cgroup/memory/memory.usage_in_bytes");
        if (lim && use && *lim < 1e18) best = std::max(0.0, *lim - *use);
    }
    return best;
}

std::optional<double> rlimit_bytes(int which) {
    struct rlimit r {};
    if (::getrlimit(which, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
    return double(r.rlim_cur);
}

double stack_bytes() {
    const auto s = rlimit_bytes(RLIMIT_STACK);
    return s ? std::min(*s, 64 * kMiB) : 8 * kMiB;
}

}  // namespace

MemoryBudget memory_budget(std::optional<std::size_t> max_memory) {
    if (max_memory) return {*max_memory, "--max-memory"};
    MemoryBudget b{std::numeric_limits<std::size_t>::max(), "no limit found"};
    auto offer = [&](std::optional<double> v, const char* source) {
        if (v && *v < double(b.bytes)) b = {std::size_t(std::max(0.0, *v)), source};
    };
    offer(proc_kb("/proc/meminfo", "MemAvailable"), "MemAvailable in /proc/meminfo");
    offer(cgroup_free(), "the cgroup's memory.max");
    const auto vm = proc_kb("/proc/self/status", "VmSize").value_or(0);
    if (const auto as = rlimit_bytes(RLIMIT_AS)) offer(*as - vm - kBlasBuffer - kArena, "the address-space limit (ulimit -v)");
    const auto data = proc_kb("/proc/self/status", "VmData").value_or(0);
    if (const auto dl = rlimit_bytes(RLIMIT_DATA)) offer(*dl - data - kBlasBuffer - kArena, "the data limit (ulimit -d)");
    return b;
}

ThreadPlan plan_threads(int requested, double data_bytes, const std::string& flag) {
    ThreadPlan p;
    const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    p.threads = requested > 0 ? requested : hw;
    if (p.threads > max_threads()) {
        p.warning = flag + " " + std::to_string(requested) + " is more than the " + std::to_string(max_threads()) +
                    " threads that can help here (4 per hardware thread, " + std::to_string(hw) + " hardware threads)";
        p.threads = max_threads();
    }
    // Under ulimit -v (or -d), a thread that cannot get OpenBLAS's buffer makes OpenBLAS retry
    // for ever: start only as many as the address space (data segment) holds.
    struct Limit {
        int which;
        const char* status_key;
        const char* name;
    };
    for (const Limit l : {Limit{RLIMIT_AS, "VmSize", "the address-space limit (ulimit -v"},
                          Limit{RLIMIT_DATA, "VmData", "the data limit (ulimit -d"}}) {
        const auto lim = rlimit_bytes(l.which);
        if (!lim) continue;
        const double used = proc_kb("/proc/self/status", l.status_key).value_or(0);
        const double per_thread = kBlasBuffer + kArena + stack_bytes();
        const double room = *lim - used - kBlasBuffer - data_bytes;   // the main thread's buffer, the data
        if (room < 0)
            throw Error(flag + ": " + l.name + " " + format_bytes(*lim) + ") leaves no room: " + format_bytes(used) +
                        " in use, OpenBLAS needs " + format_bytes(kBlasBuffer) + " per thread, the data an estimated " +
                        format_bytes(data_bytes));
        const int fit = 1 + int(std::min(room / per_thread, 1e6));
        if (fit < p.threads) {
            p.warning = (p.warning.empty() ? flag + " " + std::to_string(p.threads) : p.warning + ", and " + std::to_string(p.threads)) +
                        " does not fit " + l.name + " " + format_bytes(*lim) + "; a thread needs about " +
                        format_bytes(per_thread) + " of address space for OpenBLAS's buffer, its stack and its malloc arena)";
            p.threads = fit;
        }
    }
    if (!p.warning.empty()) p.warning += "; using " + std::to_string(p.threads);
    return p;
}

void use_predictable_allocator() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 16 * 1024 * 1024);
#endif
}

}  // namespace favor
