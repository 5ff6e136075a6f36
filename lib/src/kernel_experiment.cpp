// The "kernel" experiment: empirical MSE of SM(x, y) estimators for pairs of common length
// `norm` at angle `angle`, against Lemma 2 and the Theorem 2 bound (the paper's Fig. 2).
#include <atomic>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <optional>
#include <xtensor/xview.hpp>

#include "favor/error.hpp"
#include "favor/estimator.hpp"
#include "experiment_parts.hpp"
#include "favor/experiment.hpp"
#include "favor/cells.hpp"
#include "favor/parallel.hpp"
#include "favor/projections.hpp"
#include "favor/report.hpp"
#include "favor/structured.hpp"
#include "favor/rng.hpp"
#include "favor/theory.hpp"

namespace favor {

namespace {
// A (norm, angle) pair: x and y of length `norm` at angle `angle`.
struct KernelPoint {
    double norm, angle;
};
struct KernelCell {
    std::size_t first;                 // grid index of its first point (the journal's key)
    std::size_t variant, d, m;
    std::vector<KernelPoint> points;   // the (norm, angle) pairs of it in this shard
};
}  // namespace

// summary.csv: one row per (cell, point) from the trials' squared errors `sq` and the
// closed forms `th` at the trials' pairs.
Table kernel_summary(const Config& cfg, const std::vector<KernelCell>& cells, const std::vector<std::vector<double>>& sq,
                     const std::vector<std::vector<double>>& th) {
    const std::size_t T = cfg.trials;
    RunResult res;
    res.summary.columns = {"variant", "features", "projection", "d", "m", "norm", "angle", "trials",
                           "sm", "mse", "mse_sem", "mse_theory", "theorem2_bound"};
    for (std::size_t ci = 0; ci < cells.size(); ++ci) {
        const KernelCell& c = cells[ci];
        const Variant& var = cfg.variants[c.variant];
        const std::size_t n = c.points.size();
        for (std::size_t r = 0; r < n; ++r) {
            const double l = c.points[r].norm, a = c.points[r].angle;
            const double x2 = l * l, y2 = l * l, xy = l * l * std::cos(a);
            std::vector<double> errs(T);
            double theory_sum = 0.0;
            for (std::size_t t = 0; t < T; ++t) errs[t] = sq[ci][t * n + r], theory_sum += th[ci][t * n + r];
            const Stats s = describe(errs);
            std::optional<double> theory, bound;
            if (var.projection.entry().has(kIndependentRows) && std::isfinite(theory_sum)) theory = theory_sum / double(T);
            if (var.projection == Projection("orthogonal") && var.map->name() == "positive")
                bound = theorem2_bound(x2, y2, xy, c.m, c.d);
            res.summary.rows.push_back({var.name, var.features_label(), var.projection_label(),
                                        format_count(c.d), format_count(c.m), format_number(l),
                                        format_number(a), format_count(T), format_number(std::exp(xy)),
                                        format_number(s.mean), format_number(s.sem), format_number(theory),
                                        format_number(bound)});
        }
    }
    return res.summary;
}

// One trial of one cell: the squared errors (and, for iid W, the closed-form MSE) at each of
// its points. Rows: x = norm u, y = norm (cos a u + sin a v), with (u, v) an orthonormal pair
// drawn afresh for each trial (the first two rows of a Haar block). iid and ORF estimators
// are rotation invariant, so this changes nothing for them; for structured projections
// (hadamard, givens, and qmc, whose Sobol points are axis-aligned) it reports the MSE averaged
// over pair orientations, not that of one axis-aligned pair, which is their worst case.
void kernel_trial(const Config& cfg, const KernelCell& c, std::size_t trial, double* sq, double* th) {
    const std::size_t n = c.points.size();
    const Variant& var = cfg.variants[c.variant];
    const Mat<double> frame = orthogonal_block(stream_key({cfg.seed, tag("kernel-pair-frame"), c.d, trial}), c.d, true);
    const Estimator<double> est = make_estimator<double>(var, c.m, c.d, cfg.seed, trial);
    for (std::size_t r = 0; r < n; ++r) {
        const double l = c.points[r].norm, a = c.points[r].angle;
        Mat<double> x = Mat<double>::from_shape({1, c.d}), y = Mat<double>::from_shape({1, c.d});
        for (std::size_t c2 = 0; c2 < c.d; ++c2) {
            x(0, c2) = l * frame(0, c2);
            y(0, c2) = l * (std::cos(a) * frame(0, c2) + std::sin(a) * frame(1, c2));
        }
        double xy = 0.0;
        for (std::size_t c2 = 0; c2 < c.d; ++c2) xy += x(0, c2) * y(0, c2);
        const double e = kernel_estimate(*est.map, est.W, x, y) - std::exp(xy);
        sq[r] = e * e;
        if (var.projection.entry().has(kIndependentRows)) th[r] = pair_mse_at(*est.map->resolve(x, y), x, y, c.m).value_or(th[r]);
    }
}

namespace {

// The cells of the grid (cells.hpp) that `shard` owns, grouped: one KernelCell per
// (variant, d, m) with its (norm, angle) pairs in grid order.
std::vector<KernelCell> owned_cells(const Config& cfg, const KernelCells& grid, const std::vector<std::size_t>& owned) {
    std::vector<KernelCell> cells;
    for (std::size_t cell : owned) {
        const KernelIndex at = grid.at(cell);
        const std::size_t d = cfg.kernel.d[at.d], m = cfg.m[at.m];
        if (cells.empty() || cells.back().variant != at.variant || cells.back().d != d || cells.back().m != m)
            cells.push_back({cell, at.variant, d, m, {}});
        cells.back().points.push_back({cfg.kernel.norm[at.norm], cfg.kernel.angle[at.angle]});
    }
    return cells;
}

// The trials' results of a run: sq[cell][trial * npoints + point] is the squared error of one
// trial's estimate; th the map's closed-form MSE (iid W) at that trial's pair, with the
// parameters fitted to it (maps such as saderf are not rotation invariant, so it depends on
// the trial's frame); NaN where there is none. An item is one (cell, trial), trials fastest.
struct KernelResults {
    std::vector<std::vector<double>> sq, th;
    KernelResults(const std::vector<KernelCell>& cells, std::size_t T) : sq(cells.size()), th(cells.size()) {
        for (std::size_t c = 0; c < cells.size(); ++c) {
            sq[c].resize(T * cells[c].points.size());
            th[c].assign(T * cells[c].points.size(), std::numeric_limits<double>::quiet_NaN());
        }
    }
};

// A journal entry: two rows, the squared errors of the cell's points in this trial and their
// closed forms, in the shortest form that reads back to the same double.
void record_trial(Journal& j, const KernelCell& c, std::size_t trial, const double* sq, const double* th) {
    JournalRows rows(2);   // row 0: squared errors; row 1: closed forms (empty cell: none)
    for (std::size_t r = 0; r < c.points.size(); ++r) {
        rows[0].push_back(format_number(sq[r]));
        rows[1].push_back(std::isnan(th[r]) ? std::string() : format_number(th[r]));
    }
    j.record(c.first, trial, rows);
}

// The items found in the journal (resume), each checked to have this run's shape, read into
// `res` and marked finished; returns how many.
std::size_t resume_trials(const Journal& j, const std::vector<KernelCell>& cells, std::size_t T, KernelResults& res,
                          std::vector<char>& finished) {
    std::size_t resumed = 0;
    for (std::size_t item = 0; item < finished.size(); ++item) {
        const KernelCell& c = cells[item / T];
        const JournalRows* rows = j.find(c.first, item % T);
        if (!rows) continue;
        const std::size_t n = c.points.size();
        if (rows->size() != 2 || (*rows)[0].size() != n || (*rows)[1].size() != n)
            throw Error(j.path() + ": the entry of cell " + std::to_string(c.first) +
                        " does not have this run's shape (rerun without --resume)");
        for (std::size_t r = 0; r < n; ++r) {
            res.sq[item / T][(item % T) * n + r] = journal_kernel_value(j, (*rows)[0][r], false);
            res.th[item / T][(item % T) * n + r] = journal_kernel_value(j, (*rows)[1][r], true);
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
    const std::vector<KernelCell> cells = owned_cells(cfg, grid, owned);
    info["shard"]["cells"] = owned.size();   // (norm, angle) points: summary rows

    const std::size_t T = cfg.trials, total = cells.size() * T;
    KernelResults res(cells, T);
    std::vector<char> finished(total, 0);
    const std::size_t resumed = opt.journal ? resume_trials(*opt.journal, cells, T, res, finished) : 0;
    std::atomic<std::size_t> done{resumed};
    if (opt.progress) opt.progress(resumed, total);

    parallel_for(total, resolve_threads(opt.threads), [&](std::size_t item) {
        if (finished[item] || (opt.stop && opt.stop->load())) return;
        const KernelCell& c = cells[item / T];
        const std::size_t trial = item % T, n = c.points.size();
        double* sq = &res.sq[item / T][trial * n];
        double* th = &res.th[item / T][trial * n];
        kernel_trial(cfg, c, trial, sq, th);
        if (opt.journal) record_trial(*opt.journal, c, trial, sq, th);
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
    r.summary = kernel_summary(cfg, cells, res.sq, res.th);
    return r;
}

}  // namespace favor
