#pragma once
// Progress of a run on stderr, from a thread of its own, so a log shows it even while long
// cells run. On a terminal: a live bar, redrawn a few times a second once the run takes over a
// second. Otherwise (a log file, Slurm, nohup): one line every `every` seconds. Off with
// --quiet. Whatever the mode, a first SIGINT / SIGTERM (stop_signals.hpp) is answered within
// 0.1 s by one line: what the run waits for, about how long, and that a second signal stops
// it at once. The time left is estimated from the items finished by this process (not those
// resumed). CLI presentation only: the library reports (done, total) through
// RunOptions::progress.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace favor::cli {

class Progress {
public:
    // `unit`: what is counted ("cell trials" for run, "comparisons" for compare).
    Progress(bool quiet, double every, std::string unit = "cell trials");
    ~Progress() { finish(); }
    // Called by the workers: `done` of `total` items finished (the first call sets the base
    // the time left is estimated from).
    void update(std::size_t done, std::size_t total);
    void set_threads(int threads) { threads_ = threads; }   // the run's worker threads (before start)
    void start();    // starts the reporting thread
    void finish();   // stops it; ends a bar's line

private:
    enum class Mode { off, bar, lines };
    Mode mode_ = Mode::off;
    double every_;
    int threads_ = 1;
    bool told_stop_ = false;
    std::string unit_;
    std::size_t done_ = 0, total_ = 0, base_ = 0;
    bool seen_ = false, stop_ = false, printed_ = false;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::thread thread_;
    const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

    void loop();
    void print(double elapsed);
    void tell_stop(int sig, double elapsed);
};

}  // namespace favor::cli
