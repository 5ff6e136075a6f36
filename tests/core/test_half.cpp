// The half-precision rounding helpers (lib/include/favor/core/half.hpp) bit for bit against
// tests/data/half_rounding.txt: numpy's float16 round trip and an independent bfloat16
// rule, for ties, subnormals, the smallest normal, the largest finite value, the overflow
// tie, Inf, NaN (payloads included), -0 and a random sample of all float32 bit patterns
// (scripts/half_values.py writes the file and says how).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "favor/core/half.hpp"

using namespace favor;

namespace {
struct Row {
    std::uint32_t in, fp16, bf16;
};

std::vector<Row> rounding_table() {
    const std::string path = std::string(FAVOR_TEST_DATA_DIR) + "/half_rounding.txt";
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<Row> rows;
    for (std::string line; std::getline(f, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream s(line);
        Row r{};
        s >> std::hex >> r.in >> r.fp16 >> r.bf16;
        if (!s) throw std::runtime_error(path + ": bad line: " + line);
        rows.push_back(r);
    }
    return rows;
}

std::uint32_t bits(float x) { return half_detail::bits_of(x); }
float from_bits(std::uint32_t u) { return half_detail::float_of(u); }
std::string hex(std::uint32_t u) {
    char b[16];
    std::snprintf(b, sizeof b, "%08x", u);
    return b;
}
bool is_inf_bits(std::uint32_t u) { return (u & 0x7FFFFFFFu) == 0x7F800000u; }
}  // namespace

TEST_CASE("round_fp16 and round_bf16 match numpy's float16 and the bfloat16 rule bit for bit", "[half]") {
    const std::vector<Row> rows = rounding_table();
    REQUIRE(rows.size() > 10000);
    std::size_t fp16_bad = 0, bf16_bad = 0;
    for (const Row& r : rows) {
        const std::uint32_t h = bits(round_fp16(from_bits(r.in))), b = bits(round_bf16(from_bits(r.in)));
        if (h != r.fp16 && fp16_bad++ < 5) FAIL_CHECK("fp16 of " << hex(r.in) << ": " << hex(h) << ", numpy " << hex(r.fp16));
        if (b != r.bf16 && bf16_bad++ < 5) FAIL_CHECK("bf16 of " << hex(r.in) << ": " << hex(b) << ", expected " << hex(r.bf16));
    }
    CHECK(fp16_bad == 0);
    CHECK(bf16_bad == 0);
}

TEST_CASE("round_to rounds arrays as the scalar functions do and counts the Infs", "[half]") {
    const std::vector<Row> rows = rounding_table();
    for (const Rounding r : {Rounding::fp16, Rounding::bf16}) {
        CAPTURE(rounding_name(r));
        std::vector<float> p;
        std::size_t inf = 0;
        for (const Row& row : rows) {
            p.push_back(from_bits(row.in));
            inf += is_inf_bits(r == Rounding::fp16 ? row.fp16 : row.bf16);
        }
        REQUIRE(inf > 0);
        // Every length mod the vector width: the vectorised body and the tail agree.
        for (std::size_t n : {p.size(), p.size() - 1, p.size() - 7}) {
            std::vector<float> q(p.begin(), p.begin() + std::ptrdiff_t(n));
            std::size_t want = 0;
            for (std::size_t i = 0; i < n; ++i) want += is_inf_bits(r == Rounding::fp16 ? rows[i].fp16 : rows[i].bf16);
            CHECK(round_to(r, q.data(), n) == want);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; ++i)
                bad += bits(q[i]) != (r == Rounding::fp16 ? rows[i].fp16 : rows[i].bf16);
            CHECK(bad == 0);
        }
    }
}

TEST_CASE("round_to with no rounding only counts, and the double path refuses half rounding", "[half]") {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> p = {1.0f, inf, -inf, std::nanf(""), 70000.0f, 1e-30f};
    const std::vector<float> before = p;
    CHECK(round_to(Rounding::none, p.data(), p.size()) == 2);
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(bits(p[i]) == bits(before[i]));
    std::vector<double> d = {1.0, double(inf)};
    CHECK(round_to(Rounding::none, d.data(), d.size()) == 1);
    CHECK_THROWS_AS(round_to(Rounding::fp16, d.data(), d.size()), std::logic_error);
    CHECK(rounding_max(Rounding::fp16) == 65504.0);
    CHECK(rounding_max(Rounding::bf16) == Approx(3.3895313892515355e38).epsilon(1e-15));
    CHECK(round_fp16(float(rounding_max(Rounding::fp16))) == 65504.0f);
}
