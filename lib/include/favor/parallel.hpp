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

// Number of threads to use: n > 0 as given, otherwise the hardware concurrency.
inline int resolve_threads(int n) {
    if (n > 0) return n;
    return std::max(1u, std::thread::hardware_concurrency());
}

// Calls f(i) for i in [0, n) on up to `threads` threads (dynamic scheduling). The first
// exception thrown by any f is rethrown here after all threads have stopped.
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
    const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
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
    std::vector<std::thread> pool;
    for (std::size_t k = 1; k < t; ++k) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace favor
