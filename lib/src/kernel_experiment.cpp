// The "kernel" experiment: empirical MSE of SM(x, y) estimators for pairs of common length
// `norm` at angle `angle`, against Lemma 2 and the Theorem 2 bound (the paper's Fig. 2).
#include <cmath>
#include <optional>
#include <xtensor/xview.hpp>

#include "favor/error.hpp"
#include "favor/experiment_parts.hpp"
#include "favor/feature_maps.hpp"
#include "favor/metrics.hpp"
#include "favor/parallel.hpp"
#include "favor/projections.hpp"
#include "favor/rng.hpp"
#include "favor/theory.hpp"

namespace favor {

namespace {
struct KernelCell {
    std::size_t variant, d, m;
    std::vector<std::size_t> points;   // indices into the (norm, angle) list in this shard
};
}  // namespace

RunResult run_kernel_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info) {
    const std::size_t P = cfg.norm.size() * cfg.angle.size();
    for (std::size_t d : cfg.d)
        if (d < 2) throw Error(cfg.file + ": d: must be >= 2 for pairs at an angle, got " + std::to_string(d));
    // Grid: variant x d x m x norm x angle; a shard keeps every count-th point.
    std::vector<KernelCell> cells;
    std::size_t grid = 0;
    for (std::size_t v = 0; v < cfg.variants.size(); ++v)
        for (std::size_t d : cfg.d)
            for (std::size_t m : cfg.m) {
                KernelCell c{v, d, m, {}};
                for (std::size_t p = 0; p < P; ++p, ++grid)
                    if (grid % opt.shard.count == opt.shard.index) c.points.push_back(p);
                if (!c.points.empty()) cells.push_back(std::move(c));
            }

    const std::size_t T = cfg.trials;
    // sq[cell][trial * npoints + point]: squared error of one trial's estimate.
    std::vector<std::vector<double>> sq(cells.size());
    for (std::size_t c = 0; c < cells.size(); ++c) sq[c].resize(T * cells[c].points.size());

    parallel_for(cells.size() * T, resolve_threads(opt.threads), [&](std::size_t item) {
        const KernelCell& c = cells[item / T];
        const std::size_t trial = item % T, n = c.points.size();
        const Variant& var = cfg.variants[c.variant];
        // Rows: x = norm u, y = norm (cos a u + sin a v), with (u, v) an orthonormal pair drawn
        // afresh for each trial (the first two rows of a Haar block). iid and ORF estimators are
        // rotation invariant, so this changes nothing for them; for structured projections
        // (hadamard, givens) it reports the MSE averaged over pair orientations, not the MSE of
        // one axis-aligned pair, which is their worst case.
        const Mat<double> frame = orthogonal_block(stream_key({cfg.seed, tag("kernel-pair-frame"), c.d, trial}), c.d, true);
        Mat<double> X = Mat<double>::from_shape({n, c.d}), Y = Mat<double>::from_shape({n, c.d});
        for (std::size_t r = 0; r < n; ++r) {
            const double l = cfg.norm[c.points[r] / cfg.angle.size()];
            const double a = cfg.angle[c.points[r] % cfg.angle.size()];
            for (std::size_t k = 0; k < c.d; ++k) {
                X(r, k) = l * frame(0, k);
                Y(r, k) = l * (std::cos(a) * frame(0, k) + std::sin(a) * frame(1, k));
            }
        }
        const Mat<double> W = draw_projection(var.projection, c.m, c.d, cfg.seed, trial);
        for (std::size_t r = 0; r < n; ++r) {
            const Mat<double> x = xt::view(X, xt::range(r, r + 1), xt::all());
            const Mat<double> y = xt::view(Y, xt::range(r, r + 1), xt::all());
            double xy = 0.0;
            for (std::size_t k = 0; k < c.d; ++k) xy += x(0, k) * y(0, k);
            const double e = kernel_estimate(var.map, W, x, y) - std::exp(xy);
            sq[item / T][trial * n + r] = e * e;
        }
    });

    RunResult res;
    res.summary.columns = {"variant", "features", "projection", "d", "m", "norm", "angle", "trials",
                           "sm", "mse", "mse_sem", "mse_theory", "theorem2_bound"};
    for (std::size_t ci = 0; ci < cells.size(); ++ci) {
        const KernelCell& c = cells[ci];
        const Variant& var = cfg.variants[c.variant];
        const std::size_t n = c.points.size();
        for (std::size_t r = 0; r < n; ++r) {
            const double l = cfg.norm[c.points[r] / cfg.angle.size()];
            const double a = cfg.angle[c.points[r] % cfg.angle.size()];
            const double x2 = l * l, y2 = l * l, xy = l * l * std::cos(a);
            std::vector<double> errs(T);
            for (std::size_t t = 0; t < T; ++t) errs[t] = sq[ci][t * n + r];
            const Stats s = describe(errs);
            std::optional<double> theory, bound;
            if (var.projection == Projection::iid) {
                FeatureMap map = var.map;
                if (map.kind == FeatureKind::oprf && map.A_optimal)
                    map.A = oprf_optimal_A((x2 + y2 + 2 * xy) / double(c.d));
                if (auto f = kernel_theory(map, c.m, c.d)) theory = f(x2, y2, xy);
            }
            if (var.projection == Projection::orthogonal && var.map.kind == FeatureKind::positive)
                bound = theorem2_bound(x2, y2, xy, c.m, c.d);
            res.summary.rows.push_back({var.name, var.features_label(), var.projection_label(),
                                        format_count(c.d), format_count(c.m), format_number(l),
                                        format_number(a), format_count(T), format_number(std::exp(xy)),
                                        format_number(s.mean), format_number(s.sem), format_number(theory),
                                        format_number(bound)});
        }
        if (opt.progress) opt.progress(ci + 1, cells.size());
    }
    res.info = std::move(info);
    return res;
}

}  // namespace favor
