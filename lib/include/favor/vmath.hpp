#pragma once
// Vectorised elementwise kernels (xsimd, width chosen by the -march of the build).
// xsimd's exp is accurate to a few ulp over the whole range (tested against std::exp in
// tests/test_vmath.cpp); the scalar tail uses std::exp.
#include <cmath>
#include <cstddef>
#include <xsimd/xsimd.hpp>

namespace favor {

// p[i] = exp(p[i] - shift) for i < n.
template <class T>
inline void exp_shifted(T* p, std::size_t n, T shift) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B s(shift);
    std::size_t i = 0;
    for (; i + W <= n; i += W) xsimd::exp(B::load_unaligned(p + i) - s).store_unaligned(p + i);
    for (; i < n; ++i) p[i] = std::exp(p[i] - shift);
}

// Largest of p[0..n) (n > 0).
template <class T>
inline T max_of(const T* p, std::size_t n) {
    T m = p[0];
    for (std::size_t i = 1; i < n; ++i) m = p[i] > m ? p[i] : m;
    return m;
}

// Sum of p[0..n) in double, in a fixed order.
template <class T>
inline double sum_of(const T* p, std::size_t n) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += double(p[i]);
    return s;
}

}  // namespace favor
