#pragma once
// Random projections W (m x d, rows w_i), shared by queries and keys (design.md section 2).
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
};

Projection parse_projection(const std::string& name);   // throws Error naming the value
std::string projection_name(Projection p);
const std::vector<std::string>& projection_names();
bool is_orthogonal(Projection p);  // rows orthogonal within each block of d

// W for (seed, projection, m, d, trial): a pure function of those values (design.md s. 7).
// Rows are nested in m: the first m rows of W(m') for m' > m are W(m). Returns (m, d).
Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial);

// One Haar-distributed d x d orthogonal block (rows orthonormal) from a Gaussian stream;
// `sign_fix` multiplies column j of Q by sign(R_jj), which makes Q Haar (Mezzadri 2007).
Mat<double> orthogonal_block(std::uint64_t key, std::size_t d, bool sign_fix);

}  // namespace favor
