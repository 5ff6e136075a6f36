#pragma once
// Random Q, K, V (docs/design.md section 7): a pure function of (seed, input seed, L, d, d_v,
// scale); input seed 0 (the default) draws from the streams of a run without input_seeds.
// Entry (i, c) of Q is normal number i*d + c of the stream (seed, "inputs-q", d), times
// scale, so inputs for a smaller L are the first rows of those for a larger one, and inputs
// at two scales differ only by the factor.
#include <cstdint>

#include "favor/tensor.hpp"

namespace favor {

struct QKV {
    Mat<double> q, k, v;   // (L, d), (L, d), (L, d_v)
};

QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  std::uint64_t input_seed = 0);

}  // namespace favor
