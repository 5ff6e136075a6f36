// The plan of a run (run_plan.hpp): npy shapes, then threads lowered step by step.
#include "favor/runs/run_plan.hpp"

namespace favor {

std::optional<QkvShapes> npy_shapes(const Config& cfg) {
    if (cfg.experiment != ExperimentKind::approximation || !cfg.inputs.npy()) return std::nullopt;
    const QkvShapes s = read_qkv_shapes(npy_source(cfg));
    if (!cfg.inputs.grad.empty())   // G holds the files' L rows (a cell takes its first inputs.L)
        check_upstream_header(cfg.inputs.grad, s.lead, s.file_L ? s.file_L : s.L, s.dv, cfg.file + ": inputs.grad",
                              cfg.inputs.layout);
    return s;
}

RunPlan plan_run(const Config& cfg, int requested, const Shard& shard, const QkvShapes* npy,
                 const MemoryBudget& budget) {
    RunPlan plan;
    const ThreadPlan clamp = plan_threads(requested, 0.0);
    if (!clamp.warning.empty()) plan.warnings.push_back(clamp.warning);
    const ThreadPlan fit = fit_threads(cfg, clamp.threads, shard, npy, budget, plan.cost);
    if (!fit.warning.empty()) plan.warnings.push_back(fit.warning);
    const ThreadPlan room = plan_threads(fit.threads, plan.cost.peak);
    if (room.threads < fit.threads) {
        plan.warnings.push_back(room.warning);
        plan.cost = estimate_run(cfg, room.threads, shard, npy);
    }
    plan.threads = room.threads;
    return plan;
}

}  // namespace favor
