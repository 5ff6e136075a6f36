#pragma once
// dst (k x n, rows ldd apart) = src^T for src (n x k, rows lds apart): the transposed operands
// the tile kernels read (K^T for the score products). A copy, so the numbers are the inputs';
// 8 x 8 float and 4 x 4 double blocks in AVX registers where the build has AVX (unpack, shuffle,
// lane permute: 3 shuffles per element instead of a scalar load and store each), the edges and
// other builds element by element.
#include <cstddef>
#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace favor::tiles {

namespace detail {
#if defined(__AVX__)
inline void block_transpose(const float* s, std::size_t lds, float* d, std::size_t ldd) {   // 8 x 8
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * lds);
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {   // r[i]: columns i and i + 4 of rows 0-3 (low lanes), r[i + 4] of rows 4-7
        _mm256_storeu_ps(d + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(d + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}
inline void block_transpose(const double* s, std::size_t lds, double* d, std::size_t ldd) {   // 4 x 4
    const __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + lds), r2 = _mm256_loadu_pd(s + 2 * lds),
                  r3 = _mm256_loadu_pd(s + 3 * lds);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3),
                  t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(d + ldd, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(d + 2 * ldd, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(d + 3 * ldd, _mm256_permute2f128_pd(t1, t3, 0x31));
}
template <class T>
constexpr std::size_t block_size() { return 32 / sizeof(T); }
#else
template <class T>
constexpr std::size_t block_size() { return 0; }
#endif
}  // namespace detail

template <class T>
inline void transpose(const T* src, std::size_t n, std::size_t k, std::size_t lds, T* dst, std::size_t ldd) {
    constexpr std::size_t B = detail::block_size<T>();
    std::size_t n0 = 0, k0 = 0;
    if constexpr (B > 0) {
        n0 = n / B * B, k0 = k / B * B;
        for (std::size_t c = 0; c < k0; c += B)   // B rows of dst at a time, written along (few pages)
            for (std::size_t j = 0; j < n0; j += B) detail::block_transpose(src + j * lds + c, lds, dst + c * ldd + j, ldd);
    }
    for (std::size_t j = 0; j < n; ++j)   // the edges: columns past k0 of every row, rows past n0
        for (std::size_t c = j < n0 ? k0 : 0; c < k; ++c) dst[c * ldd + j] = src[j * lds + c];
}

}  // namespace favor::tiles
