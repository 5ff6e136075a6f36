#pragma once
// `favor run`, `favor validate` and `favor compare` as a whole, shared by the CLI
// (app/run_commands.cpp, app/result_commands.cpp) and the Python module: the flags as typed
// (each value parsed whole, errors naming the flag), the config with its overrides, the plan
// (threads, memory estimate), the output directory claimed before any work, the journal, the
// stop signals (stop_signals.hpp) and the result set written whole (result_dir.hpp).
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "favor/experiments/config.hpp"
#include "favor/experiments/run_result.hpp"
#include "favor/results/compare.hpp"
#include "favor/runs/run_plan.hpp"

namespace favor {

// The config: a file, or (text set) a config's JSON text named `config` in messages.
struct ConfigSource {
    std::string config;
    std::optional<std::string> text;
};

// `favor run` as typed; absent flags are nullopt.
struct RunRequest {
    ConfigSource source;
    std::optional<std::string> out, m, num_features, L, trials, seed, dtype, shard, threads, max_memory;
    std::vector<std::string> sets;   // --set PATH=VALUE
    bool resume = false;
    // Refuse a run estimated (RunPlan::cost.seconds) above this many seconds, before anything
    // is written (the CLI: an hour unless --yes); 0: no limit (the Python module).
    double max_estimate_s = 0;
};

// What a run tells its caller as it goes. `warn`, `note`: lines for the user (a lowered
// thread count; the journal resumed or replaced). `planned`: the plan, before any work.
struct RunHooks {
    std::function<void(const std::string&)> warn, note;
    std::function<void(const RunPlan&, const MemoryBudget&)> planned;
    std::function<void(std::size_t, std::size_t)> progress;   // RunOptions::progress
    std::function<void()> start, finish;                       // around the experiment itself
};

struct RunOutcome {
    RunResult result;   // incomplete (no tables) when a signal stopped it
    std::string out;    // the output directory as given
    int signal = 0;     // SIGINT or SIGTERM when stopped; the journal keeps the finished items
};

// Loads and plans the run, claims OUT, runs it with SIGINT / SIGTERM handlers installed for its
// duration (the previous handlers restored after), and writes the result set unless stopped.
// Throws Error for bad input, before anything is written.
RunOutcome run_session(const RunRequest& r, const RunHooks& h);

// "stopped by SIGINT after 3 of 8 cell trials; they are kept in OUT/journal.jsonl (earlier
// results in OUT/ are untouched)".
std::string stop_report(const RunOutcome& o);

// `favor validate` as typed.
struct ValidateRequest {
    ConfigSource source;
    std::vector<std::string> sets;
    std::optional<std::string> threads, max_memory, shard;
    std::optional<std::string> m, num_features, L;   // as run's --m, --num-features, --L
};
struct ValidateReport {
    Config config;
    std::optional<QkvShapes> shapes;   // npy inputs
    std::size_t cells = 0;
    RunPlan plan;                      // threads and the cost estimate (plan.warnings included)
    MemoryBudget budget;
    std::vector<std::string> warnings; // the plan's, then the comparison-power warning
    std::string text;                  // what `favor validate` prints on stdout
};
ValidateReport validate_session(const ValidateRequest& r);

// "estimate: peak memory X (parts), about T s on N thread(s); budget B (source)": the line
// validate prints and run prints on stderr as it starts.
std::string estimate_line(const RunPlan& plan, const MemoryBudget& budget);
// "about 3 s", "about 12 min", "about 2.5 h", "under a second": a rough duration.
std::string seconds_text(double s);

// `favor compare DIR` as typed: the options checked; with `write`, DIR locked against a run
// replacing it and each metric's comparisons_<metric>.csv and ranking_<metric>.csv written.
struct CompareRequest {
    std::string dir;
    std::vector<std::string> metrics;
    std::optional<std::string> alpha, pairs, against, match;
    bool write = true;   // false: the tables are returned only (favor.compare's default)
    std::function<void(std::size_t, std::size_t)> progress{};   // CompareOptions::progress
};
CompareResult compare_session(const CompareRequest& r, CompareOptions* used = nullptr);

// The memory budget of --max-memory SIZE (`cmd: --max-memory` in errors), or what the system offers.
MemoryBudget budget_of_text(const std::string& cmd, const std::optional<std::string>& max_memory);
// --threads N as typed: 0..10^6 (0: all hardware threads).
int threads_of_text(const std::string& cmd, const std::optional<std::string>& threads);

}  // namespace favor
