// The grid of each experiment kind (cells.hpp): the inverse index undoes the cell order, the
// shards partition the cells, the sizes are the products of the axes (less the budgets a
// fixed-F map does not have), and config_cells agrees with each grid.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "favor/experiments/cells.hpp"
#include "favor/experiments/config.hpp"

using namespace favor;
using nlohmann::json;

namespace {

Config config_of(const char* text) { return parse_config(json::parse(text), "c.json"); }

// Every cell owned by exactly one of N shards, each shard's cells ascending.
template <class Cells>
void check_shards(const Cells& grid, std::size_t N) {
    std::multiset<std::size_t> all;
    for (std::size_t k = 0; k < N; ++k) {
        const std::vector<std::size_t> owned = grid.owned({k, N});
        CHECK(std::is_sorted(owned.begin(), owned.end()));
        for (std::size_t c : owned) {
            CHECK(c % N == k);
            all.insert(c);
        }
    }
    CHECK(all.size() == grid.size());
    CHECK(std::set<std::size_t>(all.begin(), all.end()).size() == grid.size());
}

}  // namespace

TEST_CASE("approximation cells: the inverse index, the points and the shards", "[cells]") {
    const Config cfg = config_of(R"({"name": "g", "inputs": {"source": "random", "L": [32, 64], "d": [4, 8], "scale": [0.5, 1]},
        "variants": [{"features": "positive", "projection": "iid"}, {"features": "elu"}, {"features": "trig", "projection": "iid"}],
        "num_features": [8, 16, 32], "trials": 1})");
    const ApproxCells grid(cfg);
    // positive and trig: every budget at 8 points; elu: its one F at each point.
    CHECK(grid.size() == (2 * 3 + 1) * 8);
    CHECK(config_cells(cfg) == grid.size());
    for (std::size_t c = 0; c < grid.size(); ++c) {
        const CellIndex at = grid.at(c);
        CAPTURE(c, at.variant, at.L, at.d, at.budget, at.scale);
        CHECK(grid.find(at) == c);
        const PointIndex p = grid.point_at(grid.point(c));
        CHECK((p.L == at.L && p.d == at.d && p.scale == at.scale));
        if (c > 0) CHECK(grid.at(c - 1).variant <= at.variant);   // variants slowest
    }
    CHECK(!grid.find({1, 0, 0, 1, 0}));   // elu has no second budget
    CHECK(!grid.find({3, 0, 0, 0, 0}));
    CHECK(grid.m(*grid.find({2, 0, 0, 2, 0}), 4) == 16);   // trig: F / 2
    check_shards(grid, 5);
}

TEST_CASE("kernel cells: variant x d x m x norm x angle, angle fastest", "[cells]") {
    const Config cfg = config_of(R"({"name": "k", "experiment": "kernel", "d": [4, 8], "norm": [0.5, 1, 2],
        "angle": [0, 1], "variants": [{"features": "positive", "projection": "iid"}, {"features": "trig", "projection": "iid"}],
        "m": [4, 16], "trials": 1})");
    const KernelCells grid(cfg);
    CHECK(grid.size() == 2 * 2 * 2 * 3 * 2);
    CHECK(config_cells(cfg) == grid.size());
    for (std::size_t c = 0; c < grid.size(); ++c) {
        const KernelIndex at = grid.at(c);
        CAPTURE(c);
        CHECK(grid.find(at) == c);
        CHECK(grid.pair(c) == at.norm * 2 + at.angle);
    }
    CHECK(grid.at(1).angle == 1);
    check_shards(grid, 4);
}

TEST_CASE("kernel cells with norm_x and norm_y: a norm_y axis between norm and angle", "[cells]") {
    const Config cfg = config_of(R"({"name": "k", "experiment": "kernel", "d": 4, "norm_x": [0.5, 1, 2],
        "norm_y": [0.25, 4], "angle": [0, 1, 2], "variants": [{"features": "positive", "projection": "iid"}],
        "m": [4, 16], "trials": 1})");
    const KernelCells grid(cfg);
    CHECK(grid.size() == 2 * 3 * 2 * 3);
    CHECK(config_cells(cfg) == grid.size());
    for (std::size_t c = 0; c < grid.size(); ++c) {
        const KernelIndex at = grid.at(c);
        CAPTURE(c);
        CHECK(grid.find(at) == c);
        CHECK(grid.pair(c) == (at.norm * 2 + at.norm_y) * 3 + at.angle);
    }
    CHECK(grid.at(3).norm_y == 1);
    CHECK(grid.at(3).angle == 0);
    check_shards(grid, 4);
}

TEST_CASE("timing cells: the series in the runner's order, one for exact", "[cells]") {
    const Config cfg = config_of(R"({"name": "t", "experiment": "timing", "inputs": {"source": "random", "L": [64, 128, 256], "d": [8, 16]},
        "variants": [{"features": "exact"}, {"features": "positive", "projection": "iid"}], "m": [4, 8]})");
    const TimingCells grid(cfg);
    CHECK(grid.size() == 2 * 2 * 3 * 2 * 1);
    CHECK(config_cells(cfg) == grid.size());
    const std::vector<TimingSeries>& s = grid.series();
    REQUIRE(s.size() == 2 * 3);   // per d: exact, positive at m = 4, at m = 8
    for (std::size_t i = 0; i < s.size(); ++i) {
        CAPTURE(i);
        CHECK(s[i].d == (i < 3 ? 8u : 16u));
        CHECK(s[i].variant == (i % 3 == 0 ? 0u : 1u));
        CHECK(s[i].m == std::vector<std::size_t>{0, 4, 8}[i % 3]);
    }
}
