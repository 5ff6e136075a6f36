// Simplex random features (Reid et al. 2023, arXiv 2301.13856; docs/estimators.md section 2):
//   simplex (SimRF): per d x d block a Haar-rotated regular simplex (unit rows, pairwise
//     dot -1/(d-1)), chi(d) row norms independent of the directions.
//   simplex-plus (SimRF+, their eq. 17): the same block and norms (the same streams, so the
//     two differ only by the sweeps at a given (seed, trial)), the directions then adjusted
//     to the norms by kSimplexPlusSweeps sweeps of s_i <- -sum_{j!=i} w_j s_j / |.|.
// Both need d >= 2.
#include <vector>

#include "blocks.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

Mat<double> draw_simplex(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return chi_normed_blocks(m, DrawKeys{seed, d, trial}, "W-simplex-block", "W-simplex-norms",
                             [d](std::uint64_t key) { return simplex_block(key, d); });
}

Mat<double> draw_simplex_plus(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    // The directions of a block depend on all d of its norms, also those of rows past m:
    // W stays nested in m.
    const DrawKeys keys{seed, d, trial};
    const std::uint64_t norm_key = keys.whole("W-simplex-norms");
    const std::size_t blocks = (m + d - 1) / d;
    std::vector<double> norms(blocks * d);
    for (std::size_t r = 0; r < norms.size(); ++r) norms[r] = chi_at(norm_key, r, d);
    return stack_blocks(
        m, d, d,
        [&](std::size_t b) {
            return simplex_plus_directions(simplex_block(keys.block("W-simplex-block", b), d), &norms[b * d]);
        },
        [&](std::size_t r) { return norms[r]; });
}

}  // namespace favor
