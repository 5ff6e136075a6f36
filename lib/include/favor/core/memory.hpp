#pragma once
// Resident memory of this process, for the peak_bytes column of timing tables (Linux
// /proc/self/status; 0 where that is not available).
#include <cstddef>

namespace favor {

// Peak resident set size (VmHWM) in bytes since the process started or since the last
// successful reset_peak_rss(); 0 if unknown.
std::size_t peak_rss_bytes();

// Gives freed heap memory back to the system (malloc_trim), then resets the peak RSS to
// the current RSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0). Returns false if
// the reset is not supported; peak_rss_bytes() is then the peak since the start.
bool reset_peak_rss();

}  // namespace favor

namespace favor {

// Asks the kernel to back [p, p + bytes) with transparent huge pages (Linux madvise
// MADV_HUGEPAGE; whole 2 MB pages inside the range only). Call before the first write to a
// large fresh buffer: it cuts the page faults of filling it ~500-fold. No-op elsewhere.
void advise_hugepages(void* p, std::size_t bytes);

// v's storage, grown to at least n elements (never shrunk: scratch a thread keeps across
// calls, so a worker that runs many blocks or cells reuses the same pages).
template <class V>
auto* grown(V& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

}  // namespace favor
