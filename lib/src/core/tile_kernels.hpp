#pragma once
// Register-blocked kernels for exact attention's two products on one tile, with the operands
// in the layouts exact_attention keeps them in, so that nothing is packed per call:
//   scores:  S (R x keys) = alpha Q (R x d) K^T, from Kt = K^T (d x Lk, keys contiguous);
//   values:  O (R x dv) += P (R x n) V (n x dv), V as given (row-major, dv contiguous).
// A BLAS packs both operands of every call; exact attention calls it twice per (query block,
// key tile), so K, V and the score tile were re-packed L / block times (docs/speed.md). Here
// K is transposed once per call of exact_attention and V not at all.
// Each output element is one chain of FMAs in k (or j) order: the numbers depend on the sizes
// only, never on the thread count.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <xsimd/xsimd.hpp>

namespace favor::tiles {

template <class T>
using Vec = xsimd::batch<T>;
template <class T>
constexpr std::size_t lanes() { return Vec<T>::size; }

// Accumulator rows per kernel call: R rows x G vectors of accumulators plus G loaded vectors
// and one broadcast must fit the register file (32 vector registers with AVX-512, 16 else).
constexpr bool kWideRegisterFile =
#if defined(__AVX512F__)
    true;
#else
    false;
#endif
// 6 x 4 with 32 registers (24 accumulators), 6 x 2 with 16 (12 accumulators, as the usual
// AVX2 GEMM kernels): per k, G loads and R broadcasts feed R G FMAs.
constexpr std::size_t kGroup = kWideRegisterFile ? 4 : 2;        // vectors per row (G)
constexpr std::size_t kRows = 6;                                 // rows per call (R)

// Keys per score panel: kGroup vectors.
template <class T>
constexpr std::size_t panel_keys() { return kGroup * lanes<T>(); }

// S rows r < R, columns [0, G W): alpha * sum_k Q[r][k] Kt[k][c]. Q: ld d; Kt: ld ldk (the
// panel's first key at column 0); S: ld lds.
template <class T, std::size_t R, std::size_t G>
inline void score_panel(const T* Q, std::size_t d, const T* Kt, std::size_t ldk, T alpha, T* S, std::size_t lds) {
    using B = Vec<T>;
    constexpr std::size_t W = B::size;
    B acc[R][G];
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t g = 0; g < G; ++g) acc[r][g] = B(T(0));
    for (std::size_t k = 0; k < d; ++k) {
        B kv[G];
        for (std::size_t g = 0; g < G; ++g) kv[g] = B::load_unaligned(Kt + k * ldk + g * W);
        for (std::size_t r = 0; r < R; ++r) {
            const B q(Q[r * d + k]);
            for (std::size_t g = 0; g < G; ++g) acc[r][g] = xsimd::fma(q, kv[g], acc[r][g]);
        }
    }
    const B a(alpha);
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t g = 0; g < G; ++g) (acc[r][g] * a).store_unaligned(S + r * lds + g * W);
}

// (score_panel is value_panel with P = Q read with unit stride and alpha at the store; one
// kernel for both, with the stride and alpha as arguments, measured 1.025-1.05x the time of
// exact attention here, so the two stay apart.)

// O rows r < R, columns [0, G W) = (add ? O : 0) + sum_{j < n} P[r][j] V[j][c], with
// P[r][j] at P[r * pr + j * pj] (P or P^T as stored); V: ld ldv; O: ld ldo.
template <class T, std::size_t R, std::size_t G>
inline void value_panel(const T* P, std::size_t pr, std::size_t pj, std::size_t n, const T* V, std::size_t ldv, T* O,
                        std::size_t ldo, bool add) {
    using B = Vec<T>;
    constexpr std::size_t W = B::size;
    B acc[R][G];
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t g = 0; g < G; ++g) acc[r][g] = B(T(0));
    for (std::size_t j = 0; j < n; ++j) {
        B vv[G];
        for (std::size_t g = 0; g < G; ++g) vv[g] = B::load_unaligned(V + j * ldv + g * W);
        for (std::size_t r = 0; r < R; ++r) {
            const B p(P[r * pr + j * pj]);
            for (std::size_t g = 0; g < G; ++g) acc[r][g] = xsimd::fma(p, vv[g], acc[r][g]);
        }
    }
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t g = 0; g < G; ++g) {
            T* o = O + r * ldo + g * W;
            (add ? acc[r][g] + B::load_unaligned(o) : acc[r][g]).store_unaligned(o);
        }
}

// Terms per partial sum of the value products: a long product (P V over thousands of keys)
// is summed as partial sums of kChunk terms added in order, so its rounding error grows like
// kChunk + n / kChunk instead of n (a single FMA chain over 4096 float32 terms lost 4x the
// accuracy of the BLAS, whose kernels also add blocks of K; results/precision_scale_sweep).
constexpr std::size_t kChunk = 128;

template <std::size_t N>
using Size = std::integral_constant<std::size_t, N>;

// Calls f(Size<R>, Size<G>, r, g) over `rows` rows x `vecs` vectors of columns, in blocks of
// kRows x kGroup and smaller instantiations at the edges (r, g: the block's first row and
// first vector).
template <std::size_t R, class F>
inline void vector_groups(std::size_t r, std::size_t vecs, F& f) {
    std::size_t g = 0;
    for (; g + kGroup <= vecs; g += kGroup) f(Size<R>{}, Size<kGroup>{}, r, g);
    switch (vecs - g) {
        case 3: f(Size<R>{}, Size<3>{}, r, g); break;
        case 2: f(Size<R>{}, Size<2>{}, r, g); break;
        case 1: f(Size<R>{}, Size<1>{}, r, g); break;
        default: break;
    }
}

template <std::size_t R = kRows, class F>
inline void tile_blocks(std::size_t rows, std::size_t vecs, F& f) {
    static_assert(R >= 1);
    std::size_t r = 0;
    for (; r + R <= rows; r += R) vector_groups<R>(r, vecs, f);
    if constexpr (R > 1)
        if (r < rows) {   // the last rows: the largest instantiation that fits, and so on
            auto rest = [&f, r](auto R1, auto G1, std::size_t rr, std::size_t g) { f(R1, G1, r + rr, g); };
            tile_blocks<R - 1>(rows - r, vecs, rest);
        }
}

// C (rows x n, ld ldc) = alpha A Bt for A (rows x d, ld d) and Bt (d x n, ld ldb): the score
// kernel over the whole vectors of columns, the last n % W columns as scalar FMA chains in the
// same k order (what a row of C holds never depends on where it sits in a block).
template <class T>
inline void times_transposed(const T* A, std::size_t rows, std::size_t d, const T* Bt, std::size_t ldb,
                             std::size_t n, T alpha, T* C, std::size_t ldc) {
    constexpr std::size_t W = lanes<T>();
    auto k = [&](auto R, auto G, std::size_t r, std::size_t g) {
        score_panel<T, R, G>(A + r * d, d, Bt + g * W, ldb, alpha, C + r * ldc + g * W, ldc);
    };
    tile_blocks(rows, n / W, k);
    for (std::size_t c = n / W * W; c < n; ++c)
        for (std::size_t r = 0; r < rows; ++r) {
            T acc = T(0);
            for (std::size_t i = 0; i < d; ++i) acc = std::fma(A[r * d + i], Bt[i * ldb + c], acc);
            C[r * ldc + c] = acc * alpha;
        }
}

// O (rows x c, ld ldo) = (add ? O : 0) + P V for P (rows x n; P[r][j] at P[r * pr + j * pj])
// and V (n x c, ld ldv): the value kernel over the whole vectors of columns, the last c % W
// columns as scalar FMA chains in the same j order; both in partial sums of kChunk terms.
template <class T>
inline void times(const T* P, std::size_t rows, std::size_t pr, std::size_t pj, std::size_t n, const T* V,
                  std::size_t ldv, std::size_t c, T* O, std::size_t ldo, bool add) {
    constexpr std::size_t W = lanes<T>();
    std::size_t j0 = 0;
    do {   // partial sums of kChunk terms, added to O in j order (n = 0: O = add ? O : 0)
        const std::size_t nj = std::min(kChunk, n - j0);
        const bool first_add = add || j0 > 0;
        const T* Pj = P + j0 * pj;
        const T* Vj = V + j0 * ldv;
        auto k = [&](auto R, auto G, std::size_t r, std::size_t g) {
            value_panel<T, R, G>(Pj + r * pr, pr, pj, nj, Vj + g * W, ldv, O + r * ldo + g * W, ldo, first_add);
        };
        tile_blocks(rows, c / W, k);
        for (std::size_t col = c / W * W; col < c; ++col)
            for (std::size_t r = 0; r < rows; ++r) {
                T acc = T(0);
                for (std::size_t j = 0; j < nj; ++j) acc = std::fma(Pj[r * pr + j * pj], Vj[j * ldv + col], acc);
                O[r * ldo + col] = first_add ? O[r * ldo + col] + acc : acc;
            }
        j0 += kChunk;
    } while (j0 < n);
}

}  // namespace favor::tiles
