// The "timing" experiment (docs/design.md section 5): per variant (exact, or a feature map with a
// projection) and each L, d and m: warm-up runs, then repeated timed runs of the one
// operation on all threads (row blocks split over threads; numbers never depend on them).
#include "favor/experiments/timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_exact.hpp"
#include "favor/attention/backward_linear.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/hybrid_fast.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/blas.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/experiments/cells.hpp"
#include "experiments/experiment_parts.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"

namespace favor {

double exact_attention_flops(std::size_t L, std::size_t Lk, std::size_t d, std::size_t dv, bool causal) {
    double pairs = double(L) * double(Lk);
    if (causal) {   // sum_{i < L} min(i + 1, Lk)
        const double n = double(std::min(L, Lk));
        pairs = n * (n + 1) / 2 + double(L - std::min(L, Lk)) * double(Lk);
    }
    return 2.0 * pairs * double(d + dv);
}

double favor_attention_flops(const FeatureMap& f, std::size_t L, std::size_t Lk, std::size_t d,
                             std::size_t dv, std::size_t m) {
    const double F = double(f.num_features(m, d));
    return f.feature_flops(L, Lk, m, d) + 2.0 * double(Lk) * F * double(dv + 1) + 2.0 * double(L) * F * double(dv + 1);
}

double support_flops(const HybridSupport& h, std::size_t L, std::size_t d, std::size_t dv, bool causal) {
    if (!h.active()) return 0.0;
    if (h.topk) return exact_attention_flops(L, L, d, dv, causal);   // the oracle scores every visible pair
    double pairs = 0;   // sum_i |E(i)|: the visible sinks [0, se) and the window past them [wl, wh)
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t vis = causal ? i + 1 : L, se = std::min(h.sinks, vis);
        const std::size_t lo = i + 1 > h.window ? i + 1 - h.window : 0, hi = h.window ? (causal ? i + 1 : i + h.window) : 0;
        const std::size_t wl = std::clamp(lo, se, vis), wh = std::clamp(hi, wl, vis);
        pairs += double(se + (h.window ? wh - wl : 0));
    }
    return 2.0 * pairs * double(d + dv);
}

std::optional<std::size_t> crossover_L(const std::vector<std::size_t>& Ls,
                                       const std::vector<std::optional<double>>& fast,
                                       const std::vector<std::optional<double>>& slow) {
    std::optional<std::size_t> from;
    for (std::size_t i = 0; i < Ls.size(); ++i) {
        if (!fast[i] || !slow[i]) continue;
        if (*fast[i] < *slow[i]) {
            if (!from) from = Ls[i];
        } else {
            from.reset();
        }
    }
    return from;
}

// The crossover L* (docs/design.md section 6): log L where log(fast / slow), linear in log L
// between the last measured L where `fast` is slower and the first from which it stays
// faster, is 0; nullopt without such a pair.
std::optional<double> crossover_interpolated(const std::vector<std::size_t>& Ls,
                                             const std::vector<std::optional<double>>& fast,
                                             const std::vector<std::optional<double>>& slow) {
    const auto from = crossover_L(Ls, fast, slow);
    if (!from) return std::nullopt;
    std::optional<std::size_t> prev;   // the last L measured by both below `from`
    for (std::size_t i = 0; i < Ls.size() && Ls[i] < *from; ++i)
        if (fast[i] && slow[i]) prev = i;
    if (!prev) return std::nullopt;
    const std::size_t at = std::size_t(std::find(Ls.begin(), Ls.end(), *from) - Ls.begin());
    const double r0 = std::log(*fast[*prev] / *slow[*prev]), r1 = std::log(*fast[at] / *slow[at]);
    const double x0 = std::log(double(Ls[*prev])), x1 = std::log(double(*from));
    return std::exp(x0 + (x1 - x0) * r0 / (r0 - r1));
}

const std::vector<std::string>& timing_columns(bool backward) {
    static const std::vector<std::string> c = {
        "variant", "L", "d", "m", "dtype", "threads", "repeats", "median_s", "min_s", "max_s",
        "gflops", "gemm_ratio", "speedup_vs_exact", "peak_bytes", "projection_s", "features_s", "kv_s",
        "normalise_s", "status"};
    static const std::vector<std::string> with_backward = [] {   // "backward": two columns before status
        std::vector<std::string> b = c;
        b.insert(b.end() - 1, {"backward_s", "backward_ratio"});
        return b;
    }();
    return backward ? with_backward : c;
}

namespace {

// Size of the square gemm whose rate gemm_ratio divides by (large enough for the BLAS's
// peak, small enough to take about a second: 17 GFLOP). Test hook (docs/design.md section 6):
// FAVOR_TEST_GEMM_N=n measures at n^3 instead, so tests of the table's mechanics do not spend
// seconds on the probe; the notes say which size was measured.
constexpr std::size_t kGemmRateN = 2048;
std::size_t gemm_probe_n() {
    const char* v = std::getenv("FAVOR_TEST_GEMM_N");
    const long n = v ? std::strtol(v, nullptr, 10) : 0;
    return n > 0 ? std::size_t(n) : kGemmRateN;
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Phase times of one run (NaN: not applicable).
struct Phases {
    static constexpr double none = std::numeric_limits<double>::quiet_NaN();
    double projection = none, features = none, kv = none, normalise = none, total = 0;
};

template <class T>
struct Inputs {
    Mat<T> q, k, v;
    Mat<T> g;   // the upstream gradient, drawn only with "backward"
};

// One timed run of a variant: the attention given W (the projection draw is timed apart),
// by the path a user calls: exact_attention; for FAVOR the fused forward (favor_forward)
// when non-causal, the blocked prefix-sum pass when causal. Phases are not separable there:
// they come from breakdown_once.
// `out` is the caller's, reused across the repeats (as a training loop reuses its buffers):
// the time is the computation's, not the first touch of a fresh multi-MB output.
template <class T>
Phases run_once(const Config& cfg, const Variant& var, const Inputs<T>& in, std::size_t m, int threads, Mat<T>& out) {
    Phases p;
    if (var.exact) {
        const auto t0 = Clock::now();
        exact_attention_into<T>(in.q, in.k, in.v, out, cfg.causal, threads);
        p.total = since(t0);
        return p;
    }
    auto t = Clock::now();
    const Estimator<T> drawn = make_estimator<T>(var, m, in.q.shape(1), cfg.seed, 0);
    p.projection = since(t);
    t = Clock::now();
    if (var.hybrid.active())   // window / sinks: the fast path (hybrid_fast.hpp; top-k: the reference)
        hybrid_forward_into(drawn.for_inputs(in.q, in.k), in.q, in.k, in.v, out, cfg.causal, threads);
    else
        favor_forward_into(drawn.for_inputs(in.q, in.k), in.q, in.k, in.v, out, cfg.causal, threads);
    p.total = since(t);
    return p;
}

// The phases of one unfused run (favor_attention's steps, each timed): where the time goes.
template <class T>
Phases breakdown_once(const Config& cfg, const Variant& var, const Inputs<T>& in, std::size_t m, int threads) {
    Phases p;
    const std::size_t d = in.q.shape(1);
    auto t = Clock::now();
    const Estimator<T> drawn = make_estimator<T>(var, m, d, cfg.seed, 0);
    p.projection = since(t);
    t = Clock::now();
    const Estimator<T> est = drawn.for_inputs(in.q, in.k);
    const double xs = 1.0 / std::pow(double(d), 0.25);
    const Features<T> fq = compute_features(est.ready_map(), in.q, xs, est.W, Side::query, threads);
    const Features<T> fk = compute_features(est.ready_map(), in.k, xs, est.W, Side::key, threads);
    p.features = since(t);
    t = Clock::now();
    if (cfg.causal) {   // prefix sums: one phase
        const Mat<T> out = linear_attention(fq.phi, fk.phi, fk.log_scale, in.v, true, threads, est.map->row_normalised());
        p.kv = since(t);
        return p;
    }
    const Mat<T> KV = linear_attention_kv(fk.phi, fk.log_scale, in.v, threads);
    p.kv = since(t);
    t = Clock::now();
    const Mat<T> out = linear_attention_apply(fq.phi, KV, threads, est.map->row_normalised());
    p.normalise = since(t);
    return p;
}

struct CellResult {
    bool skipped = false;
    std::string status = "ok";
    double median = 0, min = 0, max = 0, flops = 0;
    std::size_t peak = 0, runs = 0;   // runs: the timed runs (repeats, or more for min_time_s)
    Phases phases;   // medians
    std::optional<double> backward;   // median of the backward's timed runs ("backward")
};

std::optional<double> opt_num(double v) {
    if (std::isnan(v)) return std::nullopt;
    return v;
}

std::string fmt_seconds(double s) {
    std::ostringstream o;
    o.precision(3);
    o << s;
    return o.str();
}

// Rows per (d, variant, m) series (cells.hpp), one cell per L; the series in grid order.
struct Series {
    std::size_t d, variant, m;   // m = 0 for exact
    std::vector<CellResult> cells;
};

// Time budget: predict this cell's warm-up + repeats from the last measured L of the series
// (exact grows as L^2, FAVOR as L); once over, the larger L are skipped too.
void apply_budget(const Config& cfg, const Series& s, CellResult& c) {
    if (cfg.timing.time_budget_s <= 0 || s.cells.empty()) return;
    const CellResult& prev = s.cells.back();
    if (prev.skipped) {
        c.skipped = true;
        c.status = prev.status;
        return;
    }
    const double grow = c.flops / prev.flops;
    const double predicted = cfg.timing.cell_seconds(prev.median * grow, prev.backward.value_or(0.0) * grow);
    if (predicted > cfg.timing.time_budget_s) {
        c.skipped = true;
        c.status = "skipped: over time budget (predicted " + fmt_seconds(predicted) + " s > " +
                   fmt_seconds(cfg.timing.time_budget_s) + " s)";
    }
}

// The backward's warm-up and timed runs ("backward"; docs/design.md section 6), median: exact
// from the Out and row log-sum-exps its forward saved (exact_attention_saved, not timed: a
// training step's forward keeps them), FAVOR likewise from favor_forward_saved's state
// (favor_backward_saved; causal: nothing is saved and it runs from both feature matrices), the
// estimator fitted as the timed forward fits it. Nullopt for maps without a gradient (cells left empty, as the
// gradient metrics leave theirs).
template <class T>
std::optional<double> time_backward(const Config& cfg, const Variant& var, const Inputs<T>& in, std::size_t m,
                                    int threads) {
    auto timed = [&](const auto& run) {
        for (std::size_t w = 0; w < cfg.timing.warmup; ++w) run();
        std::vector<double> t;
        for (std::size_t r = 0; r < cfg.timing.repeats; ++r) {
            const auto t0 = Clock::now();
            run();
            t.push_back(since(t0));
        }
        return median(t);
    };
    if (var.exact) {
        const ExactForward<T> f = exact_attention_saved(in.q, in.k, in.v, cfg.causal, threads);
        return timed([&] { exact_attention_backward_saved(in.q, in.k, in.v, in.g, f.out, f.lse, cfg.causal, threads); });
    }
    if (!var.map->gradient_refusal().empty()) return std::nullopt;
    const Estimator<T> est = make_estimator<T>(var, m, in.q.shape(1), cfg.seed, 0).for_inputs(in.q, in.k);
    const ForwardState<T> f = favor_forward_saved(est, in.q, in.k, in.v, cfg.causal, threads);
    return timed([&] { favor_backward_saved(est, in.q, in.k, in.v, in.g, f, cfg.causal, threads); });
}

// Warm-up runs, then the timed repeats of one cell: medians of the total and the phases.
template <class T>
void measure(const Config& cfg, const Variant& var, const Inputs<T>& in, std::size_t m, int threads, CellResult& c) {
    reset_peak_rss();
    Mat<T> out;
    for (std::size_t w = 0; w < cfg.timing.warmup; ++w) run_once(cfg, var, in, m, threads, out);
    // `repeats` timed runs, and more while they add up to less than min_time_s (a cell of tens
    // of microseconds is otherwise over within one of a VM's slow or fast spells).
    std::vector<Phases> ps;
    double timed = 0;
    while (ps.size() < cfg.timing.repeats || (timed < cfg.timing.min_time_s && ps.size() < kMaxTimedRuns)) {
        ps.push_back(run_once(cfg, var, in, m, threads, out));
        timed += ps.back().total;
    }
    c.runs = ps.size();
    c.peak = peak_rss_bytes();
    auto med = [&](double Phases::*f) {
        std::vector<double> v;
        for (const Phases& p : ps) v.push_back(p.*f);
        return std::isnan(v[0]) ? Phases::none : median(v);
    };
    std::vector<double> tot;
    for (const Phases& p : ps) tot.push_back(p.total);
    c.median = median(tot);
    c.min = *std::min_element(tot.begin(), tot.end());
    c.max = *std::max_element(tot.begin(), tot.end());
    c.phases = var.exact || var.hybrid.active() ? Phases{} : breakdown_once(cfg, var, in, m, threads);
    c.phases.projection = med(&Phases::projection);
    c.phases.total = c.median;
    if (cfg.timing.backward) c.backward = time_backward(cfg, var, in, m, threads);   // after peak: the forward's
}

// timing.csv rows of one series (`ex`: the exact series at its d, for speedups); returns
// the medians of both, for the crossover.
void series_rows(const Config& cfg, const Series& s, const Series* ex, const std::vector<std::size_t>& Ls, int threads,
                 double gemm_gflops, Table& t, std::vector<std::optional<double>>& mine,
                 std::vector<std::optional<double>>& theirs) {
    const Variant& var = cfg.variants[s.variant];
    for (std::size_t li = 0; li < Ls.size(); ++li) {
        const CellResult& c = s.cells[li];
        std::vector<std::string> row = {var.name, format_count(Ls[li]), format_count(s.d), var.exact ? "" : format_count(s.m),
                                        dtype_name(cfg.dtype), std::to_string(threads),
                                        format_count(c.skipped ? cfg.timing.repeats : c.runs)};
        const CellResult* e = ex ? &ex->cells[li] : nullptr;
        std::optional<double> speedup;
        if (!c.skipped && e && !e->skipped) speedup = e->median / c.median;
        mine.push_back(c.skipped ? std::nullopt : std::optional<double>(c.median));
        theirs.push_back(e && !e->skipped ? std::optional<double>(e->median) : std::nullopt);
        if (c.skipped) {
            // every column after the cell's keys (variant .. repeats), before status
            while (row.size() + 1 < timing_columns(cfg.timing.backward).size()) row.push_back("");
        } else {
            for (double v : {c.median, c.min, c.max, c.flops / c.median / 1e9}) row.push_back(format_number(v));
            row.push_back(format_number(c.median / (c.flops / (gemm_gflops * 1e9))));
            row.push_back(format_number(speedup));
            row.push_back(format_count(c.peak));
            for (double v : {c.phases.projection, c.phases.features, c.phases.kv, c.phases.normalise})
                row.push_back(format_number(opt_num(v)));
            if (cfg.timing.backward) {
                row.push_back(format_number(c.backward));
                row.push_back(format_number(c.backward ? std::optional<double>(*c.backward / c.median) : std::nullopt));
            }
        }
        row.push_back(c.status);
        t.rows.push_back(std::move(row));
    }
}

// The Markdown note on where a FAVOR series overtakes exact attention.
std::string crossover_note(const Config& cfg, const Series& s, const Series& ex, const std::vector<std::size_t>& Ls,
                           const std::vector<std::optional<double>>& mine, const std::vector<std::optional<double>>& theirs) {
    std::ostringstream notes;
    const auto x = crossover_L(Ls, mine, theirs);
    notes << "- **" << cfg.variants[s.variant].name << "**, m = " << s.m << ", d = " << s.d
          << " (dv = " << cfg.inputs.d_v.value_or(s.d) << "): ";
    if (x) notes << "faster than exact from L = " << *x << " on (every larger L measured)";
    else notes << "not faster than exact at every L from some point on, among the L where both were measured";
    // The FLOP model's crossover: FAVOR's flops (linear in L) equal exact's (quadratic), 2m
    // for maps of m columns at dv = d (3m for trig and hyperbolic, 2m columns).
    const std::size_t dv = cfg.inputs.d_v.value_or(s.d);
    const double model = favor_attention_flops(*cfg.variants[s.variant].map, 1, 1, s.d, dv, s.m) /
                         exact_attention_flops(1, 1, s.d, dv, false);
    if (const auto star = crossover_interpolated(Ls, mine, theirs))
        notes << "; crossover L* = " << std::llround(*star) << " (log-log interpolation of the time ratio; the FLOP model's "
              << std::llround(model) << ", L* / model = " << double(std::llround(100.0 * *star / model)) / 100.0 << ")";
    else if (x)
        notes << "; the crossover L* is below the smallest L measured (the FLOP model's " << std::llround(model) << ")";
    std::size_t skipped_from = 0;
    for (std::size_t li = Ls.size(); li-- > 0;)
        if (ex.cells[li].skipped) skipped_from = Ls[li];
    if (skipped_from)
        notes << "; exact skipped from L = " << skipped_from << " (over the time budget of "
              << fmt_seconds(cfg.timing.time_budget_s) << " s)";
    notes << ".\n";
    return notes.str();
}

// Measures every cell, L by L and at each L the series in order (a series' budget reads its
// cells at smaller L), reporting progress per cell.
template <class T>
void measure_cells(const Config& cfg, const RunOptions& opt, int threads, std::vector<Series>& series) {
    const double scale = cfg.inputs.scale.front();
    const std::size_t total = series.size() * cfg.inputs.L.size();
    std::size_t done = 0;
    if (opt.progress) opt.progress(0, total);
    for (std::size_t L : cfg.inputs.L)
        for (std::size_t d : cfg.inputs.d) {
            const std::size_t dv = cfg.inputs.d_v.value_or(d);
            InputsOf<T> qkv = random_inputs_as<T>(cfg.seed, L, d, dv, scale, {cfg.inputs.family, 0, cfg.file + ": inputs.scale"},
                                                  threads);   // straight into T: no float64 copy
            const Inputs<T> in{std::move(qkv.q), std::move(qkv.k), std::move(qkv.v),
                               cfg.timing.backward ? cast_mat<T>(upstream_gradient(cfg.seed, L, dv, 0)) : Mat<T>()};
            for (Series& s : series) {
                if (s.d != d) continue;
                const Variant& var = cfg.variants[s.variant];
                CellResult c;
                c.flops = var.exact ? exact_attention_flops(L, L, d, dv, cfg.causal)
                                    : favor_attention_flops(*var.map, L, L, d, dv, s.m) +
                                          support_flops(var.hybrid, L, d, dv, cfg.causal);
                apply_budget(cfg, s, c);
                if (!c.skipped) measure(cfg, var, in, s.m, threads, c);
                s.cells.push_back(c);
                if (opt.progress) opt.progress(++done, total);
            }
        }
}

// The notes' opening paragraph: what the times are and how the gemm ratio is counted.
std::string timing_preamble(const Config& cfg, int threads, bool reset_ok, double gemm_gflops, bool float32) {
    std::ostringstream notes;
    notes << "Times are of the attention given its inputs (and W): medians of " << cfg.timing.repeats << " runs"
          << (cfg.timing.min_time_s > 0 ? " (or more, until the timed runs of a cell add up to " +
                                              fmt_seconds(cfg.timing.min_time_s) + " s: the column repeats)"
                                        : std::string())
          << " after " << cfg.timing.warmup << " warm-up run(s), on " << threads
          << " thread(s); projection_s (drawing W) is reported apart and not included. "
          << "gflops counts matrix-product flops only (2 M N K). peak_bytes is the peak resident "
          << "set of the process during the cell (inputs included)"
          << (reset_ok ? "" : "; the peak could not be reset between cells, so it is the peak since start")
          << ". FAVOR rows time the fused forward (favor_forward; causal: the blocked prefix-sum pass); "
          << (std::any_of(cfg.variants.begin(), cfg.variants.end(), [](const Variant& v) { return v.hybrid.active(); })
                  ? "hybrid rows (window, sinks) time hybrid_forward (the fast path; top-k the reference path), their "
                    "gflops the remainder's plus 2 (d + d_v) per support pair, no phase columns; "
                  : "")
          << "projection_s is the median of the timed runs, features_s, kv_s and normalise_s come from one "
          << "unfused run after them (favor_attention's steps), to show where the time goes; normalise_s "
          << "includes the product phiQ (phiK^T [V, 1]). gemm_ratio = median_s / (gflops counted at the "
          << (float32 ? "sgemm" : "dgemm") << " rate measured at the start of this run: "
          << format_number(gemm_gflops) << " GFLOP/s, " << gemm_probe_n() << "^3 on " << threads << " thread(s))";
    if (cfg.timing.backward)
        notes << ". backward_s is the median of as many runs of the backward pass for the upstream gradient G of the "
              << "gradient metrics (N(0, 1) from the seed), after as many warm-up runs: exact from the Out and row "
              << "log-sum-exps its forward saved, as in a training step (exact_attention_backward_saved), FAVOR "
              << "from the state its fused forward saved (favor_backward_saved; causal: from both feature "
              << "matrices) with the estimator fitted to the inputs; backward_ratio = backward_s / median_s; "
              << "empty for maps without a gradient";
    notes << ".\n\n";
    return notes.str();
}

template <class T>
RunResult run_timing(const Config& cfg, const RunOptions& opt, nlohmann::json info) {
    const int threads = resolve_threads(opt.threads);
    const std::vector<std::size_t>& Ls = cfg.inputs.L;   // sorted and unique (config.cpp)
    std::vector<Series> series;
    const TimingCells grid(cfg);
    for (const TimingSeries& s : grid.series()) series.push_back({s.d, s.variant, s.m, {}});
    // The gemm rate of this machine and build, measured now: gemm_ratio's denominator.
    const double gemm_gflops = gemm_rate<T>(gemm_probe_n(), threads, 3);
    const bool reset_ok = reset_peak_rss();
    measure_cells<T>(cfg, opt, threads, series);

    RunResult r;
    r.timing.columns = timing_columns(cfg.timing.backward);
    std::string notes = timing_preamble(cfg, threads, reset_ok, gemm_gflops, sizeof(T) == 4);
    for (const Series& s : series) {
        const Series* ex = nullptr;   // the exact series at this d, for speedups
        for (const Series& e : series)
            if (e.d == s.d && cfg.variants[e.variant].exact && !ex) ex = &e;
        std::vector<std::optional<double>> mine, theirs;
        series_rows(cfg, s, ex, Ls, threads, gemm_gflops, r.timing, mine, theirs);
        if (!cfg.variants[s.variant].exact && ex) notes += crossover_note(cfg, s, *ex, Ls, mine, theirs);
    }
    r.notes_md = notes;
    info["timing"] = {{"threads", threads}, {"peak_rss_reset", reset_ok}, {"scale", cfg.inputs.scale.front()},
                      {"gemm_gflops", gemm_gflops}, {"gemm_n", gemm_probe_n()}};
    r.info = std::move(info);
    return r;
}

}  // namespace

RunResult run_timing_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info) {
    return with_dtype(cfg.dtype, [&](auto t) { return run_timing<decltype(t)>(cfg, opt, std::move(info)); });
}

}  // namespace favor
