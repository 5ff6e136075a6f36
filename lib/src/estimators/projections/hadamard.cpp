// SORF (Yu et al. 2016, Orthogonal Random Features; Performer App. B.2; docs/estimators.md
// section 2, "hadamard"): per block of P = next_pow2(d) rows the first d columns of
// sqrt(P) H D1 H D2 H D3 (inputs padded with zeros to P), so every P-dim row has norm sqrt(P)
// before truncation.
//   hadamard-fixed: Yu et al. keep that fixed norm: like orthogonal-fixed (SMREG) the
//     estimator is then biased, -1.6% at the d = 4 reference point.
//   hadamard: row r gets the norm chi_at(r, P) instead, as ORF does, so w = (chi(P) u)[:d]
//     with u the unit P-dim row: N(0, I_d) up to the 4th-moment anisotropy of the discrete
//     SORF directions (exact residual bias -0.15% at that point; docs/beyond.md).
// Both read the same block stream.
#include <cmath>

#include "blocks.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

namespace {
Mat<double> sorf(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial, bool chi_norms) {
    const DrawKeys keys{seed, d, trial};
    const std::size_t P = next_pow2(d);
    const std::uint64_t norm_key = keys.whole("W-hadamard-norms");
    return stack_blocks(
        m, d, P, [&](std::size_t b) { return sorf_rows(sorf_block(keys.block("W-hadamard-block", b), P), d); },
        [&](std::size_t r) { return chi_norms ? chi_at(norm_key, r, P) / std::sqrt(double(P)) : 1.0; });
}
}  // namespace

Mat<double> draw_hadamard(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return sorf(m, d, seed, trial, true);
}

Mat<double> draw_hadamard_fixed(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return sorf(m, d, seed, trial, false);
}

}  // namespace favor
