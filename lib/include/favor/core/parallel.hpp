#pragma once
// parallel_for over independent indices. Each index writes its own slot, so results do not
// depend on the thread count or on which thread ran which index.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <memory>
#include <type_traits>
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

namespace detail {
// One parallel_for call: indices are claimed with `next`; `active` counts the helpers inside
// run(). The caller runs it too, so it never waits for a helper that has not started.
struct Job {
    std::atomic<std::size_t> next{0};
    std::size_t n = 0;
    void (*call)(void*, std::size_t) = nullptr;   // f(i), f on the caller's stack
    void* f = nullptr;
    std::atomic<std::size_t> active{0};
    std::mutex mu;
    std::condition_variable done;
    std::exception_ptr error;
    // Claims and runs indices until none is left; the first exception stops the others.
    void run() {
        for (std::size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                call(f, i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!error) error = std::current_exception();
                next = n;
            }
        }
    }
};

// Threads kept for the whole process (never destroyed: they wait on a condition variable
// when idle, and exit with the process). Persistent workers keep their thread_local scratch
// (favor_forward.cpp, causal_linear.cpp) across calls, and a call does not pay for starting threads.
class ThreadPool {
public:
    static ThreadPool& get() {
        static ThreadPool* pool = new ThreadPool();   // leaked on purpose: see above
        return *pool;
    }
    // Offers `job` to `helpers` threads, starting threads up to that many idle ones (fewer
    // if the system refuses: the caller does the rest of the work itself).
    void offer(const std::shared_ptr<Job>& job, std::size_t helpers) {
        std::lock_guard<std::mutex> lock(mu_);
        for (std::size_t k = 0; k < helpers; ++k) queue_.push_back(job);
        while (idle_ < queue_.size() && threads_ < std::size_t(max_workers())) {
            try {
                std::thread([this] { loop(); }).detach();
            } catch (...) {   // std::system_error (EAGAIN), or bad_alloc for its state
                break;
            }
            ++threads_;
            ++idle_;
        }
        // One wake-up per offered place: waking every idle thread for one helper's place
        // costs each of them a context switch on a machine with as many cores as threads.
        for (std::size_t k = 0; k < helpers; ++k) ready_.notify_one();
    }
    // Takes back the places of `job` no thread has taken yet (its caller has claimed every
    // index: a thread that took the place now would only find none left). Without this, a
    // busy machine leaves stale places in the queue, each counted against the idle threads,
    // and the next offer starts threads the work never needed.
    void withdraw(const Job* job) {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                    [job](const std::shared_ptr<Job>& j) { return j.get() == job; }),
                     queue_.end());
    }

    // Threads started so far (they are never destroyed).
    std::size_t threads() {
        std::lock_guard<std::mutex> lock(mu_);
        return threads_;
    }

private:
    static int max_workers();
    void loop() {
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            ready_.wait(lock, [this] { return !queue_.empty(); });
            std::shared_ptr<Job> job = std::move(queue_.front());
            queue_.pop_front();
            --idle_;
            job->active.fetch_add(1);   // under the lock: a caller past withdraw() waits for this thread
            lock.unlock();
            job->run();
            // Idle again before the caller can see the job done: its next offer then counts
            // this thread instead of starting another (the thread looks at the queue before
            // it sleeps, so it takes that offer).
            lock.lock();
            ++idle_;
            lock.unlock();
            if (job->active.fetch_sub(1) == 1) {
                std::lock_guard<std::mutex> done(job->mu);
                job->done.notify_all();
            }
            job.reset();
            lock.lock();
        }
    }
    std::mutex mu_;
    std::condition_variable ready_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::size_t threads_ = 0, idle_ = 0;
};
inline int ThreadPool::max_workers() { return max_threads() - 1; }
}  // namespace detail

// Calls f(i) for i in [0, n) on up to `threads` threads (dynamic scheduling): the calling
// thread and up to threads - 1 threads of a pool kept for the process. The first exception
// thrown by any f is rethrown here after every f that started has returned. Nested calls
// are fine: the caller always works through the indices itself, so it never waits for a
// busy pool.
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
    const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
    if (t <= 1) {
        for (std::size_t i = 0; i < n; ++i) f(i);
        return;
    }
    using Fn = std::remove_reference_t<F>;
    auto job = std::make_shared<detail::Job>();
    job->n = n;
    job->f = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
    job->call = [](void* p, std::size_t i) { (*static_cast<Fn*>(p))(i); };
    detail::ThreadPool::get().offer(job, t - 1);
    job->run();
    detail::ThreadPool::get().withdraw(job.get());
    {   // a helper that took the job after the last index was claimed never calls f
        std::unique_lock<std::mutex> lock(job->mu);
        job->done.wait(lock, [&] { return job->active.load() == 0; });
    }
    if (job->error) std::rethrow_exception(job->error);
}

// The least work (flops) per thread of one parallel region worth waking a pool thread for:
// handing indices to a sleeping pool thread and joining it cost 10-25 us on the 2-core VM
// (docs/speed.md, "Fixed costs at small L"), the time of ~2 MFLOP of tile-kernel products.
constexpr double kParallelMinFlops = double(std::size_t(1) << 21);

// Threads for a region of `flops` work: one per kParallelMinFlops, at least 1, at most
// `threads`. Results never depend on the thread count, so neither do they on this.
inline int threads_for(double flops, int threads) {
    const double t = std::floor(flops / kParallelMinFlops);
    return t >= double(threads) ? threads : std::max(1, int(t));
}

}  // namespace favor
