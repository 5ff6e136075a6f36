#pragma once
// The cells of an approximation config (docs/design.md sections 5 and 6): variant x L x d x
// budget x scale in grid order, the budget axis being `m` or `num_features` (equal feature
// budgets). With num_features a cell runs at the m that gives its map F feature columns
// (F / 2 for trig and hyperbolic, F for the others); a map whose F is fixed by d (elu: d,
// dpfp: 2 d nu) has one cell per (L, d, scale), at the first budget, labelled with its own F
// (and m = F). Runner, merge, cost estimate and validate count cells here, so the grid index
// and the shards are defined once.
#include <cstddef>
#include <optional>
#include <vector>

#include "favor/config.hpp"
#include "favor/grid.hpp"

namespace favor {

// The m at which `map` has F feature columns in dimension d, or nullopt when no m gives F
// (an odd F for trig). A map whose F does not depend on m gives its own F.
std::optional<std::size_t> m_for_features(const FeatureMap& map, std::size_t F, std::size_t d);

// The m values variant `v` runs at in dimension d, in grid order (one for a fixed-F map
// under num_features).
std::vector<std::size_t> variant_m_values(const Config& cfg, std::size_t v, std::size_t d);

// The number of grid cells of any config: approximation as ApproxCells counts them, kernel
// variant x d x m x norm x angle, timing variant x m x L x d x scale.
std::size_t config_cells(const Config& cfg);

// Axis indices of one cell (npy inputs: L, d, scale are 0).
struct CellIndex {
    std::size_t variant = 0, L = 0, d = 0, budget = 0, scale = 0;
};

class ApproxCells {
public:
    explicit ApproxCells(const Config& cfg);
    std::size_t size() const { return cells_.size(); }
    const CellIndex& at(std::size_t cell) const { return cells_[cell]; }
    // The grid index of the cell with these axis indices, or nullopt when there is none
    // (a fixed-F map at a budget after the first).
    std::optional<std::size_t> find(const CellIndex& i) const;
    // The cells `shard` owns (grid index K mod N), ascending.
    std::vector<std::size_t> owned(const Shard& shard) const;
    // The m of `cell` in dimension d (the table's m column).
    std::size_t m(std::size_t cell, std::size_t d) const;
    // The (L, d, scale) point of `cell`, numbered L, d, scale ascending with scale fastest.
    std::size_t point(std::size_t cell) const;
    std::size_t points() const { return nL_ * nd_ * ns_; }

private:
    std::vector<Variant> variants_;
    std::vector<std::size_t> m_, num_features_;
    std::size_t nL_, nd_, nB_, ns_;
    std::vector<CellIndex> cells_;
    std::vector<std::size_t> flat_to_cell_;   // product index -> grid index (npos: none)
};

}  // namespace favor
