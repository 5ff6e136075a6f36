#pragma once
// The embedded Sobol direction-number table (lib/src/estimators/sobol_directions.cpp, written by
// scripts/sobol_table.py from Joe & Kuo's new-joe-kuo-6.21201). Private to qmc.cpp.
#include <cstddef>
#include <cstdint>

namespace favor::detail {

constexpr std::size_t kSobolTableDims = 1024;   // dimensions covered, the first included
constexpr std::size_t kSobolMaxDegree = 13;     // largest polynomial degree among them

struct SobolInit {
    std::uint32_t poly;                    // x^s + ... + 1 as bits (bit s and bit 0 set)
    std::uint16_t m[kSobolMaxDegree];      // m_1 .. m_s, odd, m_k < 2^k; unused entries 0
};

// Entry j - 1 describes dimension j (0-based) for j = 1 .. kSobolTableDims - 1.
extern const SobolInit kSobolInit[kSobolTableDims - 1];

}  // namespace favor::detail
