// The checks of the tensor commands before any work, and one side's features
// (tensor_requests.hpp).
#include "favor/runs/tensor_requests.hpp"

#include <cmath>
#include <limits>

#include "favor/core/error.hpp"
#include "favor/core/flag_values.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/features.hpp"
#include "favor/experiments/grid.hpp"

namespace favor {

ProjectionDraw resolve_projection(const ProjectionRequest& r) {
    constexpr std::uint64_t u64 = std::numeric_limits<std::uint64_t>::max();
    if (r.projection.empty()) throw Error("projection: --projection: empty value");
    ProjectionDraw p{Projection(r.projection)};
    p.m = parse_uint_text("projection: --m", r.m, 1, kMaxM);
    p.d = parse_uint_text("projection: --d", r.d, 1, kMaxD);
    const ProjectionEntry& entry = p.projection.entry();
    if (p.d < entry.min_d || p.d > entry.max_d)
        throw Error("projection: --d: '" + r.projection + "' needs d " +
                    (p.d < entry.min_d ? ">= " + std::to_string(entry.min_d) : "<= " + std::to_string(entry.max_d)) +
                    ", got " + std::to_string(p.d));
    p.seed = parse_uint_text("projection: --seed", r.seed, 0, u64);
    p.trial = r.trial ? parse_uint_text("projection: --trial", *r.trial, 0, u64) : 0;
    return p;
}

ApplyPlan plan_apply(const ApplyOptions& o, const QkvShapes& shapes, const MemoryBudget& budget, bool grad) {
    ApplyPlan p;
    const ThreadPlan clamp = plan_threads(o.threads, 0.0);
    p.cost = estimate_apply(shapes, o, clamp.threads, grad);
    check_memory(p.cost, budget, "apply");
    const ThreadPlan room = plan_threads(clamp.threads, p.cost.peak);
    if (!clamp.warning.empty()) p.warnings.push_back(clamp.warning);
    if (room.threads < clamp.threads) p.warnings.push_back(room.warning);
    p.threads = room.threads;
    return p;
}

namespace {
template <class T>
HeadFeatures features_of(const Mat<double>& q, const Mat<double>& k, Side side, const ApplyOptions& o) {
    const Rounding r = dtype_rounding(o.dtype);   // as apply_attention's apply_one
    Mat<T> Q = cast_mat<T>(q), K = cast_mat<T>(k);
    for (Mat<T>* m : {&Q, &K}) round_to(r, m->data(), m->size());
    const Estimator<T> est = make_estimator<T>(*o.variant, o.m, q.shape(1), o.seed, o.trial, r).for_inputs(Q, K, o.head);
    const double xs = 1.0 / std::pow(double(q.shape(1)), 0.25);   // x = q / d^{1/4}
    Features<T> f = compute_features(est.ready_map(), side == Side::query ? Q : K, xs, est.W, side, 1, est.rounding,
                                     est.shift);
    return {cast_mat<double>(f.phi), std::move(f.log_scale)};
}
}  // namespace

HeadFeatures apply_features(const Mat<double>& q, const Mat<double>& k, Side side, const ApplyOptions& o) {
    if (!o.variant) throw Error("features: give features=F (exact attention has no feature map)");
    check_apply_sizes(o, q.shape(1), q.shape(0), k.shape(0), 0);   // heads: the caller's loop
    return with_dtype(o.dtype, [&](auto t) { return features_of<decltype(t)>(q, k, side, o); });
}

}  // namespace favor
