// qmc, randomised quasi-Monte Carlo (docs/estimators.md section 2, "qmc"): row i is
// Phi^{-1} of Sobol point i (Joe & Kuo directions), Owen-scrambled per (seed, d, trial)
// (favor/estimators/qmc.hpp). No blocks: W is nested in m because row i is point i. d <= kSobolMaxDim.
#include "blocks.hpp"
#include "favor/estimators/qmc.hpp"

namespace favor {

Mat<double> draw_qmc(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    return qmc_gaussian(m, d, DrawKeys{seed, d, trial}.whole("W-qmc"));
}

}  // namespace favor
