#include "favor/inputs.hpp"

#include <cmath>

#include "favor/error.hpp"
#include "favor/report.hpp"
#include "favor/rng.hpp"

namespace favor {

namespace {
Mat<double> normal_matrix(std::uint64_t key, std::size_t rows, std::size_t cols) {
    Mat<double> a = Mat<double>::from_shape({rows, cols});
    fill_normal(key, a.data(), a.size());
    return a;
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
                  const InputFamily& family, const std::string& field) {
    QKV in{normal_matrix(stream_key({seed, tag("inputs-q"), d}), L, d),
           normal_matrix(stream_key({seed, tag("inputs-k"), d}), L, d),
           normal_matrix(stream_key({seed, tag("inputs-v"), d_v}), L, d_v)};
    if (family.any()) apply_family(family, seed, in.q, in.k);   // at scale 1, before the factor
    scale_finite(in.q, scale, field, "q");
    scale_finite(in.k, scale, field, "k");
    scale_finite(in.v, scale, field, "v");
    return in;
}

}  // namespace favor
