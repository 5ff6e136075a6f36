#pragma once
// The checks of `favor projection` and `favor apply` before any work, shared by the CLI
// (app/tensor_commands.cpp) and the Python module (python/favor_module.cpp), so both refuse
// the same inputs with the same one-line messages; and phi(x) for the module's features().
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "favor/core/resources.hpp"
#include "favor/estimators/feature_map.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/runs/apply.hpp"
#include "favor/runs/cost_model.hpp"

namespace favor {

// `favor projection` as typed (absent flags nullopt), and resolved.
struct ProjectionRequest {
    std::string projection, m, d, seed;
    std::optional<std::string> trial;
};
struct ProjectionDraw {
    Projection projection;
    std::size_t m = 0, d = 0;
    std::uint64_t seed = 0, trial = 0;
};
// Checks the names and ranges (d within the projection's limits). Throws Error
// "projection: --FLAG: ...".
ProjectionDraw resolve_projection(const ProjectionRequest& r);

// `favor apply` once the shapes are known: the threads (--threads clamped to the hardware,
// then to what the memory budget leaves room for) and the estimate, checked against the
// budget (Error "apply: ... exceeds the memory budget"); a warning for every lowering.
// grad: the backward too (apply --grad, favor.attention_grad).
struct ApplyPlan {
    int threads = 1;
    Cost cost;
    std::vector<std::string> warnings;
};
ApplyPlan plan_apply(const ApplyOptions& o, const QkvShapes& shapes, const MemoryBudget& budget, bool grad);

// phi of the rows of one side (q for Side::query, k for Side::key) of one head, as
// apply_attention makes them: W drawn for (seed, projection, m, d, trial), the map fitted to
// (q, k) (oprf's A*, nystrom's landmarks), rows scaled by d^{-1/4}, the dtype's rounding.
// phi(x_i) = exp(log_scale[i]) phi.row(i) (the stabilising shifts: docs/design.md section 2.3).
// Throws Error "apply: --m: ..." where the map cannot run at these sizes.
struct HeadFeatures {
    Mat<double> phi;
    std::vector<double> log_scale;
};
HeadFeatures apply_features(const Mat<double>& q, const Mat<double>& k, Side side, const ApplyOptions& o);

}  // namespace favor
