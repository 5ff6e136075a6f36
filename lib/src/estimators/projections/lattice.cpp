// lattice, a randomly shifted rank-1 lattice (randomised QMC beside qmc's scrambled Sobol;
// docs/estimators.md section 2, "lattice"): row i is Phi^-1 of
//   u_i = frac(phi_2(i) z + Delta),
// phi_2(i) the base-2 radical inverse of i (32 bits), so the first 2^k rows are the rank-1
// lattice {frac(l z / 2^k + Delta)}, l < 2^k: an extensible lattice (Hickernell & Hong 1997),
// nested in m. Delta is uniform on [0, 1)^d per (seed, d, trial) (Cranley & Patterson 1976),
// which makes every row uniform on the torus, so every row is exactly N(0, I_d).
// The generating vector is Korobov's, z_j = a^(j-1) mod n with n = kLatticeN, the odd a < n
// minimising the weighted P_2 criterion (Sloan & Joe 1994; weights gamma_j = 1/j^2)
//   P_2(z) = -1 + (1/n) sum_l prod_j (1 + gamma_j 2 pi^2 B_2(frac(l z_j / n))),
//   B_2(x) = x^2 - x + 1/6,
// computed here (no table), once per d (O(n^2 d / 2): 0.17 s of CPU at d = 256). d <= kLatticeMaxD.
#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include "blocks.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/qmc.hpp"

namespace favor {

namespace {
constexpr std::uint32_t kLatticeN = 1024;

// P_2 of the Korobov vector of a in d dimensions, n = kLatticeN points (n a power of two, so
// l z_j mod n is a mask).
double korobov_p2(std::uint32_t a, std::size_t d) {
    static const std::vector<double> b2 = [] {   // 2 pi^2 B_2(k / n), k < n
        std::vector<double> t(kLatticeN);
        for (std::uint32_t k = 0; k < kLatticeN; ++k) {
            const double x = double(k) / double(kLatticeN);
            t[k] = 2.0 * M_PI * M_PI * (x * x - x + 1.0 / 6.0);
        }
        return t;
    }();
    std::vector<std::uint32_t> z(d);
    std::vector<double> gamma(d);
    for (std::size_t j = 0, v = 1; j < d; ++j, v = (v * a) & (kLatticeN - 1))
        z[j] = std::uint32_t(v), gamma[j] = 1.0 / double((j + 1) * (j + 1));
    double total = 0.0;
    for (std::uint32_t l = 0; l < kLatticeN; ++l) {
        double prod = 1.0;
        for (std::size_t j = 0; j < d; ++j) prod *= 1.0 + gamma[j] * b2[(l * z[j]) & (kLatticeN - 1)];
        total += prod;
    }
    return total / double(kLatticeN) - 1.0;
}

// The generating vector for d (computed once per d, then cached).
std::vector<std::uint32_t> korobov_vector(std::size_t d) {
    static std::mutex mu;
    static std::map<std::size_t, std::vector<std::uint32_t>> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(d);
    if (it != cache.end()) return it->second;
    std::uint32_t best_a = 1;
    double best = korobov_p2(1, d);
    // Ties (a and n - a give the same criterion: B_2 is symmetric about 1/2) and near-ties go
    // to the smaller a: a new a must be lower by 1e-12 relative, so last-bit rounding (FMA or
    // not) cannot change the choice.
    for (std::uint32_t a = 3; a < kLatticeN; a += 2)
        if (const double p = korobov_p2(a, d); p < best * (1.0 - 1e-12)) best = p, best_a = a;
    std::vector<std::uint32_t> z(d);
    for (std::size_t j = 0, v = 1; j < d; ++j, v = (v * best_a) & (kLatticeN - 1)) z[j] = std::uint32_t(v);
    return cache[d] = z;
}

// The base-2 radical inverse of i (i < 2^32) as a 32-bit integer: its bits reversed.
std::uint32_t radical_inverse(std::uint32_t i) {
    std::uint32_t r = 0;
    for (int b = 0; b < 32; ++b, i >>= 1) r = (r << 1) | (i & 1u);
    return r;
}
}  // namespace

Mat<double> draw_lattice(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    const std::vector<std::uint32_t> z = korobov_vector(d);
    const std::uint64_t shift_key = DrawKeys{seed, d, trial}.whole("W-lattice-shift");
    std::vector<double> shift(d);
    for (std::size_t j = 0; j < d; ++j) shift[j] = uniform_at(shift_key, j);
    Mat<double> W = Mat<double>::from_shape({m, d});
    for (std::size_t i = 0; i < m; ++i) {
        const std::uint32_t phi = radical_inverse(std::uint32_t(i));
        for (std::size_t j = 0; j < d; ++j) {
            // frac(phi_2(i) z_j) exactly: the 32-bit product wraps mod 2^32.
            double u = double(std::uint32_t(phi * z[j])) * 0x1p-32 + shift[j];
            if (u >= 1.0) u -= 1.0;
            if (u <= 0.0) u = 0x1p-53;   // u = 0 has probability 2^-53: Phi^-1 stays finite
            W(i, j) = inverse_normal_cdf(u);
        }
    }
    return W;
}

}  // namespace favor
