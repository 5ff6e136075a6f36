#pragma once
// Pieces of the backward tests (test_backward.cpp, test_backward_exact.cpp): Gaussian
// matrices from a seed and the relative Frobenius difference.
#include <cmath>
#include <cstdint>
#include <random>

#include "favor/core/tensor.hpp"

namespace favor_test {

inline favor::Mat<double> normal(std::size_t rows, std::size_t cols, double scale, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n(0.0, scale);
    favor::Mat<double> a = favor::Mat<double>::from_shape({rows, cols});
    for (auto& v : a) v = n(rng);
    return a;
}

// ||a - b||_F / ||b||_F, or ||a - b||_F where b = 0 (one key: dQ = dK = 0, the softmax of a
// single score being 1).
inline double rel_diff(const favor::Mat<double>& a, const favor::Mat<double>& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num += (a.data()[i] - b.data()[i]) * (a.data()[i] - b.data()[i]);
        den += b.data()[i] * b.data()[i];
    }
    return std::sqrt(den > 0 ? num / den : num);
}

}  // namespace favor_test
