// favor: the command-line driver. It only parses flags, dispatches to the library and
// prints; the math lives in lib/. Exit codes: 0 success, 2 bad input, 1 internal failure,
// 3 `apply` wrote an output with non-finite entries, 130/143 a run stopped by SIGINT/SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <optional>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "favor/apply.hpp"
#include "favor/apply_grad.hpp"
#include "favor/cells.hpp"
#include "favor/compare.hpp"
#include "favor/ranking.hpp"
#include "favor/config.hpp"
#include "favor/files.hpp"
#include "favor/error.hpp"
#include "favor/experiment.hpp"
#include "favor/feature_maps.hpp"
#include "favor/metrics.hpp"
#include "favor/inputs.hpp"
#include "favor/byte_sizes.hpp"
#include "favor/cost_model.hpp"
#include "favor/resources.hpp"
#include "favor/names.hpp"
#include "favor/merge.hpp"
#include "favor/npy.hpp"
#include "favor/process.hpp"
#include "favor/tensor_io.hpp"
#include "favor/projections.hpp"
#include "favor/result_dir.hpp"

namespace {

using favor::Error;

// Progress on stderr from a thread of its own, so a log shows it even while long cells run.
// On a terminal: a live bar, redrawn a few times a second once the run takes over a second.
// Otherwise (a log file, Slurm, nohup): one line every `every` seconds. Off with --quiet.
// The time left is estimated from the items finished by this process (not those resumed).
class Progress {
public:
    Progress(bool quiet, double every) : every_(every) {
        if (!quiet) mode_ = ::isatty(STDERR_FILENO) ? Mode::bar : Mode::lines;
    }
    ~Progress() { finish(); }
    void update(std::size_t done, std::size_t total) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!seen_) base_ = done, seen_ = true;
        done_ = std::max(done_, done), total_ = total;
    }
    void start() {
        if (mode_ == Mode::off) return;
        thread_ = std::thread([this] { loop(); });
    }
    void finish() {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
        if (printed_ && mode_ == Mode::bar) std::fputc('\n', stderr);
    }

private:
    enum class Mode { off, bar, lines };
    Mode mode_ = Mode::off;
    double every_;
    std::size_t done_ = 0, total_ = 0, base_ = 0;
    bool seen_ = false, stop_ = false, printed_ = false;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::thread thread_;
    const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

    static std::string duration(double s) {
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
    static std::chrono::milliseconds wait_step(double seconds) {
        return std::chrono::milliseconds(static_cast<long long>(std::clamp(seconds, 0.01, 3.16e7) * 1000.0));
    }
    void loop() {
        const auto step = mode_ == Mode::bar ? std::chrono::milliseconds(250) : wait_step(every_);
        std::unique_lock<std::mutex> lock(mutex_);
        while (!wake_.wait_for(lock, step, [this] { return stop_; })) {
            const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
            if ((mode_ == Mode::bar && el < 1.0) || !seen_) continue;   // nothing to say yet
            const std::size_t fresh = done_ - base_, left = total_ - done_;
            const std::string eta = fresh ? "~" + duration(el * double(left) / double(fresh)) + " left" : "time left unknown";
            const double frac = total_ ? double(done_) / double(total_) : 0.0;
            if (mode_ == Mode::bar) {
                const int width = 24, fill = int(frac * width);
                std::fprintf(stderr, "\r[favor] [%s%s] %zu/%zu cell trials  %s elapsed  %s\033[K",
                             std::string(std::size_t(fill), '#').c_str(), std::string(std::size_t(width - fill), '.').c_str(),
                             done_, total_, duration(el).c_str(), eta.c_str());
            } else {
                std::fprintf(stderr, "[favor] %zu/%zu cell trials done (%.0f%%), %s elapsed, %s\n", done_, total_,
                             100.0 * frac, duration(el).c_str(), eta.c_str());
            }
            std::fflush(stderr);
            printed_ = true;
        }
    }
};

// SIGINT / SIGTERM during a run: stop starting items, finish those in flight, keep the
// journal. A second signal kills at once (SA_RESETHAND); the journal stays consistent.
std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_stop_signal(int sig) {
    g_signal = sig;
    g_stop.store(true);
}
void install_stop_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
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
favor::Table means_only(const favor::Table& t) {
    auto keep = [](const std::string& c) {
        const auto n = c.size();
        return !((n > 4 && c.compare(n - 4, 4, "_std") == 0) || (n > 4 && c.compare(n - 4, 4, "_sem") == 0) ||
                 c == "nonfinite_mean" || c == "mse_sem");
    };
    favor::Table out;
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

// A value flag as typed: nullopt when absent, the text (possibly empty) when given.
struct Text {
    std::string value;
    CLI::Option* opt = nullptr;
    std::optional<std::string> get() const {
        return opt && opt->count() > 0 ? std::optional<std::string>(value) : std::nullopt;
    }
    explicit operator bool() const { return opt && opt->count() > 0; }
    const std::string& operator*() const { return value; }
    const std::string* operator->() const { return &value; }
};
void bind(CLI::App* app, Text& t, const std::string& name, const std::string& help) {
    t.opt = app->add_option(name, t.value, help);
}

void warn(const std::string& msg) { std::cerr << "favor: warning: " << favor::one_line(msg) << "\n"; }

// What main says when an allocation fails after the estimate let the request through.
std::string g_estimate;

// The memory budget: --max-memory SIZE or what the system offers.
favor::MemoryBudget budget_of(const std::string& cmd, const Text& max_memory) {
    if (max_memory) return favor::memory_budget(favor::parse_size_text(cmd + ": --max-memory", *max_memory));
    return favor::memory_budget();
}

// --threads N: 0..10^6 as typed (0: all hardware threads), clamped by plan_threads.
int threads_of(const std::string& cmd, const Text& t) {
    return t ? int(favor::parse_uint_text(cmd + ": --threads", *t, 0, 1000000)) : 0;
}

struct RunFlags {
    std::string config;
    Text out, m, num_features, L, trials, seed, dtype, shard, threads, max_memory;
    std::vector<std::string> sets;
    bool quiet = false, resume = false;
    double progress_every = 10.0;
    std::vector<std::string> argv;   // the whole command line, for the resume hint
};

// The flag overrides, as --set assignments applied after the user's own --set; each flag's
// value is checked whole here, so errors name the flag.
std::vector<std::string> overrides(const RunFlags& f) {
    constexpr std::uint64_t u64 = std::numeric_limits<std::uint64_t>::max();
    std::vector<std::string> sets = f.sets;
    // --m and --num-features replace the budget axis: each removes the other key (null).
    if (f.m && f.num_features) throw Error("run: --m and --num-features: give one (the grid is over m or over feature columns)");
    if (f.m) sets.push_back("m=" + favor::parse_list_flag("run: --m", *f.m, 1, favor::kMaxM).dump()), sets.push_back("num_features=null");
    if (f.num_features)
        sets.push_back("num_features=" + favor::parse_list_flag("run: --num-features", *f.num_features, 1, 2 * favor::kMaxM).dump()),
            sets.push_back("m=null");
    if (f.L) sets.push_back("inputs.L=" + favor::parse_list_flag("run: --L", *f.L, 1, favor::kMaxL).dump());
    if (f.trials) sets.push_back("trials=" + std::to_string(favor::parse_uint_text("run: --trials", *f.trials, 1, favor::kMaxTrials)));
    if (f.seed) sets.push_back("seed=" + std::to_string(favor::parse_uint_text("run: --seed", *f.seed, 0, u64)));
    if (f.dtype) sets.push_back("dtype=\"" + favor::dtype_name(favor::parse_dtype(*f.dtype, favor::Field{"run", "", "--"}.at("dtype"))) + "\"");
    return sets;
}

// The npy shapes of an approximation config (headers, existence, shapes), when it has npy inputs.
std::optional<favor::QkvShapes> npy_shapes(const favor::Config& cfg) {
    if (cfg.experiment != favor::ExperimentKind::approximation || !cfg.inputs.npy()) return std::nullopt;
    return favor::read_qkv_shapes(cfg.inputs.q, cfg.inputs.k, cfg.inputs.v, cfg.causal);
}

// Threads for a run: the request clamped to the sane maximum, then to what the memory budget
// and the address-space limit hold. Warnings for every lowering.
int plan_run(const favor::Config& cfg, int requested, const favor::Shard& shard, const favor::QkvShapes* npy,
             const favor::MemoryBudget& budget, favor::Cost& cost, std::vector<std::string>& warnings) {
    const favor::ThreadPlan clamp = favor::plan_threads(requested, 0.0);
    if (!clamp.warning.empty()) warnings.push_back(clamp.warning);
    const favor::ThreadPlan fit = favor::fit_threads(cfg, clamp.threads, shard, npy, budget, cost);
    if (!fit.warning.empty()) warnings.push_back(fit.warning);
    const favor::ThreadPlan room = favor::plan_threads(fit.threads, cost.peak);
    if (room.threads < fit.threads) {
        warnings.push_back(room.warning);
        cost = favor::estimate_run(cfg, room.threads, shard, npy);
    }
    return room.threads;
}

std::string seconds_text(double s) {
    char b[32];
    if (s < 1) return "under a second";
    if (s < 120) std::snprintf(b, sizeof b, "about %.2g s", s);
    else if (s < 7200) std::snprintf(b, sizeof b, "about %.2g min", s / 60);
    else std::snprintf(b, sizeof b, "about %.2g h", s / 3600);
    return b;
}

int cmd_run(const RunFlags& f) {
    if (!(f.progress_every > 0) || !std::isfinite(f.progress_every))
        throw Error("--progress-every: must be a number of seconds > 0");
    if (f.out && f.out->empty()) throw favor::Error("run: --out: empty value (expected a directory)");
    const favor::Config cfg = favor::load_config(f.config, overrides(f));
    const std::string out = f.out ? *f.out : cfg.output_dir;
    favor::RunOptions opt;
    if (f.shard) opt.shard = favor::parse_shard(*f.shard);
    const int requested = threads_of("run", f.threads);
    const favor::MemoryBudget budget = budget_of("run", f.max_memory);
    const std::optional<favor::QkvShapes> shapes = npy_shapes(cfg);
    favor::Cost cost;
    std::vector<std::string> warnings;
    opt.threads = plan_run(cfg, requested, opt.shard, shapes ? &*shapes : nullptr, budget, cost, warnings);
    favor::OutputDir dir(out);   // before any work: a bad or busy --out fails at once
    if (cfg.inputs.npy())
        for (const auto& [key, path] : {std::pair{"q", &cfg.inputs.q}, {"k", &cfg.inputs.k}, {"v", &cfg.inputs.v}})
            dir.refuse_inside(*path, cfg.file + ": inputs." + key);
    for (const auto& w : warnings) warn(w);
    g_estimate = "estimated peak " + favor::format_bytes(cost.peak) + " on " + std::to_string(opt.threads) +
                 " threads, budget " + favor::format_bytes(double(budget.bytes)) + " (" + budget.source + ")";
    std::unique_ptr<favor::Journal> journal;
    if (cfg.experiment != favor::ExperimentKind::timing) {
        journal = std::make_unique<favor::Journal>(dir.file("journal.jsonl"), favor::run_identity(cfg, opt.shard),
                                                   f.resume, [&dir] { dir.ensure_exists(); });
        if (!f.quiet && f.resume)
            std::cerr << "favor: " << (journal->loaded() ? "resuming: " + std::to_string(journal->loaded()) +
                                                               " finished cell trials in " + out + "/journal.jsonl"
                                                         : "nothing to resume in " + out + ": starting from the beginning")
                      << "\n";
        else if (!f.quiet && journal->existed())
            std::cerr << "favor: " << out << "/journal.jsonl of an interrupted run will be replaced "
                      << "(stop now and add --resume to continue it instead)\n";
        opt.journal = journal.get();
        opt.stop = &g_stop;
        install_stop_handlers();
    } else if (f.resume) {
        throw Error("--resume: timing runs keep no journal (their times are not reproducible); rerun without it");
    }
    Progress progress(f.quiet, f.progress_every);
    opt.progress = [&progress](std::size_t d, std::size_t t) { progress.update(d, t); };
    progress.start();
    const favor::RunResult r = favor::run_experiment(cfg, opt);
    progress.finish();
    if (!r.complete) {
        journal->sync();
        const int sig = g_signal ? int(g_signal) : SIGTERM;
        std::cerr << "favor: stopped by " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " after " << r.items_done << " of "
                  << r.items_total << " cell trials; "
                  << (r.items_done ? "they are kept in " + out + "/journal.jsonl" : std::string("nothing to keep"))
                  << " (earlier results in " << out << "/ are untouched)\nfavor: continue with: "
                  << resume_command(f.argv) << "\n";
        return 128 + sig;
    }
    favor::write_results(r, dir);
    if (!f.quiet) {
        std::cout << favor::to_markdown(r.timing.columns.empty() ? means_only(r.summary) : r.timing);
        if (!r.notes_md.empty()) std::cout << "\n" << r.notes_md;
        std::cout << "\nwrote " << out << "/ in " << r.info.value("wall_seconds", 0.0) << " s\n";
    }
    return 0;
}

struct ValidateFlags {
    std::string config;
    std::vector<std::string> sets;
    Text threads, max_memory, shard;
};

int cmd_validate(const ValidateFlags& f) {
    const favor::Config cfg = favor::load_config(f.config, f.sets);
    favor::Shard shard;
    if (f.shard) shard = favor::parse_shard(*f.shard);
    const std::optional<favor::QkvShapes> shapes = npy_shapes(cfg);   // the files exist, headers and shapes fit
    const std::size_t cells = favor::config_cells(cfg);
    const favor::MemoryBudget budget = budget_of("validate", f.max_memory);
    favor::Cost cost;
    std::vector<std::string> warnings;
    const int threads = plan_run(cfg, threads_of("validate", f.threads), shard, shapes ? &*shapes : nullptr, budget, cost, warnings);
    for (const auto& w : warnings) warn(w);
    if (cfg.experiment == favor::ExperimentKind::approximation && !cfg.variants.empty()) {
        const std::string w = favor::compare_power_warning(cells / cfg.variants.size(), cfg.variants.size(), cfg.trials);
        if (!w.empty()) warn("validate: " + w);
    }
    std::cout << cfg.resolved().dump(2) << "\n";
    if (shapes)
        std::cout << "inputs: " << shapes->heads << " head(s) of L = " << shapes->L << ", Lk = " << shapes->Lk
                  << ", d = " << shapes->d << ", d_v = " << shapes->dv << "\n";
    std::cout << "estimate: peak memory " << cost.summary() << ", " << seconds_text(cost.seconds) << " on " << threads
              << " thread(s); budget " << favor::format_bytes(double(budget.bytes)) << " (" << budget.source << ")\n";
    std::cout << f.config << ": ok, " << cells << " cells x "
              << (cfg.input_seeds_set() ? std::to_string(cfg.input_seeds.size()) + " input seeds x " : "") << cfg.trials
              << " trials\n";
    return 0;
}

int cmd_merge(const std::string& out, const std::vector<std::string>& dirs, const favor::MergeOptions& opt, bool quiet) {
    if (out.empty()) throw favor::Error("merge: OUT_DIR: empty path");
    for (const auto& d : dirs)
        if (d.empty()) throw favor::Error("merge: DIR: empty path");
    favor::OutputDir dir(out);
    const favor::RunResult r = favor::merge_results(dirs, opt);
    favor::write_results(r, dir);
    if (!quiet)
        std::cout << "merged " << dirs.size() << " result directories into " << out << "/ ("
                  << (r.errors.rows.empty() ? r.summary.rows.size() : r.errors.rows.size()) << " rows"
                  << (r.info.value("partial", false) ? "; PARTIAL: shards missing, see run.json" : "") << ")\n";
    if (r.info.value("partial", false))
        std::cerr << "favor: merge: partial result (missing " << r.info["missing_shards"].dump() << ")\n";
    return 0;
}

struct GenFlags {
    Text L, d, dv, scale, seed, dtype, out, max_memory;
    std::vector<std::string> family;   // KEY=VALUE: input family keys (input_families.hpp)
};

// Writes q.npy, k.npy, v.npy: exactly the random inputs a run with these values uses.
int cmd_gen(const GenFlags& g) {
    const std::size_t L = favor::parse_uint_text("gen: --L", *g.L, 1, favor::kMaxL);
    const std::size_t d = favor::parse_uint_text("gen: --d", *g.d, 1, favor::kMaxD);
    const std::size_t dv = g.dv ? favor::parse_uint_text("gen: --dv", *g.dv, 1, favor::kMaxD) : d;
    const double scale = g.scale ? favor::parse_number_text("gen: --scale", *g.scale) : 1.0;
    if (!(scale > 0)) throw favor::Error("gen: --scale: must be > 0, got " + *g.scale);
    const std::uint64_t seed =
        g.seed ? favor::parse_uint_text("gen: --seed", *g.seed, 0, std::numeric_limits<std::uint64_t>::max()) : 0;
    const favor::DType dtype =
        g.dtype ? favor::parse_dtype(*g.dtype, favor::Field{"gen", "", "--"}.at("dtype")) : favor::DType::float64;
    const bool f32 = dtype != favor::DType::float64;   // half dtypes: float32 files holding the rounded values
    const favor::InputFamily family = favor::parse_family_flags(g.family);
    favor::check_family_dimension(family, d, favor::Field{"gen", "", "--family "});
    if (g.out->empty()) throw favor::Error("gen: --out: empty value (expected a directory)");
    const favor::Cost cost = favor::estimate_gen(L, d, dv, family.decay_q != 0 || family.decay_k != 0);
    const favor::MemoryBudget budget = budget_of("gen", g.max_memory);
    favor::check_memory(cost, budget, "gen");
    g_estimate = "estimated peak " + favor::format_bytes(cost.peak) + ", budget " + favor::format_bytes(double(budget.bytes)) +
                 " (" + budget.source + ")";
    favor::check_output_dir(*g.out);
    favor::OutputDir dir(*g.out, favor::SetKind::tensors);   // q, k, v swapped in together
    favor::QKV in = favor::random_inputs(seed, L, d, dv, scale, {family, 0, "gen: --scale"});
    for (favor::Mat<double>* m : {&in.q, &in.k, &in.v}) {   // as a run in a half dtype rounds them
        if (favor::dtype_rounding(dtype) == favor::Rounding::none) break;
        favor::Mat<float> f = favor::cast_mat<float>(*m);
        favor::round_to(favor::dtype_rounding(dtype), f.data(), f.size());
        *m = favor::cast_mat<double>(f);
    }
    favor::ResultFiles files;
    for (const auto& [name, m] : {std::pair{"q.npy", &in.q}, {"k.npy", &in.k}, {"v.npy", &in.v}})
        files.emplace_back(name, favor::heads_npy_bytes(dir.file(name), {}, {*m}, f32));
    dir.replace(files);
    return 0;
}

struct ProjectionFlags {
    Text projection, m, d, seed, trial, out, max_memory;
};

// Writes W (m, d): exactly the matrix a run draws for (seed, projection, m, d, trial).
int cmd_projection(const ProjectionFlags& p) {
    constexpr std::uint64_t u64 = std::numeric_limits<std::uint64_t>::max();
    if (p.projection->empty()) throw favor::Error("projection: --projection: empty value");
    const favor::Projection proj = favor::parse_projection(*p.projection);
    const std::size_t m = favor::parse_uint_text("projection: --m", *p.m, 1, favor::kMaxM);
    const std::size_t d = favor::parse_uint_text("projection: --d", *p.d, 1, favor::kMaxD);
    if (d < favor::projection_min_d(proj))
        throw favor::Error("projection: --d: '" + *p.projection + "' needs d >= " +
                           std::to_string(favor::projection_min_d(proj)) + ", got " + std::to_string(d));
    const std::uint64_t seed = favor::parse_uint_text("projection: --seed", *p.seed, 0, u64);
    const std::uint64_t trial = p.trial ? favor::parse_uint_text("projection: --trial", *p.trial, 0, u64) : 0;
    if (p.out->empty()) throw favor::Error("projection: --out: empty value (expected a .npy file)");
    const favor::Cost cost = favor::estimate_projection(m, d);
    const favor::MemoryBudget budget = budget_of("projection", p.max_memory);
    favor::check_memory(cost, budget, "projection");
    g_estimate = "estimated peak " + favor::format_bytes(cost.peak) + ", budget " + favor::format_bytes(double(budget.bytes)) +
                 " (" + budget.source + ")";
    favor::check_output_file(*p.out);
    const favor::Mat<double> W = favor::draw_projection(proj, m, d, seed, trial);
    favor::write_npy(*p.out, {m, d}, W.data(), false);
    return 0;
}

struct ApplyFlags {
    Text q, k, v, out, features, projection, m, seed, trial, epsilon, epsilon_after, A, dtype, threads, max_memory, grad;
    std::vector<std::string> params;
    bool exact = false, causal = false;
};

// Writes the exact or approximate attention output of given tensors (shape lead + (L, d_v)).
// Exit 3 (after writing) when some output entry is not finite.
int cmd_apply(const ApplyFlags& a) {
    for (const Text* t : {&a.q, &a.k, &a.v, &a.out})
        if (t->value.empty())
            throw favor::Error("apply: " + t->opt->get_name() + ": empty value (expected a .npy file)");
    favor::ApplyRequest req;
    req.exact = a.exact;
    req.causal = a.causal;
    req.features = a.features.get();
    req.projection = a.projection.get();
    req.m = a.m.get();
    req.seed = a.seed.get();
    req.trial = a.trial.get();
    req.epsilon = a.epsilon.get();
    req.epsilon_after = a.epsilon_after.get();
    req.A = a.A.get();
    req.dtype = a.dtype.get();
    req.threads = a.threads.get();
    req.params = a.params;
    favor::ApplyOptions o = favor::resolve_apply(req);
    const favor::QkvShapes shapes = favor::read_qkv_shapes(*a.q, *a.k, *a.v, o.causal);
    if (a.grad.get()) favor::check_apply_grad(o, *a.grad, &shapes);
    const favor::ThreadPlan clamp = favor::plan_threads(o.threads, 0.0);
    const favor::Cost cost = favor::estimate_apply(shapes, o, clamp.threads);
    const favor::MemoryBudget budget = budget_of("apply", a.max_memory);
    favor::check_memory(cost, budget, "apply");
    const favor::ThreadPlan room = favor::plan_threads(clamp.threads, cost.peak);
    favor::check_output_file(*a.out);
    if (!clamp.warning.empty()) warn(clamp.warning);
    if (room.threads < clamp.threads) warn(room.warning);
    o.threads = room.threads;
    g_estimate = "estimated peak " + favor::format_bytes(cost.peak) + ", budget " +
                 favor::format_bytes(double(budget.bytes)) + " (" + budget.source + ")";
    const favor::HeadTensors in = favor::load_qkv(*a.q, *a.k, *a.v, o.causal);
    const std::vector<favor::Mat<double>> out = favor::apply_attention(in, o);
    favor::save_heads(*a.out, in.lead, out, o.dtype != favor::DType::float64);
    if (a.grad.get()) favor::write_apply_gradients(*a.grad, *a.out, in, o);
    if (const auto bad = favor::find_nonfinite(in, out, o)) {
        std::size_t total = 0;
        for (const auto& h : out) total += h.size();
        std::cerr << "favor: " << favor::one_line(bad->message(total) + " (written to " + *a.out + ")") << "\n";
        return 3;
    }
    return 0;
}

// "a:b,c:d" -> {(a, b), (c, d)}.
std::vector<std::pair<std::string, std::string>> parse_pairs(const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == item.size() || item.find(':', colon + 1) != std::string::npos)
            throw favor::Error("compare: --pairs: '" + item + "' is not A:B (two variant names, e.g. trig-iid:positive-iid)");
        out.emplace_back(item.substr(0, colon), item.substr(colon + 1));
    }
    if (out.empty()) throw favor::Error("compare: --pairs: empty value");
    return out;
}

// Writes DIR/comparisons.csv and DIR/ranking.csv; prints them as Markdown after a line
// naming the tests (--summary: one line per cell and metric instead).
int cmd_compare(const std::string& dir, const favor::CompareOptions& opt, bool summary) {
    const favor::OutputLock lock(dir);   // not while a run replaces this result set
    const favor::CompareResult r = favor::compare_results(dir, opt);
    favor::write_comparisons(dir, r);
    for (const auto& w : r.warnings) warn(w);
    if (summary) {
        for (const auto& line : r.summary) std::cout << line << "\n";
        return 0;
    }
    std::cout << favor::compare_description(opt) << "\n\n" << favor::to_markdown(r.comparisons) << "\n## Rankings\n"
              << favor::ranking_markdown(r.ranking, r.cell_columns);
    return 0;
}

int cmd_list() {
    auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
    };
    std::cout << "feature maps (exact: timing experiments only):\n  exact  exact softmax attention\n";
    for (const auto& e : favor::feature_map_registry()) std::cout << "  " << e.name << "  " << e.summary << "\n";
    std::cout << "projections:\n  " << join(favor::projection_names()) << "\nmetrics:\n";
    for (const auto& m : favor::metric_table()) std::cout << "  " << m.name << "  " << m.description << "\n";
    std::cout << "experiment kinds:\n  approximation, kernel, timing\n";
    return 0;
}

}  // namespace

namespace {

const std::vector<std::string>& command_names() {
    static const std::vector<std::string> n = {"run", "validate", "gen", "projection", "apply", "merge", "compare", "list"};
    return n;
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// What main returns after a command that printed: 2 with one line if stdout lost some of it.
int checked_exit(int rc) {
    try {
        favor::check_stdout();
    } catch (const Error& e) {
        std::cerr << "favor: " << e.what() << "\n";
        return 2;
    }
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    favor::prepare_process(argv);
    RunFlags rf;
    rf.argv.assign(argv, argv + argc);
    favor::use_predictable_allocator();
    // The command first: a missing or misspelt one gets a "did you mean"; --version.
    if (argc < 2) {
        std::cerr << "favor: missing command (one of " << joined(command_names()) << "; favor --help)\n";
        return 2;
    }
    const std::string first = argv[1];
    if (first == "--version" || first == "-V") {
        std::cout << favor::version_text() << "\n";
        return checked_exit(0);
    }
    if (first.empty() || (first[0] != '-' && std::find(command_names().begin(), command_names().end(), first) == command_names().end())) {
        const std::string guess = favor::closest_name(first, command_names());
        std::cerr << "favor: " << favor::one_line("unknown command '" + first + "'") 
                  << (guess.empty() ? "; commands: " + joined(command_names()) : ", did you mean '" + guess + "'?")
                  << "\n";
        return 2;
    }

    CLI::App app{"favor: random-feature approximations of softmax attention (Performer, FAVOR+)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", favor::version_text());

    CLI::App* run = app.add_subcommand("run", "run an experiment config and write its tables");
    run->add_option("config", rf.config, "experiment config (JSON)")->required();
    bind(run, rf.out, "--out", "output directory (default: the config's output_dir)");
    run->add_option("--set", rf.sets, "override a config value: PATH=VALUE, e.g. inputs.scale=0.5 (repeatable)");
    bind(run, rf.m, "--m", "numbers of random features, e.g. 16,32,64");
    bind(run, rf.num_features, "--num-features", "feature columns per variant instead of m (equal budgets), e.g. 64,128");
    bind(run, rf.L, "--L", "sequence lengths, e.g. 1024,4096");
    bind(run, rf.trials, "--trials", "trials per cell");
    bind(run, rf.seed, "--seed", "master seed");
    bind(run, rf.dtype, "--dtype", "compute precision: float32, float64, float16 or bfloat16 (emulated)");
    bind(run, rf.shard, "--shard", "run share K of N of the cells (0 <= K < N), e.g. 0/4");
    bind(run, rf.threads, "--threads", "threads (default: all cores); results do not depend on it");
    bind(run, rf.max_memory, "--max-memory", "memory the run may use, e.g. 8G (default: what the system has available)");
    run->add_flag("--quiet", rf.quiet, "print nothing but errors (no progress)");
    run->add_flag("--resume", rf.resume, "continue an interrupted run from OUT/journal.jsonl (same config and shard)");
    run->add_option("--progress-every", rf.progress_every,
                    "seconds between progress lines when stderr is not a terminal (default 10)");

    ValidateFlags vf;
    CLI::App* validate = app.add_subcommand("validate", "check a config (and its .npy inputs), print the resolved grid and the cost estimate");
    validate->add_option("config", vf.config, "experiment config (JSON)")->required();
    validate->add_option("--set", vf.sets, "override a config value: PATH=VALUE");
    bind(validate, vf.threads, "--threads", "threads the estimate assumes (default: all cores)");
    bind(validate, vf.max_memory, "--max-memory", "memory budget for the check, e.g. 8G");
    bind(validate, vf.shard, "--shard", "estimate for share K of N of the cells");

    std::string merge_out;
    std::vector<std::string> merge_dirs;
    bool merge_quiet = false;
    favor::MergeOptions merge_opt;
    CLI::App* merge = app.add_subcommand("merge", "combine result directories (shards, sweep runs) into one result set");
    merge->add_option("out_dir", merge_out, "output directory")->required();
    merge->add_option("dirs", merge_dirs, "result directories to combine")->required();
    merge->add_flag("--quiet", merge_quiet, "print nothing but errors");
    merge->add_flag("--allow-partial", merge_opt.allow_partial,
                    "merge an incomplete shard set anyway (run.json then says partial)");

    GenFlags gf;
    CLI::App* gen = app.add_subcommand("gen", "write the random q.npy, k.npy, v.npy a run uses");
    bind(gen, gf.L, "--L", "sequence length");
    gf.L.opt->required();
    bind(gen, gf.d, "--d", "head dimension");
    gf.d.opt->required();
    bind(gen, gf.dv, "--dv", "value dimension (default d)");
    bind(gen, gf.scale, "--scale", "entries N(0, scale^2) (default 1)");
    bind(gen, gf.seed, "--seed", "seed (default 0)");
    bind(gen, gf.dtype, "--dtype", "float32, float64 (default), float16 or bfloat16 (float32 files, values rounded)");
    gen->add_option("--family", gf.family,
                    "an input family key as in a random inputs object, KEY=VALUE (repeatable), e.g. decay_q=1.5, "
                    "rope_base=10000 (docs/input_families.md)");
    bind(gen, gf.out, "--out", "output directory");
    gf.out.opt->required();
    bind(gen, gf.max_memory, "--max-memory", "memory budget, e.g. 8G");

    ProjectionFlags pf;
    CLI::App* proj = app.add_subcommand("projection", "write the random matrix W (m, d) a run draws");
    bind(proj, pf.projection, "--projection", "iid, orthogonal, ... (favor list)");
    bind(proj, pf.m, "--m", "number of random vectors");
    bind(proj, pf.d, "--d", "dimension");
    bind(proj, pf.seed, "--seed", "seed");
    bind(proj, pf.trial, "--trial", "trial (default 0)");
    bind(proj, pf.out, "--out", "output .npy file");
    bind(proj, pf.max_memory, "--max-memory", "memory budget, e.g. 8G");
    for (Text* t : {&pf.projection, &pf.m, &pf.d, &pf.seed, &pf.out}) t->opt->required();

    ApplyFlags af;
    CLI::App* apply = app.add_subcommand("apply", "exact or approximate attention of given .npy tensors");
    bind(apply, af.q, "--q", "queries .npy: (L, d), (H, L, d) or (B, H, L, d)");
    bind(apply, af.k, "--k", "keys .npy, same leading shape and d");
    bind(apply, af.v, "--v", "values .npy, same leading shape and length as k");
    apply->add_flag("--exact", af.exact, "exact softmax attention");
    bind(apply, af.features, "--features", "feature map (favor list)");
    bind(apply, af.projection, "--projection",
         "projection (default orthogonal; not for maps without one: elu, dpfp, nystrom)");
    bind(apply, af.m, "--m", "number of random vectors (nystrom: landmarks; not for elu, dpfp)");
    bind(apply, af.seed, "--seed", "seed of W (default 0)");
    bind(apply, af.trial, "--trial", "trial of W (default 0)");
    bind(apply, af.epsilon, "--epsilon", "stabiliser added to each feature (default 0)");
    bind(apply, af.epsilon_after, "--epsilon-after",
         "where epsilon is added: max_exponent (after subtracting max(w.x - |x|^2/2), default) or max_wx "
         "(after subtracting max(w.x), the official code's)");
    bind(apply, af.A, "--A", "oprf/gerf parameter: a number < 1/8 or 'optimal' (default)");
    apply->add_option("--param", af.params,
                      "a parameter of the feature map as in a config variant, KEY=VALUE (repeatable), e.g. t=0.8 "
                      "(gerf), nu=2 (dpfp), pinv=exact (nystrom)");
    apply->add_flag("--causal", af.causal, "unidirectional (causal) attention");
    bind(apply, af.dtype, "--dtype", "compute and output precision: float32, float64 (default), float16 or bfloat16 (emulated)");
    bind(apply, af.threads, "--threads", "threads for exact attention (default all)");
    bind(apply, af.out, "--out", "output .npy file");
    bind(apply, af.grad, "--grad", "upstream gradient dLoss/dOut .npy (the output's shape): also writes dq.npy, dk.npy, dv.npy beside --out");
    bind(apply, af.max_memory, "--max-memory", "memory budget, e.g. 8G");
    for (Text* t : {&af.q, &af.k, &af.v, &af.out}) t->opt->required();
    apply->footer("Exit code 3: the output was written but some entries are not finite (one line says how many, "
                  "the first row and the likely cause).");

    std::string compare_dir;
    Text compare_alpha, compare_pairs;
    bool compare_summary = false;
    favor::CompareOptions cf;
    CLI::App* compare = app.add_subcommand(
        "compare", "per cell, test every pair of variants of an approximation result and rank them; writes "
                    "DIR/comparisons.csv and DIR/ranking.csv");
    compare->add_option("dir", compare_dir, "result directory with errors.csv")->required();
    compare->add_option("--metric", cf.metrics,
                        "metric column (default output_mse; repeatable; 'all': every metric present "
                        "except nonfinite, seconds, kernel_mse_theory)");
    bind(compare, compare_alpha, "--alpha", "level for the verdict, in (0, 1) (default 0.05)");
    compare->add_option("--against", cf.against,
                        "only every variant against NAME (a variant, or uniform); Holm over those rows");
    bind(compare, compare_pairs, "--pairs", "only these pairs, A:B,C:D,...; Holm over those rows");
    compare->add_option("--match", cf.match,
                        "num_features: cells of equal feature columns F (each variant at its own m)");
    compare->add_flag("--summary", compare_summary,
                      "print one line per cell and metric (best, tied, beat uniform) instead of the tables");
    compare->footer(
        "Tests (two-sided, valid for heavy-tailed samples with unequal variances): when both variants\n"
        "have the same projection, seed and trials (trial t used the same W on the same inputs), a\n"
        "sign-flip permutation test of the paired t statistic of d_t = a_t - b_t; otherwise a\n"
        "permutation test of the Welch t statistic (exact under exchangeability, asymptotically valid\n"
        "for unequal variances, Janssen 1997). Exact enumeration up to 65536 sign patterns / splits,\n"
        "else 65536 random ones, p = (1 + #{|t*| >= |t|}) / (1 + 65536). With baseline_<metric> in\n"
        "summary.csv, every variant is also tested against it (b = uniform, one-sample sign-flip).\n"
        "Deterministic maps (no projection, every trial the same value: elu, dpfp, nystrom): two are not tested\n"
        "(paired = exact, the difference is exact); against a random map, a one-sample sign-flip test.\n"
        "p_holm: Holm-Bonferroni over each metric's rows (or the --against / --pairs family); verdict\n"
        "a<b / a>b when p_holm < alpha; underpowered when p_holm_min (the smallest p_holm these trials\n"
        "can give) >= alpha; non-finite when a trial is NaN / Inf (column nonfinite: k of n; not tested).\n"
        "ratio = mean_a / mean_b, bootstrap percentile intervals ci95 (95%) and ci_bonf (1 - alpha / k\n"
        "over a family of k tests). ranking.csv: per cell, estimators by mean, tied_with_best and letter\n"
        "groups (estimators sharing a letter do not differ), from Holm over every row of the metric.");

    CLI::App* list = app.add_subcommand("list", "feature maps, projections, metrics, experiment kinds");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return checked_exit(app.exit(e));
        std::cerr << "favor: " << favor::one_line(e.what()) << "\n";
        return 2;
    }
    try {
        favor::check_arguments_utf8(argc, argv);
        if (*run) return checked_exit(cmd_run(rf));
        if (*validate) return checked_exit(cmd_validate(vf));
        if (*gen) return checked_exit(cmd_gen(gf));
        if (*proj) return checked_exit(cmd_projection(pf));
        if (*apply) return checked_exit(cmd_apply(af));
        if (*merge) return checked_exit(cmd_merge(merge_out, merge_dirs, merge_opt, merge_quiet));
        if (*compare) {
            if (compare_dir.empty()) throw favor::Error("compare: DIR: empty path");
            for (const auto& m : cf.metrics)
                if (m.empty()) throw favor::Error("compare: --metric: empty value");
            if (compare_alpha) cf.alpha = favor::parse_number_text("compare: --alpha", *compare_alpha);
            if (compare_pairs) cf.pairs = parse_pairs(*compare_pairs);
            if (compare->count("--against") && cf.against.empty()) throw favor::Error("compare: --against: empty value");
            if (compare->count("--match") && cf.match.empty()) throw favor::Error("compare: --match: empty value");
            return checked_exit(cmd_compare(compare_dir, cf, compare_summary));
        }
        if (*list) return checked_exit(cmd_list());
    } catch (const Error& e) {
        // One line, whatever a message quotes (a name from a file may hold a newline).
        std::string msg = e.what();
        for (char& c : msg)
            if (static_cast<unsigned char>(c) < 0x20) c = ' ';
        std::cerr << "favor: " << msg << "\n";
        return 2;
    } catch (const std::bad_alloc&) {
        std::cerr << "favor: out of memory" << (g_estimate.empty() ? "" : " (" + g_estimate + ")")
                  << "; lower L, m or --threads, or give --max-memory below what this machine has\n";
        return 1;
    } catch (const std::length_error&) {
        std::cerr << "favor: out of memory: a buffer larger than the address space was requested"
                  << (g_estimate.empty() ? "" : " (" + g_estimate + ")") << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "favor: internal error: " << favor::one_line(e.what()) << "\n";
        return 1;
    }
    return 1;
}
