#pragma once
// The cells of an experiment: the product of its axes (e.g. variant x L x d x m x scale),
// numbered with the last axis fastest, and the share of them a shard runs. Every runner
// iterates a Grid, so cell order and sharding are defined once (docs/design.md section 6).
#include <cstddef>
#include <string>
#include <vector>

namespace favor {

// --shard K/N: this process runs the cells whose grid index is K mod N (K in 0..N-1).
struct Shard {
    std::size_t index = 0, count = 1;
    bool owns(std::size_t cell) const { return cell % count == index; }
};
Shard parse_shard(const std::string& text);   // throws Error

class Grid {
public:
    explicit Grid(std::vector<std::size_t> sizes);
    std::size_t size() const;
    // The index along each axis of cell `flat` (flat < size()).
    std::vector<std::size_t> at(std::size_t flat) const;
    // The cells `shard` owns, ascending.
    std::vector<std::size_t> cells(const Shard& shard = {}) const;

private:
    std::vector<std::size_t> sizes_;
};

}  // namespace favor
