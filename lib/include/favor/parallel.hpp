#pragma once
// parallel_for over independent indices. Each index writes its own slot, so results do not
// depend on the thread count or on which thread ran which index.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace favor {

// The most threads favor starts: 4 per hardware thread (more cannot run faster, they only
// hold more memory). The CLI clamps --threads to it with a warning.
inline int max_threads() {
    return int(std::min(4u * std::max(1u, std::thread::hardware_concurrency()), 4096u));
}

// Number of threads to use: n > 0 as given (at most max_threads()), otherwise the hardware
// concurrency.
inline int resolve_threads(int n) {
    if (n > 0) return std::min(n, max_threads());
    return std::max(1u, std::thread::hardware_concurrency());
}

// Calls f(i) for i in [0, n) on up to `threads` threads (dynamic scheduling). The first
// exception thrown by any f is rethrown here after all threads have stopped.
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
    std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
    if (t <= 1) {
        for (std::size_t i = 0; i < n; ++i) f(i);
        return;
    }
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
        for (std::size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                f(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
                next = n;
            }
        }
    };
    // When a thread cannot be created (a process or address-space limit), go on with those
    // that were: the work is shared dynamically, so fewer threads only take longer.
    std::vector<std::thread> pool;
    try {
        pool.reserve(t - 1);
    } catch (...) {
        t = 1;
    }
    for (std::size_t k = 1; k < t; ++k) {
        try {
            pool.emplace_back(worker);
        } catch (...) {   // std::system_error (EAGAIN), or bad_alloc for its state
            break;
        }
    }
    worker();
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace favor
