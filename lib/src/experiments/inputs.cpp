#include "favor/experiments/inputs.hpp"

#include <cmath>

#include "favor/core/error.hpp"
#include "favor/core/rng.hpp"
#include "favor/io/report.hpp"

namespace favor {

namespace {
Mat<double> normal_matrix(std::uint64_t key, std::size_t rows, std::size_t cols) {
    Mat<double> a = Mat<double>::from_shape({rows, cols});
    fill_normal(key, a.data(), a.size());
    return a;
}

// The stream of one input tensor (docs/design.md section 7): (seed, name, dim), with the
// input seed appended only when it is not 0, so input seed 0 is the one draw of a run
// without input_seeds.
std::uint64_t input_key(std::uint64_t seed, const char* name, std::size_t dim, std::uint64_t input_seed) {
    return input_seed == 0 ? stream_key({seed, tag(name), dim}) : stream_key({seed, tag(name), dim, input_seed});
}

// Multiplies by the scale; an entry that overflows is an Error naming `field`.
void scale_finite(Mat<double>& a, double scale, const std::string& field, const char* name) {
    for (double& v : a) v *= scale;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!std::isfinite(a.data()[i]))
            throw Error(field + ": " + format_number(scale) + " makes entry " + std::to_string(i) + " of " + name +
                        " infinite (a normal draw times the scale beyond 1.8e308); inputs must be finite, "
                        "as in a .npy file: lower the scale");
}
}  // namespace

QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  const InputDraw& draw) {
    const std::uint64_t s = draw.input_seed;
    QKV in{normal_matrix(input_key(seed, "inputs-q", d, s), L, d), normal_matrix(input_key(seed, "inputs-k", d, s), L, d),
           normal_matrix(input_key(seed, "inputs-v", d_v, s), L, d_v)};
    // The family's own draws (bases, offsets, centres) are new for every input seed too.
    const std::uint64_t family_seed = s == 0 ? seed : stream_key({seed, tag("input-seed"), s});
    if (draw.family.any()) apply_family(draw.family, family_seed, in.q, in.k);   // at scale 1, before the factor
    scale_finite(in.q, scale, draw.field, "q");
    scale_finite(in.k, scale, draw.field, "k");
    scale_finite(in.v, scale, draw.field, "v");
    return in;
}

Mat<double> upstream_gradient(std::uint64_t seed, std::size_t L, std::size_t d_v, std::size_t head,
                              std::uint64_t input_seed) {
    const std::uint64_t key = input_seed == 0 ? stream_key({seed, tag("upstream-grad"), d_v, head})
                                              : stream_key({seed, tag("upstream-grad"), d_v, head, input_seed});
    return normal_matrix(key, L, d_v);
}

}  // namespace favor
