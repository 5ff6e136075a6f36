#pragma once
// Building blocks of the structured and coupled projections ("Beyond FAVOR+"):
//  - SimRF (Reid et al., ICML 2023): a regular simplex of unit directions, Haar-rotated;
//  - SORF  (Yu et al., NeurIPS 2016; Performer App. B.2): sqrt(p) H D1 H D2 H D3;
//  - products of random Givens rotations (Performer App. B.2);
//  - SimRF+ (Reid et al., ICML 2023): simplex directions adjusted to the row norms.
// Every block is a pure function of its stream key (rng.hpp), so W stays a pure function
// of (seed, projection, m, d, trial) (docs/design.md section 7).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "favor/core/tensor.hpp"

namespace favor {

// One Haar-distributed d x d orthogonal block (rows orthonormal) from a Gaussian stream;
// `sign_fix` multiplies column j of Q by sign(R_jj), which makes Q Haar (Mezzadri 2007).
Mat<double> orthogonal_block(std::uint64_t key, std::size_t d, bool sign_fix);


// Smallest power of two >= d (d >= 1).
std::size_t next_pow2(std::size_t d);

// In-place normalised fast Walsh-Hadamard transform: v <- H v, v: (p), p a power of two.
// H = H_p / sqrt(p) with H_p the Sylvester matrix [[H, H], [H, -H]]: symmetric, orthogonal.
// O(p log p).
void fwht(double* v, std::size_t p);

// One SORF block M = sqrt(p) H D1 H D2 H D3 (p x p), D_k = diag(signs d_k), signs +-1.
// M has orthogonal rows of norm sqrt(p) and E[M_ij^2] = 1 (Yu et al. 2016, eq. 4).
struct SorfBlock {
    std::size_t p = 0;
    std::vector<double> d1, d2, d3;   // each (p), entries +-1
};

// Signs of one block: d_k[i] = +-1 from uniform number k*p + i of the stream `key`.
SorfBlock sorf_block(std::uint64_t key, std::size_t p);

// out = M x for one block, x and out: (p), in O(p log p). out may alias x.
void sorf_apply(const SorfBlock& b, const double* x, double* out);

// The first d columns of M, i.e. M acting on inputs zero-padded from d to p: (p, d).
// Built column by column with sorf_apply (column j of M is M e_j).
Mat<double> sorf_rows(const SorfBlock& b, std::size_t d);

// One Givens rotation of coordinates (i, j), i != j, by the angle with cosine c, sine s:
// row vector r <- r G with r_i' = c r_i - s r_j, r_j' = s r_i + c r_j.
struct Givens {
    std::size_t i = 0, j = 0;
    double c = 1.0, s = 0.0;
};

// d * ceil(log2 d) rotations for one block (d >= 2): the pair (i, j) uniform over ordered
// pairs with i != j, the angle uniform in [0, 2 pi); rotation t uses uniforms 3t, 3t+1, 3t+2
// of the stream `key` (one stream per block, unlike the official TF code that reuses one
// seed for all blocks and can draw i == j).
std::vector<Givens> givens_rotations(std::uint64_t key, std::size_t d);

// The d x d orthogonal product I G_1 G_2 ... G_K of the rotations above (rows orthonormal).
Mat<double> givens_block(std::uint64_t key, std::size_t d);

// A regular simplex of d unit vectors in R^d (d >= 2), rows s_i = sqrt(d/(d-1)) (e_i - 1/d),
// pairwise dot -1/(d-1); they span the (d-1)-dim subspace orthogonal to (1, ..., 1).
Mat<double> simplex_directions(std::size_t d);

// One SimRF block: rows s_i R for a Haar rotation R = orthogonal_block(key, d, sign fix):
// (d, d), unit rows with pairwise dot -1/(d-1), the simplex in uniformly random position.
Mat<double> simplex_block(std::uint64_t key, std::size_t d);

// Sweeps of the SimRF+ update (Reid et al. 2023, eq. 17; their code's default). Each sweep
// updates s_1 .. s_d in turn; measured E|sum_i w_i s_i|^2 from the SimRF start (1.87 at
// d = 4, d/2 in general): d = 4: 0.011, 0.0026, 0.0021, 0.0019 after 1 .. 4 sweeps, 0.0018
// at 10 (what is left is the blocks whose largest norm exceeds the sum of the others, where
// the minimum is > 0); d >= 8: below 1e-10 after one sweep. The positive estimator's MSE at
// the d = m = 4 reference point is the same to 1e-5 from 3 sweeps on.
constexpr std::size_t kSimplexPlusSweeps = 5;

// SimRF+ directions: from unit rows s_i of `dirs` (d x d) and the block's norms w_i (d of
// them), `sweeps` Gauss-Seidel sweeps of s_i <- -v_i / |v_i|, v_i = sum_{j != i} w_j s_j,
// each the exact minimiser over s_i of |sum_j w_j s_j|^2 = sum_j w_j^2 + sum_{i != j} w_i w_j
// s_i.s_j, the directions' part of the positive estimator's second-order MSE term. A v_i of
// norm 0 leaves s_i unchanged. The update commutes with rotations, so for a Haar-rotated
// start (simplex_block) the output is F(w) R with R Haar and independent of w: every s_i is
// uniform on the sphere given all the norms, and w_i s_i is exactly N(0, I_d).
Mat<double> simplex_plus_directions(Mat<double> dirs, const double* norms, std::size_t sweeps = kSimplexPlusSweeps);

}  // namespace favor
