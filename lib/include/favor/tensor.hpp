#pragma once
// The tensor types used across favor: row-major xtensor containers of fixed rank.
#include <cmath>
#include <cstddef>
#include <xtensor/xtensor.hpp>

namespace favor {

template <class T>
using Mat = xt::xtensor<T, 2>;   // row-major (rows, cols)

template <class To, class From>
Mat<To> cast_mat(const Mat<From>& a) {
    Mat<To> out = Mat<To>::from_shape(a.shape());
    const From* s = a.data();
    To* d = out.data();
    for (std::size_t i = 0, n = a.size(); i < n; ++i) d[i] = static_cast<To>(s[i]);
    return out;
}

// X / d^{1/4}: the scaled rows x = q / d^{1/4} (so x.y = q.k / sqrt d).
template <class T>
Mat<T> scale_rows(const Mat<T>& X) {
    const T s = T(1.0 / std::pow(double(X.shape(1)), 0.25));
    Mat<T> out = X;
    for (auto& v : out) v *= s;
    return out;
}

}  // namespace favor
