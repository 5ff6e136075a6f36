// Linear attention from given feature matrices (docs/design.md section 2.2): the key sums
// phiK^T [V, 1] per block of kLinearBlockRows rows, each relative to its largest key log
// scale and added in block order, the query products per block of kLinearQueryRows rows, and
// the entry that hands causal runs to the prefix sums (causal_linear.cpp).
#include "favor/attention/linear_attention.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>
#include <vector>

#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "attention/linear_sums.hpp"
#include "core/tile_kernels.hpp"

namespace favor {

namespace {
// acc (F x (dv+1)) = phiK_b^T [V_b, 1] for the `rows` rows at phiK (ld F) and V (ld dv),
// ld of acc: dv + 1. With `c` (one factor per row, or null for all 1), row j counts c[j] times:
// phiK_b^T diag(c) [V_b, 1], the factors folded into a scaled copy of V_b.
template <class T>
void kv_block(const T* phiK, const T* V, std::size_t rows, std::size_t F, std::size_t dv, T* acc,
              const T* c = nullptr) {
    const std::size_t e = dv + 1;
    if (c) {
        thread_local std::vector<T> kept;
        T* const Vc = grown(kept, rows * dv);
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t k = 0; k < dv; ++k) Vc[i * dv + k] = c[i] * V[i * dv + k];
        V = Vc;
    }
    // phiK_b^T V_b in the value tile kernel reading phiK_b transposed in place (no packing).
    tiles::times(phiK, F, 1, F, rows, V, dv, dv, acc, e, false);
    // Column dv: the column sums of phiK_b (row by row, so in a fixed order, vectorised over F).
    std::vector<T> z(F, T(0));
    for (std::size_t i = 0; i < rows; ++i) {
        const T* p = phiK + i * F;
        const T ci = c ? c[i] : T(1);
        if (c)
            for (std::size_t f = 0; f < F; ++f) z[f] += ci * p[f];
        else
            for (std::size_t f = 0; f < F; ++f) z[f] += p[f];
    }
    for (std::size_t f = 0; f < F; ++f) acc[f * e + dv] = z[f];   // acc is written, never read
}

// Largest of lk[0 .. rows), 0 without log scales.
double max_log(const double* lk, std::size_t rows) {
    return lk && rows ? max_of(lk, rows) : 0.0;
}

const double* log_or_null(const std::vector<double>& lk, std::size_t rows) {
    return lk.empty() ? nullptr : (assert(lk.size() == rows), lk.data());
}
}  // namespace

template <class T>
void query_rows(const T* phi, std::size_t rows, std::size_t F, const T* KV1, std::size_t dv, T* out, bool normalise,
                T* den) {
    tiles::times(phi, rows, F, 1, F, KV1, dv + 1, dv, out, dv, false);
    if (!normalise) return;
    std::vector<T> z(F);   // KV1's last column, contiguous for the dots
    for (std::size_t f = 0; f < F; ++f) z[f] = KV1[f * (dv + 1) + dv];
    for (std::size_t i = 0; i < rows; ++i) {
        const T D = dot_lanes(phi + i * F, z.data(), F);
        if (den) den[i] = D;
        scale_in_place(out + i * dv, dv, T(1) / D);
    }
}

template <class T>
double add_parts(const T* parts, const std::vector<double>& shift, std::size_t size, T* out, int threads) {
    const std::size_t nb = shift.size(), chunk = 2048;
    const double smax = nb ? max_of(shift.data(), nb) : 0.0;
    std::vector<T> c(nb);
    for (std::size_t b = 0; b < nb; ++b) c[b] = T(std::exp(shift[b] - smax));
    parallel_for((size + chunk - 1) / chunk, threads_for(2.0 * double(nb * size), threads), [&](std::size_t ch) {
        const std::size_t k0 = ch * chunk, k1 = std::min(size, k0 + chunk);
        std::fill(out + k0, out + k1, T(0));
        for (std::size_t b = 0; b < nb; ++b) {
            const T cb = c[b];
            const T* p = parts + b * size;
            for (std::size_t k = k0; k < k1; ++k) out[k] += cb * p[k];
        }
    });
    return smax;
}

template <class T>
double own_kv(const T* phiK, const double* lk, const T* V, std::size_t rows, std::size_t F, std::size_t dv, T* acc) {
    const double shift = max_log(lk, rows);
    thread_local std::vector<T> c;
    const bool scaled = row_factors(lk, 0, rows, shift, c);
    kv_block(phiK, V, rows, F, dv, acc, scaled ? c.data() : nullptr);
    return shift;
}


template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, const std::vector<double>& key_log_scale, MatView<T> V, int threads) {
    const std::size_t Lk = phiK.shape(0), F = phiK.shape(1), dv = V.shape(1), e = dv + 1;
    const double* lk = log_or_null(key_log_scale, Lk);
    const std::size_t nblocks = std::max<std::size_t>((Lk + kLinearBlockRows - 1) / kLinearBlockRows, 1);
    // Block b with its own shift M_b (the largest key log scale in it; rows scaled by
    // exp(lk_j - M_b) <= 1), then the blocks rescaled by exp(M_b - M) <= 1 to the largest.
    // The blocks' parts in storage the calling thread keeps (no fresh buffer per block or call).
    thread_local std::vector<T> kept;
    T* const parts = grown(kept, nblocks * F * e);
    std::vector<double> shift(nblocks, 0.0);
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * kLinearBlockRows, rows = std::min(kLinearBlockRows, Lk - std::min(Lk, r0));
        T* const part = parts + blk * F * e;
        std::fill(part, part + F * e, T(0));
        shift[blk] = own_kv(phiK.data() + r0 * F, lk ? lk + r0 : nullptr, V.data() + r0 * dv, rows, F, dv, part);
    });
    Mat<T> KV = Mat<T>::from_shape({F, e});
    add_parts(parts, shift, F * e, KV.data(), threads);
    return KV;
}

template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, MatView<T> V, int threads) {
    return linear_attention_kv(phiK, {}, V, threads);
}

template <class T>
Mat<T> linear_attention_apply(const Mat<T>& phiQ, const Mat<T>& KV1, int threads, bool normalise) {
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), e = KV1.shape(1), dv = e - 1;
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const std::size_t rb = kLinearQueryRows, nblocks = (L + rb - 1) / rb;
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        query_rows(phiQ.data() + r0 * F, rows, F, KV1.data(), dv, out.data() + r0 * dv, normalise);
    });
    return out;
}

template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, const std::vector<double>& key_log_scale,
                        MatView<T> V, bool causal, int threads, bool normalise) {
    if (!causal)
        return linear_attention_apply(phiQ, linear_attention_kv(phiK, key_log_scale, V, threads), threads, normalise);
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), dv = V.shape(1);
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const double* lk = log_or_null(key_log_scale, L);
    ChunkFeatures<T> features;
    features.keys = [&](std::size_t r0, std::size_t) {
        return std::make_pair(phiK.data() + r0 * F, lk ? lk + r0 : nullptr);
    };
    features.queries = [&](std::size_t r0, std::size_t) { return phiQ.data() + r0 * F; };
    causal_linear(V.data(), L, F, dv, out.data(), threads, normalise, features);
    return out;
}

template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, MatView<T> V, bool causal, int threads,
                        bool normalise) {
    return linear_attention(phiQ, phiK, {}, V, causal, threads, normalise);
}

#define FAVOR_INSTANTIATE(T)                                                                        \
    template void query_rows<T>(const T*, std::size_t, std::size_t, const T*, std::size_t, T*, bool, T*); \
    template double add_parts<T>(const T*, const std::vector<double>&, std::size_t, T*, int);  \
    template double own_kv<T>(const T*, const double*, const T*, std::size_t, std::size_t, std::size_t, T*); \
    template Mat<T> linear_attention<T>(const Mat<T>&, const Mat<T>&, MatView<T>, bool, int, bool); \
    template Mat<T> linear_attention<T>(const Mat<T>&, const Mat<T>&, const std::vector<double>&,    \
                                        MatView<T>, bool, int, bool);                             \
    template Mat<T> linear_attention_kv<T>(const Mat<T>&, MatView<T>, int);                       \
    template Mat<T> linear_attention_kv<T>(const Mat<T>&, const std::vector<double>&, MatView<T>, int); \
    template Mat<T> linear_attention_apply<T>(const Mat<T>&, const Mat<T>&, int, bool);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
