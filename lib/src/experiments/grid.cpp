#include "favor/experiments/grid.hpp"

#include <stdexcept>

#include "favor/core/error.hpp"

namespace favor {

Shard parse_shard(const std::string& text) {
    const auto slash = text.find('/');
    const std::string msg = "--shard: expected K/N with 0 <= K < N (e.g. 0/4), got '" + text + "'";
    Shard s;
    try {
        // Digits only: stoul would take "-1" and wrap it to 2^64 - 1.
        if (slash == std::string::npos || text.find_first_not_of("0123456789/") != std::string::npos)
            throw std::invalid_argument(text);
        std::size_t used = 0;
        s.index = std::stoul(text.substr(0, slash), &used);
        if (used != slash) throw std::invalid_argument(text);
        const std::string n = text.substr(slash + 1);
        s.count = std::stoul(n, &used);
        if (used != n.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        throw Error(msg);
    }
    if (s.count == 0 || s.index >= s.count) throw Error(msg);
    return s;
}

Grid::Grid(std::vector<std::size_t> sizes) : sizes_(std::move(sizes)) {}

std::size_t Grid::size() const {
    std::size_t n = 1;
    for (std::size_t s : sizes_) n *= s;
    return n;
}

std::vector<std::size_t> Grid::at(std::size_t flat) const {
    std::vector<std::size_t> idx(sizes_.size());
    for (std::size_t a = sizes_.size(); a-- > 0;) {
        idx[a] = flat % sizes_[a];
        flat /= sizes_[a];
    }
    return idx;
}

std::vector<std::size_t> Grid::cells(const Shard& shard) const {
    std::vector<std::size_t> out;
    for (std::size_t c = 0, n = size(); c < n; ++c)
        if (shard.owns(c)) out.push_back(c);
    return out;
}

}  // namespace favor
