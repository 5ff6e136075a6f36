// favor: the command-line driver. It only parses flags, dispatches to the library and
// prints; the math lives in lib/. Exit codes: 0 success, 2 bad input, 1 internal failure.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "favor/apply.hpp"
#include "favor/compare.hpp"
#include "favor/config.hpp"
#include "favor/files.hpp"
#include "favor/error.hpp"
#include "favor/experiment.hpp"
#include "favor/feature_maps.hpp"
#include "favor/metrics.hpp"
#include "favor/inputs.hpp"
#include "favor/merge.hpp"
#include "favor/npy.hpp"
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
    void loop() {
        const auto step = std::chrono::duration<double>(mode_ == Mode::bar ? 0.25 : every_);
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

struct RunFlags {
    std::string config, out, m, L, dtype, shard;
    std::vector<std::string> sets;
    long long trials = -1;
    std::string seed;
    int threads = 0;
    bool quiet = false, resume = false;
    double progress_every = 10.0;
    std::vector<std::string> argv;   // the whole command line, for the resume hint
};

// The flag overrides, as --set assignments applied after the user's own --set.
std::vector<std::string> overrides(const RunFlags& f) {
    std::vector<std::string> sets = f.sets;
    if (!f.m.empty()) sets.push_back("m=" + favor::parse_list_flag("--m", f.m).dump());
    if (!f.L.empty()) sets.push_back("inputs.L=" + favor::parse_list_flag("--L", f.L).dump());
    if (f.trials >= 0) sets.push_back("trials=" + std::to_string(f.trials));
    if (!f.seed.empty()) sets.push_back("seed=" + f.seed);
    if (!f.dtype.empty()) sets.push_back("dtype=\"" + f.dtype + "\"");
    return sets;
}

int cmd_run(const RunFlags& f) {
    if (!(f.progress_every > 0) || !std::isfinite(f.progress_every))
        throw Error("--progress-every: must be a number of seconds > 0");
    const favor::Config cfg = favor::load_config(f.config, overrides(f));
    const std::string out = f.out.empty() ? cfg.output_dir : f.out;
    favor::OutputDir dir(out);   // before any work: a bad or busy --out fails at once
    favor::RunOptions opt;
    opt.threads = f.threads;
    if (!f.shard.empty()) opt.shard = favor::parse_shard(f.shard);
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

int cmd_validate(const std::string& path, const std::vector<std::string>& sets) {
    const favor::Config cfg = favor::load_config(path, sets);
    std::size_t cells = cfg.variants.size() * std::max<std::size_t>(cfg.m.size(), 1);
    if (cfg.experiment == favor::ExperimentKind::kernel)
        cells *= cfg.kernel.d.size() * cfg.kernel.norm.size() * cfg.kernel.angle.size();
    else if (!cfg.inputs.npy())
        cells *= cfg.inputs.L.size() * cfg.inputs.d.size() * cfg.inputs.scale.size();
    std::cout << cfg.resolved().dump(2) << "\n";
    std::cout << path << ": ok, " << cells << " cells x " << cfg.trials << " trials\n";
    return 0;
}

int cmd_merge(const std::string& out, const std::vector<std::string>& dirs, const favor::MergeOptions& opt, bool quiet) {
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
    std::size_t L = 0, d = 0, dv = 0;
    double scale = 1.0;
    std::uint64_t seed = 0;
    std::string dtype = "float64", out;
};

// Writes q.npy, k.npy, v.npy: exactly the random inputs a run with these values uses.
int cmd_gen(const GenFlags& g) {
    if (g.L == 0 || g.d == 0) throw Error("gen: --L and --d must be >= 1");
    if (!(g.scale > 0) || !std::isfinite(g.scale)) throw Error("gen: --scale must be > 0");
    const bool f32 = favor::parse_dtype(g.dtype, favor::Field{"gen", "", "--"}.at("dtype")) == favor::DType::float32;
    favor::check_output_dir(g.out);
    const favor::QKV in = favor::random_inputs(g.seed, g.L, g.d, g.dv ? g.dv : g.d, g.scale);
    favor::make_output_dir(g.out);
    favor::save_heads(g.out + "/q.npy", {}, {in.q}, f32);
    favor::save_heads(g.out + "/k.npy", {}, {in.k}, f32);
    favor::save_heads(g.out + "/v.npy", {}, {in.v}, f32);
    return 0;
}

struct ProjectionFlags {
    std::string projection, out;
    std::size_t m = 0, d = 0;
    std::uint64_t seed = 0, trial = 0;
};

// Writes W (m, d): exactly the matrix a run draws for (seed, projection, m, d, trial).
int cmd_projection(const ProjectionFlags& p) {
    if (p.m == 0 || p.d == 0) throw Error("projection: --m and --d must be >= 1");
    const favor::Mat<double> W =
        favor::draw_projection(favor::parse_projection(p.projection), p.m, p.d, p.seed, p.trial);
    favor::write_npy(p.out, {p.m, p.d}, W.data(), false);
    return 0;
}

struct ApplyFlags {
    std::string q, k, v, out;
    favor::ApplyRequest req;
};

// Writes the exact or approximate attention output of given tensors (shape lead + (L, d_v)).
int cmd_apply(const ApplyFlags& a) {
    const favor::ApplyOptions o = favor::resolve_apply(a.req);
    const favor::HeadTensors in = favor::load_qkv(a.q, a.k, a.v, o.causal);
    favor::save_heads(a.out, in.lead, favor::apply_attention(in, o), o.dtype == favor::DType::float32);
    return 0;
}

// Writes DIR/comparisons.csv and prints it as Markdown after a line naming the tests.
int cmd_compare(const std::string& dir, const favor::CompareOptions& opt) {
    const favor::OutputLock lock(dir);   // not while a run replaces this result set
    const favor::Table t = favor::compare_results(dir, opt);
    favor::write_comparisons(dir, t);
    std::cout << favor::compare_description(opt) << "\n\n" << favor::to_markdown(t);
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

int main(int argc, char** argv) {
    RunFlags rf;
    rf.argv.assign(argv, argv + argc);
    CLI::App app{"favor: random-feature approximations of softmax attention (Performer, FAVOR+)"};
    app.require_subcommand(1);

    CLI::App* run = app.add_subcommand("run", "run an experiment config and write its tables");
    run->add_option("config", rf.config, "experiment config (JSON)")->required();
    run->add_option("--out", rf.out, "output directory (default: the config's output_dir)");
    run->add_option("--set", rf.sets, "override a config value: PATH=VALUE, e.g. inputs.scale=0.5 (repeatable)");
    run->add_option("--m", rf.m, "numbers of random features, e.g. 16,32,64");
    run->add_option("--L", rf.L, "sequence lengths, e.g. 1024,4096");
    run->add_option("--trials", rf.trials, "trials per cell");
    run->add_option("--seed", rf.seed, "master seed");
    run->add_option("--dtype", rf.dtype, "compute precision: float32 or float64");
    run->add_option("--shard", rf.shard, "run share K of N of the cells (0 <= K < N), e.g. 0/4");
    run->add_option("--threads", rf.threads, "threads (default: all cores); results do not depend on it");
    run->add_flag("--quiet", rf.quiet, "print nothing but errors (no progress)");
    run->add_flag("--resume", rf.resume, "continue an interrupted run from OUT/journal.jsonl (same config and shard)");
    run->add_option("--progress-every", rf.progress_every,
                    "seconds between progress lines when stderr is not a terminal (default 10)");

    std::string vpath;
    std::vector<std::string> vsets;
    CLI::App* validate = app.add_subcommand("validate", "check a config and print the resolved experiment grid");
    validate->add_option("config", vpath, "experiment config (JSON)")->required();
    validate->add_option("--set", vsets, "override a config value: PATH=VALUE");

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
    gen->add_option("--L", gf.L, "sequence length")->required();
    gen->add_option("--d", gf.d, "head dimension")->required();
    gen->add_option("--dv", gf.dv, "value dimension (default d)");
    gen->add_option("--scale", gf.scale, "entries N(0, scale^2) (default 1)");
    gen->add_option("--seed", gf.seed, "seed (default 0)");
    gen->add_option("--dtype", gf.dtype, "float32 or float64 (default)");
    gen->add_option("--out", gf.out, "output directory")->required();

    ProjectionFlags pf;
    CLI::App* proj = app.add_subcommand("projection", "write the random matrix W (m, d) a run draws");
    proj->add_option("--projection", pf.projection, "iid, orthogonal, ... (favor list)")->required();
    proj->add_option("--m", pf.m, "number of random vectors")->required();
    proj->add_option("--d", pf.d, "dimension")->required();
    proj->add_option("--seed", pf.seed, "seed")->required();
    proj->add_option("--trial", pf.trial, "trial (default 0)");
    proj->add_option("--out", pf.out, "output .npy file")->required();

    ApplyFlags af;
    CLI::App* apply = app.add_subcommand("apply", "exact or approximate attention of given .npy tensors");
    apply->add_option("--q", af.q, "queries .npy: (L, d), (H, L, d) or (B, H, L, d)")->required();
    apply->add_option("--k", af.k, "keys .npy, same leading shape and d")->required();
    apply->add_option("--v", af.v, "values .npy, same leading shape and length as k")->required();
    apply->add_flag("--exact", af.req.exact, "exact softmax attention");
    apply->add_option("--features", af.req.features, "feature map (favor list)");
    apply->add_option("--projection", af.req.projection, "projection (default orthogonal)");
    apply->add_option("--m", af.req.m, "number of random vectors");
    apply->add_option("--seed", af.req.seed, "seed of W (default 0)");
    apply->add_option("--trial", af.req.trial, "trial of W (default 0)");
    apply->add_option("--epsilon", af.req.epsilon, "stabiliser added to each feature (default 0)");
    apply->add_option("--A", af.req.A, "oprf parameter: a number < 1/8 or 'optimal' (default)");
    apply->add_flag("--causal", af.req.causal, "unidirectional (causal) attention");
    apply->add_option("--dtype", af.req.dtype, "compute and output precision: float32 or float64 (default)");
    apply->add_option("--threads", af.req.threads, "threads for exact attention (default all)");
    apply->add_option("--out", af.out, "output .npy file")->required();

    std::string compare_dir;
    favor::CompareOptions cf;
    CLI::App* compare = app.add_subcommand(
        "compare", "per cell, test every pair of variants of an approximation result; writes DIR/comparisons.csv");
    compare->add_option("dir", compare_dir, "result directory with errors.csv")->required();
    compare->add_option("--metric", cf.metrics,
                        "metric column (default output_mse; repeatable; 'all': every metric present "
                        "except nonfinite, seconds, kernel_mse_theory)");
    compare->add_option("--alpha", cf.alpha, "level for the verdict, in (0, 1) (default 0.05)");
    compare->footer(
        "Tests (two-sided, valid for heavy-tailed samples with unequal variances): when both variants\n"
        "have the same projection, seed and trials (trial t used the same W on the same inputs), a\n"
        "sign-flip permutation test of the paired t statistic of d_t = a_t - b_t; otherwise a\n"
        "permutation test of the Welch t statistic (exact under exchangeability, asymptotically valid\n"
        "for unequal variances, Janssen 1997). Exact enumeration up to 65536 sign patterns / splits,\n"
        "else 65536 random ones, p = (1 + #{|t*| >= |t|}) / (1 + 65536). With baseline_<metric> in\n"
        "summary.csv, every variant is also tested against it (b = uniform, one-sample sign-flip).\n"
        "p_holm: Holm-Bonferroni over each metric's rows; verdict a<b / a>b when p_holm < alpha.\n"
        "ratio = mean_a / mean_b with a 95% bootstrap percentile interval (10000 resamples, seeded).");

    CLI::App* list = app.add_subcommand("list", "feature maps, projections, metrics, experiment kinds");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        std::cerr << "favor: " << e.what() << "\n";
        return 2;
    }
    try {
        if (*run) return cmd_run(rf);
        if (*validate) return cmd_validate(vpath, vsets);
        if (*gen) return cmd_gen(gf);
        if (*proj) return cmd_projection(pf);
        if (*apply) return cmd_apply(af);
        if (*merge) return cmd_merge(merge_out, merge_dirs, merge_opt, merge_quiet);
        if (*compare) return cmd_compare(compare_dir, cf);
        if (*list) return cmd_list();
    } catch (const Error& e) {
        // One line, whatever a message quotes (a name from a file may hold a newline).
        std::string msg = e.what();
        for (char& c : msg)
            if (static_cast<unsigned char>(c) < 0x20) c = ' ';
        std::cerr << "favor: " << msg << "\n";
        return 2;
    } catch (const std::bad_alloc&) {
        std::cerr << "favor: out of memory (reduce L, m or the number of threads)\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "favor: internal error: " << e.what() << "\n";
        return 1;
    }
    return 1;
}
