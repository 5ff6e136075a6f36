// `favor run` and `favor validate`: a config with its command-line overrides, planned
// (run_plan.hpp), then run with a journal, progress and stop signals, or only checked.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>

#include "command.hpp"
#include "favor/cells.hpp"
#include "favor/compare.hpp"
#include "favor/error.hpp"
#include "favor/experiment.hpp"
#include "favor/journal.hpp"
#include "favor/report.hpp"
#include "favor/result_dir.hpp"
#include "favor/run_plan.hpp"
#include "favor/stop_signals.hpp"
#include "favor/tensor_file.hpp"
#include "progress.hpp"

namespace favor::cli {
namespace {

struct RunFlags {
    std::string config;
    Text out, m, num_features, L, trials, seed, dtype, shard, threads, max_memory;
    std::vector<std::string> sets;
    bool quiet = false, resume = false;
    double progress_every = 10.0;
};
RunFlags& run_flags() {
    static RunFlags f;
    return f;
}

struct ValidateFlags {
    std::string config;
    std::vector<std::string> sets;
    Text threads, max_memory, shard;
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

// The flag overrides, typed, applied after the user's own --set; each flag's value is checked
// whole here, so errors name the flag.
ConfigOverrides overrides(const RunFlags& f) {
    constexpr std::uint64_t u64 = std::numeric_limits<std::uint64_t>::max();
    ConfigOverrides o;
    o.sets = f.sets;
    // --m and --num-features replace the budget axis: each removes the other key.
    if (f.m && f.num_features) throw Error("run: --m and --num-features: give one (the grid is over m or over feature columns)");
    if (f.m) o.m = parse_uint_list_text("run: --m", *f.m, 1, kMaxM);
    if (f.num_features) o.num_features = parse_uint_list_text("run: --num-features", *f.num_features, 1, 2 * kMaxM);
    if (f.L) o.L = parse_uint_list_text("run: --L", *f.L, 1, kMaxL);
    if (f.trials) o.trials = parse_uint_text("run: --trials", *f.trials, 1, kMaxTrials);
    if (f.seed) o.seed = parse_uint_text("run: --seed", *f.seed, 0, u64);
    if (f.dtype) o.dtype = parse_dtype(*f.dtype, Field{"run", "", "--"}.at("dtype"));
    return o;
}

std::string seconds_text(double s) {
    char b[32];
    if (s < 1) return "under a second";
    if (s < 120) std::snprintf(b, sizeof b, "about %.2g s", s);
    else if (s < 7200) std::snprintf(b, sizeof b, "about %.2g min", s / 60);
    else std::snprintf(b, sizeof b, "about %.2g h", s / 3600);
    return b;
}

// The journal of a run that is not a timing run, announced on stderr as it is opened.
std::unique_ptr<Journal> open_journal(const Config& cfg, const Shard& shard, const RunFlags& f, OutputDir& dir,
                                      const std::string& out) {
    if (cfg.experiment == ExperimentKind::timing) {
        if (f.resume) throw Error("--resume: timing runs keep no journal (their times are not reproducible); rerun without it");
        return nullptr;
    }
    auto journal = std::make_unique<Journal>(dir.file("journal.jsonl"), run_identity(cfg, shard), f.resume,
                                             [&dir] { dir.ensure_exists(); });
    if (!f.quiet && f.resume)
        std::cerr << "favor: " << (journal->loaded() ? "resuming: " + std::to_string(journal->loaded()) +
                                                           " finished cell trials in " + out + "/journal.jsonl"
                                                     : "nothing to resume in " + out + ": starting from the beginning")
                  << "\n";
    else if (!f.quiet && journal->existed())
        std::cerr << "favor: " << out << "/journal.jsonl of an interrupted run will be replaced "
                  << "(stop now and add --resume to continue it instead)\n";
    return journal;
}

// A run stopped by a signal: what was kept and how to continue. Returns 128 + the signal.
int report_stop(const RunResult& r, const std::string& out, const std::vector<std::string>& argv) {
    const int sig = stop_signal() ? stop_signal() : SIGTERM;
    std::cerr << "favor: stopped by " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " after " << r.items_done << " of "
              << r.items_total << " cell trials; "
              << (r.items_done ? "they are kept in " + out + "/journal.jsonl" : std::string("nothing to keep"))
              << " (earlier results in " << out << "/ are untouched)\nfavor: continue with: " << resume_command(argv)
              << "\n";
    return 128 + sig;
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
    run.add_option("--progress-every", rf.progress_every,
                   "seconds between progress lines when stderr is not a terminal (default 10)");
}

int run_run(const std::vector<std::string>& argv) {
    const RunFlags& f = run_flags();
    if (!(f.progress_every > 0) || !std::isfinite(f.progress_every))
        throw Error("--progress-every: must be a number of seconds > 0");
    if (f.out && f.out->empty()) throw Error("run: --out: empty value (expected a directory)");
    const Config cfg = load_config(f.config, overrides(f));
    const std::string out = f.out ? *f.out : cfg.output_dir;
    RunOptions opt;
    if (f.shard) opt.shard = parse_shard(*f.shard);
    const int requested = threads_of("run", f.threads);
    const MemoryBudget budget = budget_of("run", f.max_memory);
    const std::optional<QkvShapes> shapes = npy_shapes(cfg);
    const RunPlan plan = plan_run(cfg, requested, opt.shard, shapes ? &*shapes : nullptr, budget);
    opt.threads = plan.threads;
    if (shapes)
        for (const auto& w : shapes->warnings) warn(w);
    OutputDir dir(out);   // before any work: a bad or busy --out fails at once
    if (cfg.inputs.npy())
        for (const auto& [key, spec] : {std::pair{"q", &cfg.inputs.q}, {"k", &cfg.inputs.k}, {"v", &cfg.inputs.v}})
            dir.refuse_inside(parse_tensor_ref(*spec, key).path, cfg.file + ": inputs." + key);
    for (const auto& w : plan.warnings) warn(w);
    note_estimate(plan.cost.peak, budget, " on " + std::to_string(opt.threads) + " threads");
    const std::unique_ptr<Journal> journal = open_journal(cfg, opt.shard, f, dir, out);
    if (journal) opt.journal = journal.get(), opt.stop = &install_stop_handlers();
    Progress progress(f.quiet, f.progress_every);
    opt.progress = [&progress](std::size_t d, std::size_t t) { progress.update(d, t); };
    progress.start();
    const RunResult r = run_experiment(cfg, opt);
    progress.finish();
    if (!r.complete) {
        journal->sync();
        return report_stop(r, absolute_dir(out), argv);
    }
    write_results(r, dir);
    if (!f.quiet) {
        std::cout << to_markdown(r.timing.columns.empty() ? means_only(r.summary) : r.timing);
        if (!r.notes_md.empty()) std::cout << "\n" << r.notes_md;
        // The directory as an absolute path (docs/design.md section 5, "Paths").
        std::cout << "\nwrote " << absolute_dir(out) << "/ in " << r.info.value("wall_seconds", 0.0) << " s\n";
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
    });
}

int run_validate(const std::vector<std::string>&) {
    const ValidateFlags& f = validate_flags();
    const Config cfg = load_config(f.config, f.sets);
    Shard shard;
    if (f.shard) shard = parse_shard(*f.shard);
    const std::optional<QkvShapes> shapes = npy_shapes(cfg);   // the files exist, headers and shapes fit
    const std::size_t cells = config_cells(cfg);
    const MemoryBudget budget = budget_of("validate", f.max_memory);
    const RunPlan plan = plan_run(cfg, threads_of("validate", f.threads), shard, shapes ? &*shapes : nullptr, budget);
    for (const auto& w : plan.warnings) warn(w);
    if (shapes)
        for (const auto& w : shapes->warnings) warn(w);
    if (cfg.experiment == ExperimentKind::approximation && !cfg.variants.empty()) {
        const std::string w = compare_power_warning(cells / cfg.variants.size(), cfg.variants.size(), cfg.trials);
        if (!w.empty()) warn("validate: " + w);
    }
    std::cout << cfg.resolved().dump(2) << "\n";
    if (shapes)
        std::cout << "inputs: " << shapes->heads << " head(s) of L = " << shapes->L << ", Lk = " << shapes->Lk
                  << ", d = " << shapes->d << ", d_v = " << shapes->dv << "\n";
    std::cout << "estimate: peak memory " << plan.cost.summary() << ", " << seconds_text(plan.cost.seconds) << " on "
              << plan.threads << " thread(s); budget " << format_bytes(double(budget.bytes)) << " (" << budget.source
              << ")\n";
    std::cout << "output directory: " << absolute_dir(cfg.output_dir) << "/\n";
    std::cout << f.config << ": ok, " << cells << " cells x "
              << (cfg.input_seeds_set() ? std::to_string(cfg.input_seeds.size()) + " input seeds x " : "") << cfg.trials
              << " trials\n";
    return 0;
}

}  // namespace favor::cli
