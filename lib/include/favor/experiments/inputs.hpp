#pragma once
// Random Q, K, V (docs/design.md section 7): a pure function of (seed, input seed, L, d, d_v,
// scale, family); input seed 0 (the default) draws from the streams of a run without
// input_seeds.
// Entry (i, c) of Q is normal number i*d + c of the stream (seed, "inputs-q", d), times
// scale, so inputs for a smaller L are the first rows of those for a larger one, and inputs
// at two scales differ only by the factor. A family (input_families.hpp) transforms those
// draws row by row at scale 1 before the factor; the default family leaves them as they are.
#include <cstdint>
#include <string>
#include <vector>

#include "favor/core/tensor.hpp"
#include "favor/experiments/input_families.hpp"

namespace favor {

template <class T>
struct InputsOf {
    Mat<T> q, k, v;   // (L, d), (L, d), (L, d_v)
};
using QKV = InputsOf<double>;

// What a draw depends on beyond (seed, L, d, d_v, scale).
struct InputDraw {
    InputFamily family;                    // default: isotropic (no knob set)
    std::uint64_t input_seed = 0;          // 0: the one draw of a run without input_seeds
    std::string field = "inputs.scale";    // names the scale in an overflow error
};

// Error "<field>: <scale> makes entry i of q infinite ..." when an entry overflows (scale near
// 1.8e308): random inputs must be finite, as .npy inputs are (tensor_io.cpp, load_checked).
// Drawn in blocks of rows on `threads` threads (the values do not depend on them).
QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  const InputDraw& draw = {}, int threads = 1);

// random_inputs' values rounded to T, drawn straight into T in blocks of rows: no float64
// copy of the whole (a float32 run at L = 2^20, d = 64 holds 768 MB of inputs, not 2.3 GB).
template <class T>
InputsOf<T> random_inputs_as(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                             const InputDraw& draw, int threads);

// The float64 scratch (bytes) one thread holds while random_inputs_as draws a block of rows.
std::size_t input_block_bytes(std::size_t d, std::size_t d_v);

// Rows `rows` of random_inputs' q, k and v (any order, any row of any L), bitwise those rows.
QKV random_input_rows(std::uint64_t seed, std::size_t d, std::size_t d_v, double scale, const InputDraw& draw,
                      const std::vector<std::size_t>& rows);

// The upstream gradient G = dLoss/dOut (L, d_v) of the gradient metrics (docs/design.md
// section 7): entry (i, c) is normal number i*d_v + c of the stream (seed, "upstream-grad",
// d_v, head), input seed appended when not 0; N(0, 1), nested in L like the inputs, and a
// stream of its own, so no other draw changes.
Mat<double> upstream_gradient(std::uint64_t seed, std::size_t L, std::size_t d_v, std::size_t head,
                              std::uint64_t input_seed = 0);

}  // namespace favor
