// The "kernel" experiment: empirical MSE of SM(x, y) estimators for pairs of lengths `norm`
// (or `norm` and `norm_y`) at angle `angle`, against Lemma 2 and the Theorem 2 bound (the
// paper's Fig. 2); with "bias", the relative bias against its closed form (fixed norms: the
// Bessel kernel of theory.hpp).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <optional>
#include <xtensor/xview.hpp>

#include "favor/core/error.hpp"
#include "favor/estimators/estimator.hpp"
#include "experiments/experiment_parts.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/structured.hpp"
#include "favor/estimators/theory.hpp"
#include "favor/experiments/cells.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/io/npy.hpp"
#include "favor/io/report.hpp"

namespace favor {

namespace {
// A point: x of length `norm` and y of length `norm_y` at angle `angle`; with "pairs", the
// rows of q and k it was made from.
struct KernelPoint {
    double norm, norm_y, angle;
    std::size_t q_row = 0, k_row = 0;
    std::vector<double> x, y;   // "pairs": the scaled rows themselves (empty: placed in the trial's frame)
};
struct KernelCell {
    std::size_t first;                 // grid index of its first point (the journal's key)
    std::size_t variant, d, m;
    std::vector<KernelPoint> points;   // the (norm, norm_y, angle) points of it in this shard
};

// The rows of a "pairs" file as (rows, d), flattened over its leading dimensions; Error
// naming the field and file unless it is (..., rows, d) with the config's d, finite, not empty.
NpyArray pair_rows(const std::string& field, const std::string& path, std::size_t d) {
    NpyArray a;
    try {
        a = read_npy(path);
    } catch (const Error& e) {
        throw Error("pairs." + field + ": " + e.what());
    }
    if (a.shape.size() < 2 || a.shape.back() != d || a.data.empty())
        throw Error("pairs." + field + ": " + path + ": shape " + shape_str(a.shape) +
                    ", needs (..., rows, d) with rows >= 1 and d = " + std::to_string(d) + " (the config's d)");
    if (const auto bad = first_nonfinite(a))
        throw Error("pairs." + field + ": " + path + ": entry " + std::to_string(*bad) + " is not finite");
    return a;
}

// The "pairs" points: pair p is (q_i, k_j) with i = floor(nq u(2p)), j = floor(nk u(2p + 1))
// from the stream (seed, "kernel-pairs", d), rows scaled by d^-1/4 as attention scales them;
// a point keeps the rows themselves, at their own coordinates (what a fitted diagonal such as
// saderf's Psi acts on), and |x|, |y| and their angle for the table.
std::vector<KernelPoint> data_pairs(const Config& cfg) {
    const std::size_t d = cfg.kernel.d.front();
    const NpyArray q = pair_rows("q", cfg.kernel.pairs_q, d), k = pair_rows("k", cfg.kernel.pairs_k, d);
    const std::size_t nq = q.data.size() / d, nk = k.data.size() / d;
    const std::uint64_t key = stream_key({cfg.seed, tag("kernel-pairs"), d});
    const double scale = 1.0 / std::sqrt(std::sqrt(double(d)));
    std::vector<KernelPoint> pts;
    for (std::size_t p = 0; p < cfg.kernel.pairs; ++p) {
        const std::size_t i = std::min(nq - 1, std::size_t(double(nq) * uniform_at(key, 2 * p)));
        const std::size_t j = std::min(nk - 1, std::size_t(double(nk) * uniform_at(key, 2 * p + 1)));
        double x2 = 0, y2 = 0, xy = 0;
        std::vector<double> xs(d), ys(d);
        for (std::size_t c = 0; c < d; ++c) {
            const double x = scale * q.data[i * d + c], y = scale * k.data[j * d + c];
            xs[c] = x, ys[c] = y;
            x2 += x * x, y2 += y * y, xy += x * y;
        }
        const double cosine = x2 > 0 && y2 > 0 ? std::clamp(xy / std::sqrt(x2 * y2), -1.0, 1.0) : 1.0;
        pts.push_back({std::sqrt(x2), std::sqrt(y2), std::acos(cosine), i, j, std::move(xs), std::move(ys)});
    }
    return pts;
}

// E[phi(x).phi(y)] / SM(x, y) in closed form, if there is one: 1 for a map that estimates SM
// with rows N(0, I_d); the Bessel kernel (theory.hpp) for positive, hyperbolic (the same mean)
// and trig with fixed norms in square blocks, whose rows are then uniform on the sphere of
// radius sqrt(d) once the pair's random frame is averaged over (exact for orthogonal-fixed;
// for hadamard-fixed at d = next_pow2(d) only in that average, as the kernel runner draws it).
std::optional<double> mean_ratio_theory(const Variant& var, std::size_t d, double x2, double y2, double xy) {
    const ProjectionEntry& e = var.projection.entry();
    const std::string map = var.map->name();
    if (e.has(kGaussianRows) && var.map->estimates_softmax()) return 1.0;
    if (!e.has(kFixedNorm) || e.block_rows(d) != d) return std::nullopt;
    if (map == "positive" || map == "hyperbolic") return fixed_norm_positive_ratio(x2, y2, xy, d);
    if (map == "trig") return fixed_norm_trig_ratio(x2, y2, xy, d);
    return std::nullopt;
}
}  // namespace

// summary.csv: one row per (cell, point) from the trials' squared errors `sq` and the
// closed forms `th` at the trials' pairs.
// With "bias", rel[ci][t * n + r] is the trial's estimate / SM - 1, summarised as rel_bias
// (its mean), rel_bias_sem and rel_bias_theory (mean_ratio_theory - 1).
Table kernel_summary(const Config& cfg, const std::vector<KernelCell>& cells, const std::vector<std::vector<double>>& sq,
                     const std::vector<std::vector<double>>& th, const std::vector<std::vector<double>>& rel) {
    const std::size_t T = cfg.trials;
    const bool split = !cfg.kernel.norm_y.empty() || cfg.kernel.pairs, pairs = cfg.kernel.pairs > 0;
    RunResult res;
    res.summary.columns = {"variant", "features", "projection", "d", "m", "norm", "angle", "trials",
                           "sm", "mse", "mse_sem", "mse_theory", "theorem2_bound"};
    if (split) res.summary.columns[5] = "norm_x", res.summary.columns.insert(res.summary.columns.begin() + 6, "norm_y");
    if (pairs) res.summary.columns.insert(res.summary.columns.begin() + 5, {"q_row", "k_row"});
    if (cfg.kernel.bias) res.summary.columns.insert(res.summary.columns.end(), {"rel_bias", "rel_bias_sem", "rel_bias_theory"});
    for (std::size_t ci = 0; ci < cells.size(); ++ci) {
        const KernelCell& c = cells[ci];
        const Variant& var = cfg.variants[c.variant];
        const std::size_t n = c.points.size();
        for (std::size_t r = 0; r < n; ++r) {
            const double l = c.points[r].norm, ly = c.points[r].norm_y, a = c.points[r].angle;
            const double x2 = l * l, y2 = ly * ly, xy = l * ly * std::cos(a);
            std::vector<double> errs(T);
            double theory_sum = 0.0;
            for (std::size_t t = 0; t < T; ++t) errs[t] = sq[ci][t * n + r], theory_sum += th[ci][t * n + r];
            const Stats s = describe(errs);
            std::optional<double> theory, bound;
            if (var.projection.entry().has(kIndependentRows) && std::isfinite(theory_sum)) theory = theory_sum / double(T);
            if (var.projection == Projection("orthogonal") && var.map->name() == "positive")
                bound = theorem2_bound(x2, y2, xy, c.m, c.d);
            std::vector<std::string> row = {var.name, var.features_label(), var.projection_label(),
                                            format_count(c.d), format_count(c.m), format_number(l),
                                            format_number(a), format_count(T), format_number(std::exp(xy)),
                                            format_number(s.mean), format_number(s.sem), format_number(theory),
                                            format_number(bound)};
            if (split) row.insert(row.begin() + 6, format_number(ly));
            if (pairs) row.insert(row.begin() + 5, {format_count(c.points[r].q_row), format_count(c.points[r].k_row)});
            if (cfg.kernel.bias) {
                std::vector<double> rb(T);
                for (std::size_t t = 0; t < T; ++t) rb[t] = rel[ci][t * n + r];
                const Stats b = describe(rb);
                const std::optional<double> ratio = mean_ratio_theory(var, c.d, x2, y2, xy);
                row.insert(row.end(), {format_number(b.mean), format_number(b.sem),
                                       format_number(ratio ? std::optional<double>(*ratio - 1.0) : std::nullopt)});
            }
            res.summary.rows.push_back(std::move(row));
        }
    }
    return res.summary;
}

// One trial of one cell: the squared errors (and, for iid W, the closed-form MSE) at each of
// its points, and in rel the estimate / SM - 1. Rows: x = norm u, y = norm_y (cos a u + sin a v),
// with (u, v) an orthonormal pair
// drawn afresh for each trial (the first two rows of a Haar block). iid and ORF estimators
// are rotation invariant, so this changes nothing for them; for structured projections
// (hadamard, givens, and qmc, whose Sobol points are axis-aligned) it reports the MSE averaged
// over pair orientations, not that of one axis-aligned pair, which is their worst case.
// "pairs" points are used at their own coordinates (no frame): a fitted diagonal (saderf's
// Psi) sees the rows as the model made them.
void kernel_trial(const Config& cfg, const KernelCell& c, std::size_t trial, double* sq, double* th, double* rel) {
    const std::size_t n = c.points.size();
    const Variant& var = cfg.variants[c.variant];
    const Mat<double> frame = orthogonal_block(stream_key({cfg.seed, tag("kernel-pair-frame"), c.d, trial}), c.d, true);
    const Estimator<double> est = make_estimator<double>(var, c.m, c.d, cfg.seed, trial);
    for (std::size_t r = 0; r < n; ++r) {
        const double l = c.points[r].norm, ly = c.points[r].norm_y, a = c.points[r].angle;
        Mat<double> x = Mat<double>::from_shape({1, c.d}), y = Mat<double>::from_shape({1, c.d});
        const KernelPoint& pt = c.points[r];
        for (std::size_t c2 = 0; c2 < c.d; ++c2) {   // "pairs": the rows as they are
            x(0, c2) = pt.x.empty() ? l * frame(0, c2) : pt.x[c2];
            y(0, c2) = pt.y.empty() ? ly * (std::cos(a) * frame(0, c2) + std::sin(a) * frame(1, c2)) : pt.y[c2];
        }
        double xy = 0.0;
        for (std::size_t c2 = 0; c2 < c.d; ++c2) xy += x(0, c2) * y(0, c2);
        const double e = kernel_estimate(*est.map, est.W, x, y) - std::exp(xy);
        sq[r] = e * e;
        rel[r] = e / std::exp(xy);
        if (var.projection.entry().has(kIndependentRows)) th[r] = pair_mse_at(*est.map->resolve(x, y), x, y, c.m).value_or(th[r]);
    }
}

namespace {

// The cells of the grid (cells.hpp) that `shard` owns, grouped: one KernelCell per
// (variant, d, m) with its (norm, angle) pairs in grid order.
std::vector<KernelCell> owned_cells(const Config& cfg, const KernelCells& grid, const std::vector<std::size_t>& owned,
                                    const std::vector<KernelPoint>& pairs) {
    std::vector<KernelCell> cells;
    for (std::size_t cell : owned) {
        const KernelIndex at = grid.at(cell);
        const std::size_t d = cfg.kernel.d[at.d], m = cfg.m[at.m];
        if (cells.empty() || cells.back().variant != at.variant || cells.back().d != d || cells.back().m != m)
            cells.push_back({cell, at.variant, d, m, {}});
        if (!pairs.empty()) {
            cells.back().points.push_back(pairs[at.norm]);
            continue;
        }
        const double l = cfg.kernel.norm[at.norm];
        cells.back().points.push_back({l, cfg.kernel.norm_y.empty() ? l : cfg.kernel.norm_y[at.norm_y],
                                       cfg.kernel.angle[at.angle], 0, 0, {}, {}});
    }
    return cells;
}

// The trials' results of a run: sq[cell][trial * npoints + point] is the squared error of one
// trial's estimate; th the map's closed-form MSE (iid W) at that trial's pair, with the
// parameters fitted to it (maps such as saderf are not rotation invariant, so it depends on
// the trial's frame); NaN where there is none. An item is one (cell, trial), trials fastest.
// rel: the estimates / SM - 1.
struct KernelResults {
    std::vector<std::vector<double>> sq, th, rel;
    KernelResults(const std::vector<KernelCell>& cells, std::size_t T)
        : sq(cells.size()), th(cells.size()), rel(cells.size()) {
        for (std::size_t c = 0; c < cells.size(); ++c) {
            sq[c].resize(T * cells[c].points.size());
            rel[c].resize(T * cells[c].points.size());
            th[c].assign(T * cells[c].points.size(), std::numeric_limits<double>::quiet_NaN());
        }
    }
};

// A journal entry: two rows, the squared errors of the cell's points in this trial and their
// closed forms, in the shortest form that reads back to the same double; with "bias" a third,
// the relative errors.
void record_trial(Journal& j, const KernelCell& c, std::size_t trial, const double* sq, const double* th,
                  const double* rel, bool bias) {
    JournalRows rows(bias ? 3 : 2);   // row 0: squared errors; row 1: closed forms (empty cell: none)
    for (std::size_t r = 0; r < c.points.size(); ++r) {
        rows[0].push_back(format_number(sq[r]));
        rows[1].push_back(std::isnan(th[r]) ? std::string() : format_number(th[r]));
        if (bias) rows[2].push_back(format_number(rel[r]));
    }
    j.record(c.first, trial, rows);
}

// The items found in the journal (resume), each checked to have this run's shape, read into
// `res` and marked finished; returns how many.
std::size_t resume_trials(const Journal& j, const std::vector<KernelCell>& cells, std::size_t T, bool bias,
                          KernelResults& res, std::vector<char>& finished) {
    std::size_t resumed = 0;
    for (std::size_t item = 0; item < finished.size(); ++item) {
        const KernelCell& c = cells[item / T];
        const JournalRows* rows = j.find(c.first, item % T);
        if (!rows) continue;
        const std::size_t n = c.points.size();
        const std::size_t nrows = bias ? 3 : 2;
        bool shaped = rows->size() == nrows;
        for (std::size_t k = 0; shaped && k < nrows; ++k) shaped = (*rows)[k].size() == n;
        if (!shaped)
            throw Error(j.path() + ": the entry of cell " + std::to_string(c.first) +
                        " does not have this run's shape (rerun without --resume)");
        for (std::size_t r = 0; r < n; ++r) {
            res.sq[item / T][(item % T) * n + r] = journal_kernel_value(j, (*rows)[0][r], false);
            res.th[item / T][(item % T) * n + r] = journal_kernel_value(j, (*rows)[1][r], true);
            if (bias) res.rel[item / T][(item % T) * n + r] = journal_signed_value(j, (*rows)[2][r]);
        }
        finished[item] = 1;
        ++resumed;
    }
    return resumed;
}

}  // namespace

RunResult run_kernel_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info) {
    const KernelCells grid(cfg);
    const std::vector<std::size_t> owned = grid.owned(opt.shard);
    const std::vector<KernelCell> cells = owned_cells(cfg, grid, owned, cfg.kernel.pairs ? data_pairs(cfg) : std::vector<KernelPoint>{});
    info["shard"]["cells"] = owned.size();   // (norm, angle) points: summary rows

    const std::size_t T = cfg.trials, total = cells.size() * T;
    KernelResults res(cells, T);
    std::vector<char> finished(total, 0);
    const std::size_t resumed = opt.journal ? resume_trials(*opt.journal, cells, T, cfg.kernel.bias, res, finished) : 0;
    std::atomic<std::size_t> done{resumed};
    if (opt.progress) opt.progress(resumed, total);

    parallel_for(total, resolve_threads(opt.threads), [&](std::size_t item) {
        if (finished[item] || (opt.stop && opt.stop->load())) return;
        const KernelCell& c = cells[item / T];
        const std::size_t trial = item % T, n = c.points.size();
        double* sq = &res.sq[item / T][trial * n];
        double* th = &res.th[item / T][trial * n];
        double* rel = &res.rel[item / T][trial * n];
        kernel_trial(cfg, c, trial, sq, th, rel);
        if (opt.journal) record_trial(*opt.journal, c, trial, sq, th, rel, cfg.kernel.bias);
        finished[item] = 1;
        const std::size_t now = done.fetch_add(1) + 1;
        if (opt.progress) opt.progress(now, total);
    });

    RunResult r;
    r.items_done = done.load(), r.items_total = total, r.items_resumed = resumed;
    if (resumed) info["resumed_items"] = resumed;
    r.info = std::move(info);
    if (r.items_done < total) {
        r.complete = false;
        return r;
    }
    r.summary = kernel_summary(cfg, cells, res.sq, res.th, res.rel);
    return r;
}

}  // namespace favor
