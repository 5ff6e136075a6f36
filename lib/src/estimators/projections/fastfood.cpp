// FastFood (Le, Sarlos & Smola, ICML 2013, "Fastfood: approximating kernel expansions in
// loglinear time", eq. 8; docs/estimators.md section 2, "fastfood"): per block of P =
// next_pow2(d) rows the first d columns of S H G Pi H B (inputs zero-padded to P), with
//   B     diagonal of random signs, H the normalised Walsh-Hadamard matrix (fwht),
//   Pi    a uniform random permutation (Fisher-Yates), G diagonal of N(0, 1) entries,
//   S     diagonal: row i scaled to norm chi(P)_i, i.e. by chi_i sqrt(P) / |G| (every row of
//         H G Pi H B has norm |G| / sqrt(P)), as the paper's S = chi / |G|_F does.
// So each P-dim row has a chi(P) norm and E[w w^T] = I_d (the signs B make distinct columns
// uncorrelated; E w_j^2 = E chi^2 / P = 1); the directions are not uniform on the sphere, so
// rows are not exactly Gaussian (no kGaussianRows), and not orthogonal. m rows take
// ceil(m / P) independent blocks, the last truncated (nested in m). Building W costs
// O(d log P) per row (two fwht per column of a block); applied as in the paper (Wx without
// forming W) it is O(P log P) per block, O(m log d) per input row; favor forms W and uses GEMM.
#include <cmath>
#include <numeric>
#include <vector>

#include "blocks.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

namespace {
// One block's P x d rows before S: column j is H G Pi H B e_j. Uniforms 0..P-1 of the block
// stream are the signs of B (u < 1/2: -1), P..2P-2 the Fisher-Yates swaps (step i = P-1..1
// swaps i with floor(u (i + 1))); the diagonal G is normals 0..P-1 of stream_key(block, 1).
// Returns the rows scaled to unit norm.
Mat<double> fastfood_directions(std::uint64_t key, std::size_t P, std::size_t d) {
    std::vector<double> B(P), G(P), v(P), t(P);
    std::vector<std::size_t> perm(P);
    std::iota(perm.begin(), perm.end(), std::size_t(0));
    for (std::size_t i = 0; i < P; ++i) B[i] = uniform_at(key, i) < 0.5 ? -1.0 : 1.0;
    for (std::size_t i = P - 1, k = 0; i > 0; --i, ++k)
        std::swap(perm[i], perm[std::size_t(uniform_at(key, P + k) * double(i + 1))]);
    fill_normal(stream_key({key, 1}), G.data(), P);
    double g2 = 0.0;
    for (double g : G) g2 += g * g;
    const double unit = std::sqrt(double(P) / g2);   // 1 / (row norm |G| / sqrt(P))
    Mat<double> rows = Mat<double>::from_shape({P, d});
    for (std::size_t j = 0; j < d; ++j) {
        std::fill(v.begin(), v.end(), 0.0);
        v[j] = B[j];
        fwht(v.data(), P);
        for (std::size_t l = 0; l < P; ++l) t[l] = G[l] * v[perm[l]];
        fwht(t.data(), P);
        for (std::size_t i = 0; i < P; ++i) rows(i, j) = unit * t[i];
    }
    return rows;
}
}  // namespace

Mat<double> draw_fastfood(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    const DrawKeys keys{seed, d, trial};
    const std::size_t P = next_pow2(d);
    const std::uint64_t norm_key = keys.whole("W-fastfood-norms");
    return stack_blocks(
        m, d, P, [&](std::size_t b) { return fastfood_directions(keys.block("W-fastfood-block", b), P, d); },
        [&](std::size_t r) { return chi_at(norm_key, r, P); });
}

}  // namespace favor
