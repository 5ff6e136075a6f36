// Golden values: the numbers a seed gives must not change, with any compiler or platform
// (README "Seeding"). tests/data/golden.json is written by scripts/golden_values.py from an
// independent Python implementation of rng.cpp and inputs.cpp (and, for W, from `favor
// projection`, checked against Python where that is possible); this file checks the
// library against it. A failure here means the streams changed: earlier results are then no
// longer reproducible. If that is deliberate, regenerate with
// `scripts/golden_values.py --update` and say so in the commit.
//
// Tolerances, and why:
//  - mix64, tag, stream_key: integer arithmetic mod 2^64, bit-exact everywhere.
//  - uniform_at: an integer converted to double, one IEEE add of 0.5 and a power-of-two
//    scaling, all correctly rounded: exact everywhere.
//  - normal_at, fill_normal, chi_at, random_inputs: relative 1e-15 (about 4.5 ulp).
//    Box-Muller calls log, cos, sin and sqrt; sqrt is correctly rounded but libm's log, cos
//    and sin are not required to be, and may differ in the last bit between C libraries.
//    Compilers may also fuse a*b + c into one FMA (GCC does by default with -march=native
//    on a CPU that has FMA; the chi_at sum of squares is such a spot), which moves a
//    result by about an ulp.
//  - W: 1e-12, relative for entries above 1 in size and absolute below. The orthogonal
//    family and simplex come from LAPACK's Householder QR, whose blocking and summation
//    order differ between LAPACK builds (OpenBLAS, reference, MKL, ...); Q then moves by
//    about cond(G) * eps. Givens products and the hadamard/chi norms add FMA and libm
//    differences of a few ulp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "favor/core/rng.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/inputs.hpp"

using namespace favor;
using nlohmann::json;

namespace {

constexpr double kStreamRel = 1e-15;   // normal_at, fill_normal, chi_at, random_inputs
constexpr double kProjectionTol = 1e-12;   // W

// Published reference values, independent of golden.json: the first SplitMix64 output of
// seed 0 is mix64(golden gamma); FNV-1a 64 of "a".
static_assert(mix64(0x9E3779B97F4A7C15ULL) == 0xE220A8397B1DCDAFULL, "SplitMix64 reference value");
static_assert(tag("") == 0xCBF29CE484222325ULL && tag("a") == 0xAF63DC4C8601EC8CULL, "FNV-1a reference value");

const json& golden() {
    static const json g = [] {
        const std::string path = std::string(FAVOR_TEST_DATA_DIR) + "/golden.json";
        std::ifstream in(path);
        if (!in) throw std::runtime_error("cannot open " + path + " (scripts/golden_values.py writes it)");
        return json::parse(in);
    }();
    return g;
}

std::uint64_t u64(const json& j) { return std::stoull(j.get<std::string>(), nullptr, 16); }

std::string show(double x) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}

bool rel_close(double got, double want, double rel) {
    return std::fabs(got - want) <= rel * std::max(std::fabs(got), std::fabs(want));
}

bool projection_close(double got, double want) {
    return std::fabs(got - want) <= kProjectionTol * std::max({1.0, std::fabs(got), std::fabs(want)});
}

}  // namespace

TEST_CASE("golden: mix64, tag and stream_key are bit-exact", "[golden]") {
    const json& g = golden();
    REQUIRE(g.at("mix64").size() > 0);
    for (const json& e : g.at("mix64")) {
        INFO("mix64(" << e.at("in").get<std::string>() << ")");
        CHECK(mix64(u64(e.at("in"))) == u64(e.at("out")));
    }
    REQUIRE(g.at("tag").size() > 0);
    for (const json& e : g.at("tag")) {
        INFO("tag(\"" << e.at("in").get<std::string>() << "\")");
        CHECK(tag(e.at("in").get<std::string>()) == u64(e.at("out")));
    }
    REQUIRE(g.at("stream_key").size() > 0);
    for (const json& e : g.at("stream_key")) {
        std::vector<std::uint64_t> ids;
        for (const json& id : e.at("ids")) ids.push_back(u64(id));
        INFO("stream_key of " << e.at("ids").dump());
        // stream_key takes an initializer_list: the cases have at most 5 ids.
        REQUIRE(ids.size() <= 5);
        const std::uint64_t want = u64(e.at("out"));
        switch (ids.size()) {
        case 0: CHECK(stream_key({}) == want); break;
        case 1: CHECK(stream_key({ids[0]}) == want); break;
        case 2: CHECK(stream_key({ids[0], ids[1]}) == want); break;
        case 3: CHECK(stream_key({ids[0], ids[1], ids[2]}) == want); break;
        case 4: CHECK(stream_key({ids[0], ids[1], ids[2], ids[3]}) == want); break;
        default: CHECK(stream_key({ids[0], ids[1], ids[2], ids[3], ids[4]}) == want); break;
        }
    }
}

TEST_CASE("golden: uniform_at exactly, normal_at, fill_normal and chi_at to 1e-15", "[golden]") {
    const json& streams = golden().at("streams");
    REQUIRE(streams.size() > 0);
    for (const json& s : streams) {
        const std::uint64_t key = u64(s.at("key"));
        const std::uint64_t first = u64(s.at("first"));
        const std::size_t chi_d = s.at("chi_d").get<std::size_t>();
        const auto uniform = s.at("uniform").get<std::vector<double>>();
        const auto normal = s.at("normal").get<std::vector<double>>();
        const auto chi = s.at("chi").get<std::vector<double>>();
        REQUIRE(uniform.size() == 8);
        REQUIRE(normal.size() == 8);
        REQUIRE(chi.size() == 8);
        for (std::size_t j = 0; j < 8; ++j) {
            const std::uint64_t i = first + j;   // wraps mod 2^64 like the generator
            INFO("key " << s.at("key").get<std::string>() << ", index " << i);
            INFO("uniform_at " << show(uniform_at(key, i)) << ", golden " << show(uniform[j]));
            CHECK(uniform_at(key, i) == uniform[j]);
            const double z = normal_at(key, i);
            INFO("normal_at " << show(z) << ", golden " << show(normal[j]));
            CHECK(rel_close(z, normal[j], kStreamRel));
            const double c = chi_at(key, i, chi_d);
            INFO("chi_at(d = " << chi_d << ") " << show(c) << ", golden " << show(chi[j]));
            CHECK(rel_close(c, chi[j], kStreamRel));
        }
        // fill_normal from an even and from an odd start (its pairing of Box-Muller draws).
        for (std::size_t start : {0u, 1u, 3u}) {
            std::vector<double> out(8 - start);
            fill_normal(key, out.data(), out.size(), first + start);
            for (std::size_t j = 0; j < out.size(); ++j) {
                INFO("fill_normal from " << start << ", element " << j);
                CHECK(out[j] == normal_at(key, first + start + j));
                CHECK(rel_close(out[j], normal[start + j], kStreamRel));
            }
        }
    }
}

TEST_CASE("golden: random_inputs to 1e-15", "[golden]") {
    const json& cases = golden().at("inputs");
    REQUIRE(cases.size() > 0);
    for (const json& c : cases) {
        const std::uint64_t seed = u64(c.at("seed"));
        const auto L = c.at("L").get<std::size_t>(), d = c.at("d").get<std::size_t>(),
                   dv = c.at("d_v").get<std::size_t>();
        const double scale = c.at("scale").get<double>();
        const QKV in = random_inputs(seed, L, d, dv, scale);
        const Mat<double>* mats[3] = {&in.q, &in.k, &in.v};
        const char* names[3] = {"q", "k", "v"};
        for (int t = 0; t < 3; ++t) {
            const auto rows = c.at(names[t]).get<std::vector<std::vector<double>>>();
            REQUIRE(rows.size() <= L);
            for (std::size_t r = 0; r < rows.size(); ++r) {
                REQUIRE(rows[r].size() == mats[t]->shape(1));
                for (std::size_t k = 0; k < rows[r].size(); ++k) {
                    INFO("random_inputs seed " << seed << " L " << L << " d " << d << " d_v " << dv << " scale "
                                               << scale << ": " << names[t] << "(" << r << ", " << k << ") = "
                                               << show((*mats[t])(r, k)) << ", golden " << show(rows[r][k]));
                    CHECK(rel_close((*mats[t])(r, k), rows[r][k], kStreamRel));
                }
            }
        }
    }
}

TEST_CASE("golden: W of every projection to 1e-12", "[golden]") {
    const json& cases = golden().at("projections");
    REQUIRE(cases.size() > 0);
    std::vector<std::string> seen;
    for (const json& c : cases) {
        const std::string name = c.at("projection").get<std::string>();
        seen.push_back(name);
        const auto m = c.at("m").get<std::size_t>(), d = c.at("d").get<std::size_t>();
        const std::uint64_t seed = u64(c.at("seed")), trial = c.at("trial").get<std::uint64_t>();
        const auto want = c.at("W").get<std::vector<std::vector<double>>>();
        const Mat<double> W = draw_projection(Projection(name), m, d, seed, trial);
        REQUIRE(W.shape(0) == m);
        REQUIRE(W.shape(1) == d);
        REQUIRE(want.size() == m);
        for (std::size_t r = 0; r < m; ++r) {
            REQUIRE(want[r].size() == d);
            for (std::size_t k = 0; k < d; ++k) {
                INFO(name << " m " << m << " d " << d << " seed " << seed << " trial " << trial << ": W(" << r
                          << ", " << k << ") = " << show(W(r, k)) << ", golden " << show(want[r][k]));
                CHECK(projection_close(W(r, k), want[r][k]));
            }
        }
    }
    // Every projection has at least one golden case.
    for (const std::string& p : projection_names()) {
        INFO("projection " << p << " has no case in golden.json");
        CHECK(std::find(seen.begin(), seen.end(), p) != seen.end());
    }
}
