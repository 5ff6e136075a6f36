#pragma once
// Vectorised elementwise kernels (xsimd, width chosen by the -march of the build).
// xsimd's exp is accurate to a few ulp over the whole range (tested against std::exp in
// tests/core/test_vmath.cpp); xsimd's sincos to a few ulp for |x| up to ~1e4 (tested too);
// scalar tails use std::exp / std::sin / std::cos.
// Reductions use one accumulator per SIMD lane, combined in lane order: a fixed order that
// depends only on n, never on threads.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <xsimd/xsimd.hpp>

namespace favor {

namespace detail {
template <class T>
struct ExpConstants;
// float: Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then the Cephes expf polynomial
// (degree 7 in r: 1 + r + r^2 P(r)); double: the same with the Taylor polynomial of degree
// 13 (truncation error < r^14/14! < 1e-19 relative). Both within 2 ulp of exp, tested
// against long double exp in tests/core/test_vmath.cpp and tests/experiments/test_timing.cpp.
template <>
struct ExpConstants<float> {
    using I = std::int32_t;
    static constexpr float lo = -104.0f, hi = 89.0f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    static constexpr int bias = 127, mant = 23;
    static constexpr float coeff[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
};
template <>
struct ExpConstants<double> {
    using I = std::int64_t;
    static constexpr double lo = -746.0, hi = 710.0, ln2_hi = 6.93145751953125e-1,
                            ln2_lo = 1.42860682030941723212e-6;
    static constexpr int bias = 1023, mant = 52;
    static constexpr double coeff[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                       1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                       1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                       1.0 / 24.0,         1.0 / 6.0,         0.5};
};
}  // namespace detail

// exp of each lane. Overflow gives +inf, underflow 0 (through the subnormals), NaN stays NaN.
template <class T, class A>
inline xsimd::batch<T, A> vexp(const xsimd::batch<T, A>& x0) {
    using B = xsimd::batch<T, A>;
    using C = detail::ExpConstants<T>;
    using I = typename C::I;
    using BI = xsimd::batch<I, A>;
    const B x = xsimd::min(xsimd::max(x0, B(C::lo)), B(C::hi));
    // k = round(x / ln2) with the shifter trick: the low bits of x/ln2 + 1.5 * 2^mant hold k.
    const B magic(T(1.5) * T(I(1) << C::mant));
    const B shifted = xsimd::fma(x, B(T(1.4426950408889634)), magic);
    const B k = shifted - magic;
    B r = xsimd::fnma(k, B(C::ln2_hi), x);
    r = xsimd::fnma(k, B(C::ln2_lo), r);
    B p(C::coeff[0]);
    for (std::size_t j = 1; j < sizeof(C::coeff) / sizeof(T); ++j) p = xsimd::fma(p, r, B(C::coeff[j]));
    p = xsimd::fma(p, r * r, r) + B(T(1));
    B y;
#if defined(__AVX512F__)
    if constexpr (std::is_base_of<xsimd::avx512f, A>::value) {
        // p * 2^k in one instruction (vscalefps / vscalefpd): exact in the normal range,
        // rounded once into the subnormals, +inf past the top, as the two factors below.
        // (the zero-masking forms with every lane selected: the plain ones start from an
        // undefined register, which GCC 12 reports as used uninitialised under -O2 -fsanitize)
        if constexpr (std::is_same<T, float>::value) y = B(_mm512_maskz_scalef_ps(__mmask16(0xFFFF), p, k));
        else y = B(_mm512_maskz_scalef_pd(__mmask8(0xFF), p, k));
    } else
#endif
    {
        // 2^k as 2^k1 * 2^k2 (k1 = k/2), so both factors are normal numbers for every k in range.
        const BI ki = xsimd::bitwise_cast<BI>(shifted) - xsimd::bitwise_cast<BI>(magic);
        const BI k1 = ki >> 1, k2 = ki - k1;
        const B s1 = xsimd::bitwise_cast<B>((k1 + BI(I(C::bias))) << C::mant);
        const B s2 = xsimd::bitwise_cast<B>((k2 + BI(I(C::bias))) << C::mant);
        y = p * s1 * s2;
    }
    return xsimd::select(xsimd::isnan(x0), x0, y);
}

// p[i] = exp(p[i] - shift) for i < n.
template <class T>
inline void exp_shifted(T* p, std::size_t n, T shift) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B s(shift);
    std::size_t i = 0;
    for (; i + W <= n; i += W) vexp(B::load_unaligned(p + i) - s).store_unaligned(p + i);
    for (; i < n; ++i) p[i] = std::exp(p[i] - shift);
}

// p[i] = exp(p[i] - shift) for i < n; returns the sum of the new p[i] (lane sums in T,
// added in double in lane order).
template <class T>
inline double exp_shifted_sum(T* p, std::size_t n, T shift) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B s(shift);
    B acc0(T(0)), acc1(T(0));
    std::size_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        const B e0 = vexp(B::load_unaligned(p + i) - s);
        const B e1 = vexp(B::load_unaligned(p + i + W) - s);
        e0.store_unaligned(p + i);
        e1.store_unaligned(p + i + W);
        acc0 += e0;
        acc1 += e1;
    }
    for (; i + W <= n; i += W) {
        const B e0 = vexp(B::load_unaligned(p + i) - s);
        e0.store_unaligned(p + i);
        acc0 += e0;
    }
    alignas(64) T lanes[2 * W];
    acc0.store_aligned(lanes);
    acc1.store_aligned(lanes + W);
    double total = 0.0;
    for (std::size_t k = 0; k < 2 * W; ++k) total += double(lanes[k]);
    for (; i < n; ++i) {
        p[i] = std::exp(p[i] - shift);
        total += double(p[i]);
    }
    return total;
}

// p[i] = (exp(p[i] - shift) + eps) * c for i < n (the stabilised, normalised features).
template <class T>
inline void exp_shift_scale(T* p, std::size_t n, T shift, T eps, T c) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B s(shift), e(eps), cc(c);
    std::size_t i = 0;
    if (eps == T(0)) {
        for (; i + W <= n; i += W) (vexp(B::load_unaligned(p + i) - s) * cc).store_unaligned(p + i);
    } else {
        for (; i + W <= n; i += W) ((vexp(B::load_unaligned(p + i) - s) + e) * cc).store_unaligned(p + i);
    }
    if (i < n) {   // the tail as one padded batch (m is often not a multiple of the width)
        alignas(64) T t[W] = {};
        std::copy(p + i, p + n, t);
        ((vexp(B::load_aligned(t) - s) + e) * cc).store_aligned(t);
        std::copy(t, t + (n - i), p + i);
    }
}

// s[j] = (sin(p[j]) + eps) * c, co[j] = (cos(p[j]) + eps) * c for j < n. s may alias p.
template <class T>
inline void sincos_scale(const T* p, T* s, T* co, std::size_t n, T eps, T c) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B e(eps), cc(c);
    std::size_t i = 0;
    for (; i + W <= n; i += W) {
        const auto sc = xsimd::sincos(B::load_unaligned(p + i));
        ((sc.second + e) * cc).store_unaligned(co + i);
        ((sc.first + e) * cc).store_unaligned(s + i);
    }
    if (i < n) {   // the tail as one padded batch
        alignas(64) T t[W] = {}, u[W];
        std::copy(p + i, p + n, t);
        const auto sc = xsimd::sincos(B::load_aligned(t));
        ((sc.second + e) * cc).store_aligned(u);
        ((sc.first + e) * cc).store_aligned(t);
        std::copy(u, u + (n - i), co + i);
        std::copy(t, t + (n - i), s + i);
    }
}

// Largest of p[0..n) (n > 0).
template <class T>
inline T max_of(const T* p, std::size_t n) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    std::size_t i = 0;
    T m = p[0];
    if (n >= 2 * W) {
        B m0 = B::load_unaligned(p), m1 = B::load_unaligned(p + W);
        for (i = 2 * W; i + 2 * W <= n; i += 2 * W) {
            m0 = xsimd::max(m0, B::load_unaligned(p + i));
            m1 = xsimd::max(m1, B::load_unaligned(p + i + W));
        }
        alignas(64) T lanes[W];
        xsimd::max(m0, m1).store_aligned(lanes);
        m = lanes[0];
        for (std::size_t k = 1; k < W; ++k) m = lanes[k] > m ? lanes[k] : m;
    }
    for (; i < n; ++i) m = p[i] > m ? p[i] : m;
    return m;
}

// Sum of p[0..n) in double, in a fixed order.
template <class T>
inline double sum_of(const T* p, std::size_t n) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += double(p[i]);
    return s;
}

// Sum of p[0..n) with one accumulator per lane (in T), added in double in lane order: a
// fixed order, vectorised; for float the lanes hold partial sums in float.
template <class T>
inline double sum_lanes(const T* p, std::size_t n) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    B acc0(T(0)), acc1(T(0));
    std::size_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        acc0 += B::load_unaligned(p + i);
        acc1 += B::load_unaligned(p + i + W);
    }
    for (; i + W <= n; i += W) acc0 += B::load_unaligned(p + i);
    alignas(64) T lanes[2 * W];
    acc0.store_aligned(lanes);
    acc1.store_aligned(lanes + W);
    double total = 0.0;
    for (std::size_t k = 0; k < 2 * W; ++k) total += double(lanes[k]);
    for (; i < n; ++i) total += double(p[i]);
    return total;
}

// Dot product of a[0..n) and b[0..n) in T, one accumulator per lane (two batches), lanes
// added in order, then the scalar tail: a fixed order that depends only on n.
template <class T>
inline T dot_lanes(const T* a, const T* b, std::size_t n) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    B acc0(T(0)), acc1(T(0));
    std::size_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        acc0 = xsimd::fma(B::load_unaligned(a + i), B::load_unaligned(b + i), acc0);
        acc1 = xsimd::fma(B::load_unaligned(a + i + W), B::load_unaligned(b + i + W), acc1);
    }
    for (; i + W <= n; i += W) acc0 = xsimd::fma(B::load_unaligned(a + i), B::load_unaligned(b + i), acc0);
    alignas(64) T lanes[W];
    (acc0 + acc1).store_aligned(lanes);
    T s = T(0);
    for (std::size_t k = 0; k < W; ++k) s += lanes[k];
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Sum of p[i]^2 in double, 8 partial sums (vectorised) added in order: a fixed order.
template <class T>
inline double sum_squares(const T* p, std::size_t n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (std::size_t k = 0; k < 8; ++k) acc[k] += double(p[i + k]) * double(p[i + k]);
    double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) s += double(p[i]) * double(p[i]);
    return s;
}

// p[i] *= c for i < n.
template <class T>
inline void scale_in_place(T* p, std::size_t n, T c) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B cc(c);
    std::size_t i = 0;
    for (; i + W <= n; i += W) (B::load_unaligned(p + i) * cc).store_unaligned(p + i);
    for (; i < n; ++i) p[i] *= c;
}

}  // namespace favor
