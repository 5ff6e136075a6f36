// `favor run` and `favor validate`: a config with its command-line overrides, planned
// (run_plan.hpp), then run with a journal, progress and stop signals, or only checked.

#include <cmath>
#include <iostream>
#include <limits>

#include "command.hpp"
#include "favor/core/error.hpp"
#include "favor/experiments/cells.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/io/files.hpp"
#include "favor/io/report.hpp"
#include "favor/results/compare.hpp"
#include "favor/runs/run_plan.hpp"
#include "favor/runs/run_session.hpp"
#include "progress.hpp"

namespace favor::cli {
namespace {

// A run estimated above this (an hour on this machine) starts only with --yes (design.md section 4).
constexpr double kConfirmAboveSeconds = 3600.0;

struct RunFlags {
    std::string config;
    Text out, m, num_features, L, trials, seed, dtype, shard, threads, max_memory;
    std::vector<std::string> sets;
    bool quiet = false, resume = false, yes = false;
    double progress_every = 10.0;
};
RunFlags& run_flags() {
    static RunFlags f;
    return f;
}

struct ValidateFlags {
    std::string config;
    std::vector<std::string> sets;
    Text threads, max_memory, shard, m, num_features, L;
};
ValidateFlags& validate_flags() {
    static ValidateFlags f;
    return f;
}

// The command line, shell-quoted, with --resume added: what to run to continue.
std::string resume_command(const std::vector<std::string>& argv) {
    std::string out;
    bool has = false;
    for (const auto& a : argv) {
        has = has || a == "--resume";
        const bool plain = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                             "0123456789_./=:,+-@%") == std::string::npos;
        std::string q = "'";
        for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        out += (out.empty() ? "" : " ") + (plain ? a : q + "'");
    }
    return has ? out : out + " --resume";
}

// The summary as printed on the terminal: keys and means (summary.md has std and sem too).
Table means_only(const Table& t) {
    auto keep = [](const std::string& c) {
        const auto n = c.size();
        return !((n > 4 && c.compare(n - 4, 4, "_std") == 0) || (n > 4 && c.compare(n - 4, 4, "_sem") == 0) ||
                 c == "nonfinite_mean" || c == "mse_sem");
    };
    Table out;
    std::vector<std::size_t> cols;
    for (std::size_t i = 0; i < t.columns.size(); ++i)
        if (keep(t.columns[i])) cols.push_back(i), out.columns.push_back(t.columns[i]);
    for (const auto& r : t.rows) {
        std::vector<std::string> row;
        for (std::size_t i : cols) row.push_back(r[i]);
        out.rows.push_back(std::move(row));
    }
    return out;
}

// A run stopped by a signal: what was kept and how to continue. Returns 128 + the signal.
int report_stop(const RunOutcome& o, const std::vector<std::string>& argv) {
    std::cerr << "favor: " << stop_report(o) << "\nfavor: continue with: " << resume_command(argv) << "\n";
    return 128 + o.signal;
}

}  // namespace

void setup_run(CLI::App& run) {
    RunFlags& rf = run_flags();
    run.add_option("config", rf.config, "experiment config (JSON)")->required();
    bind(run, rf.out, "--out",
         "output directory (default: the config's output_dir; a relative path in the config file is taken from the "
         "file's folder, a relative --out or --set path from the working directory)");
    run.add_option("--set", rf.sets, "override a config value: PATH=VALUE, e.g. inputs.scale=0.5 (repeatable)");
    bind(run, {
        {&rf.m, "--m", "numbers of random features, e.g. 16,32,64"},
        {&rf.num_features, "--num-features", "feature columns per variant instead of m (equal budgets), e.g. 64,128"},
        {&rf.L, "--L", "sequence lengths, e.g. 1024,4096"},
        {&rf.trials, "--trials", "trials per cell"},
        {&rf.seed, "--seed", "master seed"},
        {&rf.dtype, "--dtype", "compute precision: float32, float64, float16 or bfloat16 (emulated)"},
        {&rf.shard, "--shard", "run share K of N of the cells (0 <= K < N), e.g. 0/4"},
        {&rf.threads, "--threads", "threads (default: all cores); results do not depend on it"},
        {&rf.max_memory, "--max-memory", "memory the run may use, e.g. 8G (default: what the system has available)"},
    });
    run.add_flag("--quiet", rf.quiet, "print nothing but errors (no progress)");
    run.add_flag("--resume", rf.resume, "continue an interrupted run from OUT/journal.jsonl (same config and shard)");
    run.add_flag("--yes", rf.yes, "start a run estimated at over an hour (refused without it)");
    run.add_option("--progress-every", rf.progress_every,
                   "seconds between progress lines when stderr is not a terminal (default 10)");
}

int run_run(const std::vector<std::string>& argv) {
    const RunFlags& f = run_flags();
    if (!(f.progress_every > 0) || !std::isfinite(f.progress_every))
        throw Error("--progress-every: must be a number of seconds > 0");
    RunRequest req;
    req.source.config = f.config;
    req.out = f.out.get();
    req.m = f.m.get();
    req.num_features = f.num_features.get();
    req.L = f.L.get();
    req.trials = f.trials.get();
    req.seed = f.seed.get();
    req.dtype = f.dtype.get();
    req.shard = f.shard.get();
    req.threads = f.threads.get();
    req.max_memory = f.max_memory.get();
    req.sets = f.sets;
    req.resume = f.resume;
    req.max_estimate_s = f.yes ? 0.0 : kConfirmAboveSeconds;
    Progress progress(f.quiet, f.progress_every);
    RunHooks hooks;
    hooks.warn = warn;
    if (!f.quiet) hooks.note = [](const std::string& line) { std::cerr << "favor: " << line << "\n"; };
    hooks.planned = [&f, &progress](const RunPlan& plan, const MemoryBudget& budget) {
        note_estimate(plan.cost.peak, budget, " on " + std::to_string(plan.threads) + " threads");
        if (!f.quiet) std::cerr << "favor: " << estimate_line(plan, budget) << "\n";
        progress.set_threads(plan.threads);
    };
    hooks.progress = [&progress](std::size_t d, std::size_t t) { progress.update(d, t); };
    hooks.start = [&progress] { progress.start(); };
    hooks.finish = [&progress] { progress.finish(); };
    const RunOutcome o = run_session(req, hooks);
    if (!o.result.complete) return report_stop(o, argv);
    const RunResult& r = o.result;
    if (!f.quiet) {
        std::cout << to_markdown(r.timing.columns.empty() ? means_only(r.summary) : r.timing);
        if (!r.notes_md.empty()) std::cout << "\n" << r.notes_md;
        // The directory as an absolute path (docs/design.md section 5, "Paths").
        std::cout << "\nwrote " << absolute_dir(o.out) << "/ in " << r.info.value("wall_seconds", 0.0) << " s\n";
    }
    return 0;
}

void setup_validate(CLI::App& validate) {
    ValidateFlags& vf = validate_flags();
    validate.add_option("config", vf.config, "experiment config (JSON)")->required();
    validate.add_option("--set", vf.sets, "override a config value: PATH=VALUE");
    bind(validate, {
        {&vf.threads, "--threads", "threads the estimate assumes (default: all cores)"},
        {&vf.max_memory, "--max-memory", "memory budget for the check, e.g. 8G"},
        {&vf.shard, "--shard", "estimate for share K of N of the cells"},
        {&vf.m, "--m", "numbers of random features, as run's --m"},
        {&vf.num_features, "--num-features", "feature columns per variant instead of m, as run's --num-features"},
        {&vf.L, "--L", "sequence lengths, as run's --L"},
    });
}

int run_validate(const std::vector<std::string>&) {
    const ValidateFlags& f = validate_flags();
    const ValidateReport v = validate_session({{f.config, {}}, f.sets, f.threads.get(), f.max_memory.get(), f.shard.get(),
                                               f.m.get(), f.num_features.get(), f.L.get()});
    for (const auto& w : v.warnings) warn(w);
    std::cout << v.text;
    return 0;
}

}  // namespace favor::cli
