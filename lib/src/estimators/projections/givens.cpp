// givens (Performer App. B.2; docs/estimators.md section 2, "givens"): per d x d block a
// product of d ceil(log2 d) random Givens rotations (structured.hpp), chi(d) row norms
// independent of the directions, as for ORF. Needs d >= 2.
#include "blocks.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

Mat<double> draw_givens(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return chi_normed_blocks(m, DrawKeys{seed, d, trial}, "W-givens-block", "W-givens-norms",
                             [d](std::uint64_t key) { return givens_block(key, d); });
}

}  // namespace favor
