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
}  // namespace

QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  const InputFamily& family) {
    if (family.any()) {
        QKV in = random_inputs(seed, L, d, d_v, 1.0);
        apply_family(family, seed, in.q, in.k);
        for (Mat<double>* m : {&in.q, &in.k, &in.v})
            for (double& x : *m) x *= scale;
        return in;
    }
    return {normal_matrix(stream_key({seed, tag("inputs-q"), d}), L, d, scale),
            normal_matrix(stream_key({seed, tag("inputs-k"), d}), L, d, scale),
            normal_matrix(stream_key({seed, tag("inputs-v"), d_v}), L, d_v, scale)};
}

}  // namespace favor
