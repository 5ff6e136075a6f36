#pragma once
// Randomised quasi-Monte Carlo Gaussian rows for the `qmc` projection: a Sobol sequence
// (Joe & Kuo direction numbers), Owen's nested uniform scrambling of its binary digits, and
// the inverse normal CDF. Every function is a pure function of its arguments, so W stays a
// pure function of (seed, projection, m, d, trial) (design.md section 7).
#include <cstddef>
#include <cstdint>

#include "favor/core/tensor.hpp"

namespace favor {

// Dimensions with embedded direction numbers (Joe & Kuo's new-joe-kuo-6.21201, the first
// 1024; lib/src/estimators/sobol_directions.cpp): `qmc` needs d <= kSobolMaxDim.
constexpr std::size_t kSobolMaxDim = 1024;
// The `lattice` projection's largest d (lib/src/estimators/projections/lattice.cpp): its Korobov vector
// is searched once per d at a cost O(n^2 d) with n = 1024 lattice points.
constexpr std::size_t kLatticeMaxD = 256;

// Phi^{-1}(p), the standard normal quantile: Wichura's AS241 (PPND16, Applied Statistics 37
// (1988) 477-484), relative error about 1e-16. -inf at p = 0, +inf at p = 1, NaN outside
// [0, 1] or for NaN. For p > 1/2 the tail branch works with 1 - p, which is exact.
double inverse_normal_cdf(double p);

// Coordinate j (0-based, j < kSobolMaxDim) of Sobol point i (i < 2^32) as a 32-bit integer,
// the point being sobol_int(i, j) 2^-32 in [0, 1). Points in Gray-code order (Antonov &
// Saleev 1979), as Joe & Kuo's and SciPy's generators: point i is the XOR of the direction
// integers V_k over the bits k of i ^ (i >> 1). Point 0 is the origin.
std::uint32_t sobol_int(std::uint64_t i, std::size_t j);

// Owen's nested uniform scrambling (Owen 1995) of the 32 binary digits of x: digit k
// (k = 1 .. 32, most significant first) is flipped iff uniform_at(key, 2^(k-1) + (the first
// k - 1 digits of x)) < 1/2, one independent coin per node of the binary tree of prefixes.
std::uint32_t owen_scramble(std::uint32_t x, std::uint64_t key);

// The scrambled point as a double: (owen_scramble(x) 2^20 + t + 1/2) 2^-52, where the digits
// 33 .. 52 (nested scrambling of the zero digits below a 32-bit point) are t, the first 20
// bits of uniform_at(key, 2^32 + x). Uniform over the 2^52 midpoints when x is fixed, so in
// (0, 1) and never 0 or 1.
double owen_uniform(std::uint32_t x, std::uint64_t key);

// The first m scrambled Sobol points in d dimensions (m x d, m <= 2^32, d <= kSobolMaxDim):
// U(i, j) = owen_uniform(sobol_int(i, j), stream_key({key, j})). Each row is uniform on
// (0, 1)^d (the coordinates have independent scrambles); the rows are nested in m.
Mat<double> scrambled_sobol(std::size_t m, std::size_t d, std::uint64_t key);

// The `qmc` rows: W(i, j) = inverse_normal_cdf(U(i, j)) for U = scrambled_sobol(m, d, key).
// Each row is N(0, I_d) (up to the 2^-52 grid: |W_ij| < 8.3); rows are stratified jointly.
Mat<double> qmc_gaussian(std::size_t m, std::size_t d, std::uint64_t key);

}  // namespace favor
