// The ORF family (Choromanski et al. 2021, Performer, Theorem 2; docs/estimators.md section 2):
// per d x d block the Q of a Gaussian's QR, rows scaled by a norm.
//   orthogonal:           Q sign-corrected by diag R (Haar; Mezzadri 2007), chi(d) row norms
//   orthogonal-fixed:     the same directions, every row norm sqrt(d) (the paper's SMREG)
//   orthogonal-nosignfix: Q without the sign correction, as the public code does it
// All three read the same block and norm streams.
#include <cmath>

#include "blocks.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

namespace {
Mat<double> orf(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial, bool sign_fix,
                bool fixed_norm) {
    const DrawKeys keys{seed, d, trial};
    auto block = [&](std::uint64_t key) { return orthogonal_block(key, d, sign_fix); };
    if (!fixed_norm) return chi_normed_blocks(m, keys, "W-orthogonal-block", "W-chi-norms", block);
    return stack_blocks(
        m, d, d, [&](std::size_t b) { return block(keys.block("W-orthogonal-block", b)); },
        [&](std::size_t) { return std::sqrt(double(d)); });
}
}  // namespace

Mat<double> draw_orthogonal(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return orf(m, d, seed, trial, true, false);
}

Mat<double> draw_orthogonal_fixed(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return orf(m, d, seed, trial, true, true);
}

Mat<double> draw_orthogonal_nosignfix(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return orf(m, d, seed, trial, false, false);
}

}  // namespace favor
