#pragma once
// The grid of each experiment kind (docs/design.md section 6): its cells in grid order, each
// cell's axis indices, the inverse index (axis indices -> grid index) and the cells a shard
// owns. The runners, the cost model, merge and the CLI all take their cells from here, so the
// grid index, and with it the journal's keys and the shards, is defined once.
//
//   approximation  variant x L x d x budget x scale   (ApproxCells)
//   kernel         variant x d x m x norm x angle     (KernelCells)
//   timing         variant x m x L x d x scale        (TimingCells)
//
// Approximation: the budget axis is `m` or `num_features` (equal feature budgets). With
// num_features a cell runs at the m that gives its map F feature columns (F / 2 for trig and
// hyperbolic, F for the others); a map whose F is fixed by d (elu: d, dpfp: 2 d nu) has one
// cell per (L, d, scale), at the first budget, labelled with its own F (and m = F).
#include <cstddef>
#include <optional>
#include <vector>

#include "favor/experiments/config.hpp"
#include "favor/experiments/grid.hpp"

namespace favor {

// The number of grid cells of any config: the size of its kind's grid below.
std::size_t config_cells(const Config& cfg);

// Axis indices of one approximation cell (npy inputs: L, d, scale are 0).
struct CellIndex {
    std::size_t variant = 0, L = 0, d = 0, budget = 0, scale = 0;
};
// Axis indices of one (L, d, scale) point of the inputs (npy inputs: all 0).
struct PointIndex {
    std::size_t L = 0, d = 0, scale = 0;
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
    // The axis indices of point `p` (p < points()), the inverse of point().
    PointIndex point_at(std::size_t p) const { return {p / (nd_ * ns_), p / ns_ % nd_, p % ns_}; }

private:
    std::vector<Variant> variants_;
    std::vector<std::size_t> m_, num_features_;
    bool causal_;   // a non-causal window's 2w - 1 keys in num_features
    std::size_t nL_, nd_, nB_, ns_;
    std::vector<CellIndex> cells_;
    std::vector<std::size_t> flat_to_cell_;   // product index -> grid index (npos: none)
};

// Axis indices of one kernel cell: a variant at (d, m), one (norm, norm_y, angle) point
// (norm_y = 0 when the config gives one "norm": |y| = |x|).
struct KernelIndex {
    std::size_t variant = 0, d = 0, m = 0, norm = 0, angle = 0, norm_y = 0;
};

// The kernel grid: variant x kernel.d x m x kernel.norm x kernel.norm_y x kernel.angle, the
// norm_y axis of size 1 when absent (so a single-norm config has the cells it always had); with
// "pairs", the norm axis is the pairs (norm = pair index) and norm_y, angle have size 1.
class KernelCells {
public:
    explicit KernelCells(const Config& cfg);
    std::size_t size() const { return grid_.size(); }
    KernelIndex at(std::size_t cell) const;
    // The grid index of the cell with these axis indices (each below its axis's size).
    std::size_t find(const KernelIndex& i) const;
    // The cells `shard` owns (grid index K mod N), ascending.
    std::vector<std::size_t> owned(const Shard& shard) const { return grid_.cells(shard); }
    // The (norm, norm_y, angle) point of `cell`, numbered ascending with angle fastest.
    std::size_t pair(std::size_t cell) const;

private:
    std::size_t nd_, nm_, nn_, nny_, na_;
    Grid grid_;
};

// One timing series: a variant at (d, m) over every L (exact variants: one series, m = 0).
struct TimingSeries {
    std::size_t d = 0, variant = 0, m = 0;   // values, not indices
};

// The timing grid: variant x m x L x d x scale (m one entry when every variant is exact).
// The runner measures it series by series, each L in turn.
class TimingCells {
public:
    explicit TimingCells(const Config& cfg);
    std::size_t size() const { return grid_.size(); }
    // The series in the runner's order: d, then variant, then m.
    const std::vector<TimingSeries>& series() const { return series_; }

private:
    Grid grid_;
    std::vector<TimingSeries> series_;
};

}  // namespace favor
