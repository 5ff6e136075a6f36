// `favor run`, `favor validate` and `favor compare` as a whole (run_session.hpp).
#include "favor/runs/run_session.hpp"

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <sstream>

#include "favor/core/byte_sizes.hpp"
#include "favor/core/error.hpp"
#include "favor/core/flag_values.hpp"
#include "favor/core/stop_signals.hpp"
#include "favor/experiments/cells.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/journal.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/experiments/run_inputs.hpp"
#include "favor/io/files.hpp"
#include "favor/io/tensor_io.hpp"

namespace favor {

MemoryBudget budget_of_text(const std::string& cmd, const std::optional<std::string>& max_memory) {
    if (max_memory) return memory_budget(parse_size_text(cmd + ": --max-memory", *max_memory));
    return memory_budget();
}

int threads_of_text(const std::string& cmd, const std::optional<std::string>& t) {
    return t ? int(parse_uint_text(cmd + ": --threads", *t, 0, 1000000)) : 0;
}

namespace {

Config load_source(const ConfigSource& s, const ConfigOverrides& o) {
    return s.text ? load_config_text(*s.text, s.config, o) : load_config(s.config, o);
}

using Flag = std::optional<std::string>;

// The grid flags' overrides, typed, applied after the user's own --set; each flag's value is
// checked whole here, so errors name the command and the flag. validate takes --m,
// --num-features and --L as run does (trials, seed, dtype: run only).
ConfigOverrides overrides(const std::string& cmd, const std::vector<std::string>& sets, const Flag& m,
                          const Flag& num_features, const Flag& L, const Flag& trials = {}, const Flag& seed = {},
                          const Flag& dtype = {}) {
    constexpr std::uint64_t u64 = std::numeric_limits<std::uint64_t>::max();
    ConfigOverrides o;
    o.sets = sets;
    // --m and --num-features replace the budget axis: each removes the other key.
    if (m && num_features)
        throw Error(cmd + ": --m and --num-features: give one (the grid is over m or over feature columns)");
    if (m) o.m = parse_uint_list_text(cmd + ": --m", *m, 1, kMaxM);
    if (num_features) o.num_features = parse_uint_list_text(cmd + ": --num-features", *num_features, 1, 2 * kMaxM);
    if (L) o.L = parse_uint_list_text(cmd + ": --L", *L, 1, kMaxL);
    if (trials) o.trials = parse_uint_text(cmd + ": --trials", *trials, 1, kMaxTrials);
    if (seed) o.seed = parse_uint_text(cmd + ": --seed", *seed, 0, u64);
    if (dtype) o.dtype = parse_dtype(*dtype, Field{cmd, "", "--"}.at("dtype"));
    return o;
}

// The map's size limits at the tensor files' sizes (nystrom: m <= L), checked again when the
// files are read (approximation.cpp): here before any work or output, as validate does.
void check_npy_sizes(const Config& cfg, const std::optional<QkvShapes>& s) {
    if (!s) return;
    const bool all = cfg.inputs.L.empty();
    const std::size_t L = all ? s->L : cfg.inputs.L.front();   // the keys as the run keeps them (key_rows)
    check_map_sizes(cfg, s->d, L, all ? s->Lk : key_rows(s->file_L, s->file_Lk, L), weight_heads(s->lead));
    if (!all)   // the largest L too (a window-only hybrid's rows past Lk + w - 1: 2.8)
        check_map_sizes(cfg, s->d, cfg.inputs.L.back(), key_rows(s->file_L, s->file_Lk, cfg.inputs.L.back()), weight_heads(s->lead));
}

// Refuses a run whose estimate passes `limit` seconds (0: none), before anything is written.
void check_estimate_limit(const RunPlan& plan, double limit) {
    if (limit <= 0 || !(plan.cost.seconds > limit)) return;
    throw Error("run: --yes: the run is estimated at " + seconds_text(plan.cost.seconds) + " on " +
                std::to_string(plan.threads) + " thread(s), above the limit of " + std::to_string(long(limit)) +
                " s (favor validate shows the estimate); add --yes to start it, or lower trials, m or inputs.L");
}

// The journal of a run that is not a timing run, announced (h.note) as it is opened.
std::unique_ptr<Journal> open_journal(const Config& cfg, const Shard& shard, const RunRequest& f, OutputDir& dir,
                                      const std::string& out, const RunHooks& h) {
    if (cfg.experiment == ExperimentKind::timing) {
        if (f.resume) throw Error("--resume: timing runs keep no journal (their times are not reproducible); rerun without it");
        return nullptr;
    }
    auto journal = std::make_unique<Journal>(dir.file("journal.jsonl"), run_identity(cfg, shard), f.resume,
                                             [&dir] { dir.ensure_exists(); });
    if (!h.note) return journal;
    if (f.resume)
        h.note(journal->loaded() ? "resuming: " + std::to_string(journal->loaded()) + " finished cell trials in " + out +
                                       "/journal.jsonl"
                                 : "nothing to resume in " + out + ": starting from the beginning");
    else if (journal->existed())
        h.note(out + "/journal.jsonl of an interrupted run will be replaced (stop now and add --resume to continue it instead)");
    return journal;
}

// The stop handlers for the scope of a run.
struct StopScope {
    const std::atomic<bool>* flag = nullptr;
    void install() { flag = &install_stop_handlers(); }
    ~StopScope() {
        if (flag) restore_stop_handlers();
    }
};

}  // namespace

std::string seconds_text(double s) {
    if (s < 1) return "under a second";
    // Two significant digits, printed without an exponent below 10^6 (110 s, not 1.1e+02 s).
    const auto two = [](double x) {
        const double p = std::pow(10.0, std::floor(std::log10(x)) - 1);
        return std::round(x / p) * p;
    };
    char b[48];
    if (s < 120) std::snprintf(b, sizeof b, "about %g s", two(s));
    else if (s < 7200) std::snprintf(b, sizeof b, "about %g min", two(s / 60));
    else std::snprintf(b, sizeof b, "about %g h", two(s / 3600));
    return b;
}

std::string estimate_line(const RunPlan& plan, const MemoryBudget& budget) {
    return "estimate: peak memory " + plan.cost.summary() + ", " + seconds_text(plan.cost.seconds) + " on " +
           std::to_string(plan.threads) + " thread(s); budget " + format_bytes(double(budget.bytes)) + " (" +
           budget.source + ")";
}

RunOutcome run_session(const RunRequest& f, const RunHooks& h) {
    if (f.out && f.out->empty()) throw Error("run: --out: empty value (expected a directory)");
    const Config cfg =
        load_source(f.source, overrides("run", f.sets, f.m, f.num_features, f.L, f.trials, f.seed, f.dtype));
    RunOutcome o;
    o.out = f.out ? *f.out : cfg.output_dir;
    RunOptions opt;
    if (f.shard) opt.shard = parse_shard(*f.shard);
    const int requested = threads_of_text("run", f.threads);
    const MemoryBudget budget = budget_of_text("run", f.max_memory);
    const std::optional<QkvShapes> shapes = npy_shapes(cfg);
    check_npy_sizes(cfg, shapes);
    const RunPlan plan = plan_run(cfg, requested, opt.shard, shapes ? &*shapes : nullptr, budget);
    opt.threads = plan.threads;
    check_estimate_limit(plan, f.max_estimate_s);
    OutputDir dir(o.out);   // before any work: a bad or busy --out fails at once
    for (const auto& [field, path] : run_input_files(cfg)) dir.refuse_inside(path, cfg.file + ": " + field);
    if (h.warn) {
        if (shapes)
            for (const auto& w : shapes->warnings) h.warn(w);
        for (const auto& w : plan.warnings) h.warn(w);
    }
    if (h.planned) h.planned(plan, budget);
    const std::unique_ptr<Journal> journal = open_journal(cfg, opt.shard, f, dir, o.out, h);
    StopScope stop;
    if (journal) stop.install(), opt.journal = journal.get(), opt.stop = stop.flag;
    opt.progress = h.progress;
    if (h.start) h.start();
    o.result = run_experiment(cfg, opt);
    if (h.finish) h.finish();
    if (!o.result.complete) {
        journal->sync();
        o.signal = stop_signal() ? stop_signal() : SIGTERM;
        return o;
    }
    write_results(o.result, dir);
    return o;
}

std::string stop_report(const RunOutcome& o) {
    const RunResult& r = o.result;
    const std::string dir = absolute_dir(o.out);   // design.md section 5, Paths
    return std::string("stopped by ") + (o.signal == SIGINT ? "SIGINT" : "SIGTERM") + " after " +
           std::to_string(r.items_done) + " of " + std::to_string(r.items_total) + " cell trials; " +
           (r.items_done ? "they are kept in " + dir + "/journal.jsonl" : std::string("nothing to keep")) +
           " (earlier results in " + dir + "/ are untouched)";
}

ValidateReport validate_session(const ValidateRequest& f) {
    ValidateReport v;
    v.config = load_source(f.source, overrides("validate", f.sets, f.m, f.num_features, f.L));
    const Config& cfg = v.config;
    Shard shard;
    if (f.shard) shard = parse_shard(*f.shard);
    v.shapes = npy_shapes(cfg);   // the files exist, headers and shapes fit
    check_npy_sizes(cfg, v.shapes);
    v.cells = config_cells(cfg);
    v.budget = budget_of_text("validate", f.max_memory);
    v.plan = plan_run(cfg, threads_of_text("validate", f.threads), shard, v.shapes ? &*v.shapes : nullptr, v.budget);
    v.warnings = v.plan.warnings;
    if (v.shapes) v.warnings.insert(v.warnings.end(), v.shapes->warnings.begin(), v.shapes->warnings.end());
    if (cfg.experiment == ExperimentKind::approximation && !cfg.variants.empty()) {
        const std::string w = compare_power_warning(v.cells / cfg.variants.size(), cfg.variants.size(), cfg.trials);
        if (!w.empty()) v.warnings.push_back("validate: " + w);
    }
    std::ostringstream s;
    s << cfg.resolved().dump(2) << "\n";
    if (v.shapes)
        s << "inputs: " << v.shapes->heads << " head(s) of L = " << v.shapes->L << ", Lk = " << v.shapes->Lk
          << ", d = " << v.shapes->d << ", d_v = " << v.shapes->dv << "\n";
    s << estimate_line(v.plan, v.budget) << "\n";
    s << "output directory: " << absolute_dir(cfg.output_dir) << "/\n";
    s << f.source.config << ": ok, " << v.cells << " cells x "
      << (cfg.input_seeds_set() ? std::to_string(cfg.input_seeds.size()) + " input seeds x " : "") << cfg.trials
      << " trials\n";
    v.text = s.str();
    return v;
}

namespace {
// "a:b,c:d" -> {(a, b), (c, d)}.
std::vector<std::pair<std::string, std::string>> parse_pairs(const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == item.size() || item.find(':', colon + 1) != std::string::npos)
            throw Error("compare: --pairs: '" + item + "' is not A:B (two variant names, e.g. trig-iid:positive-iid)");
        out.emplace_back(item.substr(0, colon), item.substr(colon + 1));
    }
    if (out.empty()) throw Error("compare: --pairs: empty value");
    return out;
}
}  // namespace

CompareResult compare_session(const CompareRequest& f, CompareOptions* used) {
    CompareOptions cf;
    if (f.dir.empty()) throw Error("compare: DIR: empty path");
    for (const auto& m : f.metrics)
        if (m.empty()) throw Error("compare: --metric: empty value");
    cf.metrics = f.metrics;
    if (f.alpha) cf.alpha = parse_number_text("compare: --alpha", *f.alpha);
    if (f.pairs) cf.pairs = parse_pairs(*f.pairs);
    if (f.against && f.against->empty()) throw Error("compare: --against: empty value");
    if (f.match && f.match->empty()) throw Error("compare: --match: empty value");
    cf.against = f.against.value_or("");
    cf.match = f.match.value_or("");
    cf.progress = f.progress;
    if (!f.write) {   // nothing written: no lock either (it is a file beside DIR)
        if (used) *used = cf;
        return compare_results(f.dir, cf);
    }
    const OutputLock lock(f.dir);   // not while a run replaces this result set
    CompareResult r = compare_results(f.dir, cf);
    write_comparisons(f.dir, r);
    if (used) *used = cf;
    return r;
}

}  // namespace favor
