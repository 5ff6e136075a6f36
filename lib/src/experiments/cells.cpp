#include "favor/experiments/cells.hpp"

#include <algorithm>

namespace favor {

std::size_t config_cells(const Config& c) {
    switch (c.experiment) {
        case ExperimentKind::approximation: return ApproxCells(c).size();
        case ExperimentKind::kernel: return KernelCells(c).size();
        case ExperimentKind::timing: return TimingCells(c).size();
    }
    return 0;
}

ApproxCells::ApproxCells(const Config& cfg)
    : variants_(cfg.variants), m_(cfg.m), num_features_(cfg.num_features), causal_(cfg.causal) {
    const bool npy = cfg.inputs.npy();
    nL_ = npy ? std::max<std::size_t>(cfg.inputs.L.size(), 1) : cfg.inputs.L.size();   // npy: the row counts, if any
    nd_ = npy ? 1 : cfg.inputs.d.size();
    ns_ = npy ? 1 : cfg.inputs.scale.size();
    nB_ = cfg.num_features.empty() ? cfg.m.size() : cfg.num_features.size();
    const Grid grid({cfg.variants.size(), nL_, nd_, nB_, ns_});
    flat_to_cell_.assign(grid.size(), std::size_t(-1));
    for (std::size_t f = 0; f < grid.size(); ++f) {
        const std::vector<std::size_t> a = grid.at(f);
        const bool fixed = !cfg.num_features.empty() && !cfg.variants[a[0]].map->uses_m();
        if (fixed && a[3] > 0) continue;   // one cell at its own F
        flat_to_cell_[f] = cells_.size();
        cells_.push_back({a[0], a[1], a[2], a[3], a[4]});
    }
}

std::optional<std::size_t> ApproxCells::find(const CellIndex& i) const {
    if (i.variant >= variants_.size() || i.L >= nL_ || i.d >= nd_ || i.budget >= nB_ || i.scale >= ns_)
        return std::nullopt;
    const std::size_t f = (((i.variant * nL_ + i.L) * nd_ + i.d) * nB_ + i.budget) * ns_ + i.scale;
    if (flat_to_cell_[f] == std::size_t(-1)) return std::nullopt;
    return flat_to_cell_[f];
}

std::vector<std::size_t> ApproxCells::owned(const Shard& shard) const {
    std::vector<std::size_t> out;
    for (std::size_t c = 0; c < cells_.size(); ++c)
        if (shard.owns(c)) out.push_back(c);
    return out;
}

std::size_t ApproxCells::m(std::size_t cell, std::size_t d) const {
    const CellIndex& i = cells_[cell];
    if (num_features_.empty()) return m_[i.budget];
    return *m_for_features(variants_[i.variant], num_features_[i.budget], d, causal_);
}

std::size_t ApproxCells::point(std::size_t cell) const {
    const CellIndex& i = cells_[cell];
    return (i.L * nd_ + i.d) * ns_ + i.scale;
}

KernelCells::KernelCells(const Config& cfg)
    : nd_(cfg.kernel.d.size()), nm_(cfg.m.size()), nn_(cfg.kernel.pairs ? cfg.kernel.pairs : cfg.kernel.norm.size()),
      nny_(std::max<std::size_t>(cfg.kernel.norm_y.size(), 1)), na_(cfg.kernel.pairs ? 1 : cfg.kernel.angle.size()),
      grid_({cfg.variants.size(), nd_, nm_, nn_, nny_, na_}) {}

KernelIndex KernelCells::at(std::size_t cell) const {
    const std::vector<std::size_t> a = grid_.at(cell);
    return {a[0], a[1], a[2], a[3], a[5], a[4]};
}

std::size_t KernelCells::find(const KernelIndex& i) const {
    return ((((i.variant * nd_ + i.d) * nm_ + i.m) * nn_ + i.norm) * nny_ + i.norm_y) * na_ + i.angle;
}

std::size_t KernelCells::pair(std::size_t cell) const { return cell % (nn_ * nny_ * na_); }

TimingCells::TimingCells(const Config& cfg)
    : grid_({cfg.variants.size(), std::max<std::size_t>(cfg.m.size(), 1), cfg.inputs.L.size(), cfg.inputs.d.size(),
             cfg.inputs.scale.size()}) {
    for (std::size_t d : cfg.inputs.d)
        for (std::size_t v = 0; v < cfg.variants.size(); ++v) {
            if (cfg.variants[v].exact) series_.push_back({d, v, 0});
            else
                for (std::size_t m : cfg.m) series_.push_back({d, v, m});
        }
}

}  // namespace favor
