#include "favor/inputs.hpp"

#include "favor/rng.hpp"

namespace favor {

namespace {
Mat<double> normal_matrix(std::uint64_t key, std::size_t rows, std::size_t cols, double scale) {
    Mat<double> a = Mat<double>::from_shape({rows, cols});
    fill_normal(key, a.data(), a.size());
    for (double& v : a) v *= scale;
    return a;
}

// The stream of one input tensor (docs/design.md section 7): (seed, name, dim), with the
// input seed appended only when it is not 0, so input seed 0 is the one draw of a run
// without input_seeds.
std::uint64_t input_key(std::uint64_t seed, const char* name, std::size_t dim, std::uint64_t input_seed) {
    return input_seed == 0 ? stream_key({seed, tag(name), dim}) : stream_key({seed, tag(name), dim, input_seed});
}
}  // namespace

QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  std::uint64_t input_seed) {
    return {normal_matrix(input_key(seed, "inputs-q", d, input_seed), L, d, scale),
            normal_matrix(input_key(seed, "inputs-k", d, input_seed), L, d, scale),
            normal_matrix(input_key(seed, "inputs-v", d_v, input_seed), L, d_v, scale)};
}

}  // namespace favor
