#pragma once
// The tensor types used across favor: row-major xtensor containers of fixed rank.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <xtensor/xtensor.hpp>

namespace favor {

template <class T>
using Mat = xt::xtensor<T, 2>;   // row-major (rows, cols)

namespace detail {
// A row-major (rows, cols) matrix in memory its caller owns and keeps alive: a Mat, or a
// numpy array's buffer (the Python module hands C-contiguous arrays of the compute type to
// the forward passes without a copy). Read through data() and shape() as a Mat is.
template <class T>
class MatViewOf {
public:
    MatViewOf(const T* data, std::size_t rows, std::size_t cols) : p_(data), shape_{rows, cols} {}
    MatViewOf(const Mat<T>& m) : p_(m.data()), shape_{m.shape(0), m.shape(1)} {}   // implicit: a Mat is a view
    const T* data() const { return p_; }
    const std::array<std::size_t, 2>& shape() const { return shape_; }
    std::size_t shape(std::size_t i) const { return shape_[i]; }
    std::size_t size() const { return shape_[0] * shape_[1]; }
    const T& operator()(std::size_t i, std::size_t j) const { return p_[i * shape_[1] + j]; }

private:
    const T* p_;
    std::array<std::size_t, 2> shape_;
};
template <class T>
struct NonDeduced {
    using type = T;
};
}  // namespace detail

// MatView<T> parameters take a Mat<T> or a view; T is never deduced from them (the alias is a
// non-deduced context), so a function template deduces T from its other parameters and a Mat
// argument converts implicitly.
template <class T>
using MatView = typename detail::NonDeduced<detail::MatViewOf<T>>::type;

// An owning copy of a view.
template <class T>
Mat<T> to_mat(MatView<T> v) {
    Mat<T> m = Mat<T>::from_shape(v.shape());
    std::copy(v.data(), v.data() + v.size(), m.data());
    return m;
}

// A Mat or a view (detail::MatViewOf) converted to To entry by entry.
template <class To, class Matrix>
Mat<To> cast_mat(const Matrix& a) {
    Mat<To> out = Mat<To>::from_shape({a.shape(0), a.shape(1)});
    const auto* s = a.data();
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
