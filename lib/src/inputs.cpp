#include "favor/inputs.hpp"

#include <cmath>

#include "favor/error.hpp"
#include "favor/report.hpp"
#include "favor/rng.hpp"

namespace favor {

namespace {
Mat<double> normal_matrix(std::uint64_t key, std::size_t rows, std::size_t cols, double scale, const std::string& field,
                          const char* name) {
    Mat<double> a = Mat<double>::from_shape({rows, cols});
    fill_normal(key, a.data(), a.size());
    for (double& v : a) v *= scale;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!std::isfinite(a.data()[i]))
            throw Error(field + ": " + format_number(scale) + " makes entry " + std::to_string(i) + " of " + name +
                        " infinite (a normal draw times the scale beyond 1.8e308); inputs must be finite, "
                        "as in a .npy file: lower the scale");
    return a;
}
}  // namespace

QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  const std::string& field) {
    return {normal_matrix(stream_key({seed, tag("inputs-q"), d}), L, d, scale, field, "q"),
            normal_matrix(stream_key({seed, tag("inputs-k"), d}), L, d, scale, field, "k"),
            normal_matrix(stream_key({seed, tag("inputs-v"), d_v}), L, d_v, scale, field, "v")};
}

}  // namespace favor
