#pragma once
// Random projections W (m x d, rows w_i), shared by queries and keys (docs/design.md section 2).
#include <cstdint>
#include <string>
#include <vector>

#include "favor/tensor.hpp"

namespace favor {

enum class Projection {
    iid,                   // entries N(0, 1)
    orthogonal,            // ORF: Haar blocks (QR sign-corrected by diag R), chi(d) row norms
    orthogonal_fixed,      // same directions, every row norm sqrt(d) (the paper's SMREG)
    orthogonal_nosignfix,  // ORF without the sign correction, as the public code does it
    // "Beyond FAVOR+" (structured.hpp has the blocks):
    simplex,   // SimRF (Reid et al. 2023): per d x d block a Haar-rotated regular simplex
               // (unit rows, pairwise dot -1/(d-1)), chi(d) row norms; needs d >= 2
    hadamard,  // SORF (Yu et al. 2016): per block of p = next_pow2(d) rows the first d
               // columns of H D1 H D2 H D3 (inputs zero-padded to p), chi(p) row norms
    hadamard_fixed,  // the same directions with Yu et al.'s fixed norm sqrt(p) (biased,
                     // like orthogonal-fixed)
    givens,    // per d x d block a product of d ceil(log2 d) random Givens rotations,
               // chi(d) row norms as for ORF; needs d >= 2
    simplex_plus,  // SimRF+ (Reid et al. 2023): the simplex block and chi(d) norms (same
                   // streams as simplex), directions then adjusted to the norms by
                   // kSimplexPlusSweeps sweeps of s_i <- -sum_{j!=i} w_j s_j / |.|; d >= 2
    qmc,       // randomised QMC: row i = Phi^{-1} of Sobol point i (Joe & Kuo directions),
               // Owen-scrambled per (seed, trial); d <= kSobolMaxDim (1024)
};

Projection parse_projection(const std::string& name);   // throws Error naming the value
std::string projection_name(Projection p);
const std::vector<std::string>& projection_names();
// The smallest dimension d the projection is defined for (simplex, simplex-plus, givens: 2).
std::size_t projection_min_d(Projection p);
// The largest (qmc: kSobolMaxDim, the embedded Sobol dimensions; others: SIZE_MAX).
std::size_t projection_max_d(Projection p);

// W for (seed, projection, m, d, trial): a pure function of those values (docs/design.md s. 7).
// Rows are nested in m: the first m rows of W(m') for m' > m are W(m). Returns (m, d).
// Blocks have d rows (p = next_pow2(d) for hadamard); block b and row norms come from
// streams keyed by (seed, projection tag, d, trial[, b]); the last block is truncated (a
// simplex-plus block still uses all d of its norms). qmc has no blocks: row i is point i.
Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial);

}  // namespace favor
