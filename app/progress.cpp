// The progress reporter of `favor run` and `favor compare` (progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "favor/core/stop_signals.hpp"

namespace favor::cli {
namespace {

std::string duration(double s) {
    char buf[32];
    const long t = long(s + 0.5);
    if (t < 60) std::snprintf(buf, sizeof buf, "%lds", t);
    else if (t < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    return buf;
}

// The wait between lines, clamped to [10 ms, a year] before it becomes clock ticks: 1e10 s
// (meant as "never") would overflow steady_clock's nanoseconds and the wait return at once,
// spinning with the lock the workers need; 1e-300 s would flood the log.
std::chrono::milliseconds wait_step(double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(std::clamp(seconds, 0.01, 3.16e7) * 1000.0));
}

}  // namespace

Progress::Progress(bool quiet, double every, std::string unit) : every_(every), unit_(std::move(unit)) {
    if (!quiet) mode_ = ::isatty(STDERR_FILENO) ? Mode::bar : Mode::lines;
}

void Progress::update(std::size_t done, std::size_t total) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!seen_) base_ = done, seen_ = true;
    done_ = std::max(done_, done), total_ = total;
}

void Progress::start() { thread_ = std::thread([this] { loop(); }); }

void Progress::finish() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    if (printed_ && mode_ == Mode::bar) std::fputc('\n', stderr);
}

// Wakes every 0.1 s at most (to answer a stop signal at once); prints every `step`.
void Progress::loop() {
    const auto step = mode_ == Mode::bar ? std::chrono::milliseconds(250) : wait_step(every_);
    const auto poll = std::min<std::chrono::milliseconds>(step, std::chrono::milliseconds(100));
    auto next = std::chrono::steady_clock::now() + step;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, poll, [this] { return stop_; })) {
        const auto now = std::chrono::steady_clock::now();
        const double el = std::chrono::duration<double>(now - start_).count();
        if (const int sig = stop_signal(); sig != 0 && !told_stop_) tell_stop(sig, el);
        if (mode_ == Mode::off || now < next) continue;
        next = now + step;
        if ((mode_ == Mode::bar && el < 1.0) || !seen_) continue;   // nothing to say yet
        print(el);
    }
}

// The answer to a first SIGINT / SIGTERM, under the lock: the run finishes the cell trials in
// flight (at most one per thread), each about the mean time per trial and thread so far.
void Progress::tell_stop(int sig, double el) {
    told_stop_ = true;
    const std::size_t fresh = done_ - base_, left = total_ - done_;
    const std::size_t flight = std::min<std::size_t>(left, std::size_t(std::max(threads_, 1)));
    const std::string wait = fresh ? "~" + duration(el * double(std::max(threads_, 1)) / double(fresh)) + " at most"
                                   : "time unknown: none has finished yet";
    std::fprintf(stderr, "%s[favor] %s: finishing the %zu cell trial(s) in flight (%s), then keeping the %zu done in "
                 "the journal; %s again stops now\n", mode_ == Mode::bar && printed_ ? "\n" : "",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", flight, wait.c_str(), done_,
                 sig == SIGTERM ? "SIGTERM" : "Ctrl-C");
    std::fflush(stderr);
}

// One bar redraw or one line, under the lock.
void Progress::print(double el) {
    const std::size_t fresh = done_ - base_, left = total_ - done_;
    const std::string eta = fresh ? "~" + duration(el * double(left) / double(fresh)) + " left" : "time left unknown";
    const double frac = total_ ? double(done_) / double(total_) : 0.0;
    if (mode_ == Mode::bar) {
        const int width = 24, fill = int(frac * width);
        std::fprintf(stderr, "\r[favor] [%s%s] %zu/%zu %s  %s elapsed  %s\033[K",
                     std::string(std::size_t(fill), '#').c_str(), std::string(std::size_t(width - fill), '.').c_str(),
                     done_, total_, unit_.c_str(), duration(el).c_str(), eta.c_str());
    } else {
        std::fprintf(stderr, "[favor] %zu/%zu %s done (%.0f%%), %s elapsed, %s\n", done_, total_, unit_.c_str(),
                     100.0 * frac, duration(el).c_str(), eta.c_str());
    }
    std::fflush(stderr);
    printed_ = true;
}

}  // namespace favor::cli
