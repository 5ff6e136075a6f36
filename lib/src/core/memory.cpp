#include "favor/core/memory.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace favor {

namespace {
// "<key>:   1234 kB" from /proc/self/status, in bytes.
std::size_t status_bytes(const char* key) {
    std::ifstream in("/proc/self/status");
    const std::string k = std::string(key) + ":";
    for (std::string line; std::getline(in, line);)
        if (line.rfind(k, 0) == 0) return std::stoull(line.substr(k.size())) * 1024;
    return 0;
}
}  // namespace

std::size_t peak_rss_bytes() { return status_bytes("VmHWM"); }

bool reset_peak_rss() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    std::ofstream out("/proc/self/clear_refs");
    if (!out) return false;
    out << "5";
    out.flush();
    return bool(out);
}

void advise_hugepages(void* p, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
    constexpr std::uintptr_t huge = std::uintptr_t(1) << 21;
    if (bytes < 2 * huge) return;
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t b = (a + huge - 1) & ~(huge - 1), e = (a + bytes) & ~(huge - 1);
    if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

}  // namespace favor
