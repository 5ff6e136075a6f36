#pragma once
// The tensor types used across favor: row-major xtensor containers of fixed rank.
#include <cstddef>
#include <xtensor/xtensor.hpp>

namespace favor {

template <class T>
using Mat = xt::xtensor<T, 2>;   // row-major (rows, cols)
template <class T>
using Vec = xt::xtensor<T, 1>;

template <class To, class From>
Mat<To> cast_mat(const Mat<From>& a) {
    Mat<To> out = Mat<To>::from_shape(a.shape());
    const From* s = a.data();
    To* d = out.data();
    for (std::size_t i = 0, n = a.size(); i < n; ++i) d[i] = static_cast<To>(s[i]);
    return out;
}

}  // namespace favor
