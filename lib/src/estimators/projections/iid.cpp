// iid: entries N(0, 1), every row exactly N(0, I_d) and independent (docs/estimators.md
// section 2, "iid").
#include "blocks.hpp"
#include "favor/core/rng.hpp"

namespace favor {

Mat<double> draw_iid(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    Mat<double> W = Mat<double>::from_shape({m, d});
    fill_normal(DrawKeys{seed, d, trial}.whole("W-iid"), W.data(), W.size());
    return W;
}

}  // namespace favor
