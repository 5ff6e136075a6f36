#pragma once
// The key sums of linear attention that its non-causal pass (linear_attention.cpp), its causal
// prefix sums (causal_linear.cpp) and the fused forward (favor_forward.cpp) share
// (docs/design.md section 2.2): a block's own sum phiK_b^T [V_b, 1] relative to its largest
// key log scale, and the blocked causal pass over chunks of kLinearBlockRows rows.
#include <cmath>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "favor/attention/attention_blocks.hpp"

namespace favor {

// The factors exp(lk[r0 + j] - shift), j < rows, into c, or false (c unused) when every one
// is 1 (no key log scales, or all equal to the shift).
template <class T>
bool row_factors(const double* lk, std::size_t r0, std::size_t rows, double shift, std::vector<T>& c) {
    if (!lk) return false;
    bool any = false;
    for (std::size_t j = 0; j < rows; ++j) any |= lk[r0 + j] != shift;
    if (!any) return false;
    c.resize(rows);
    for (std::size_t j = 0; j < rows; ++j) c[j] = T(std::exp(lk[r0 + j] - shift));
    return true;
}

// acc (F x (dv+1)) = phiK_b^T diag(exp(lk_j - M_b)) [V_b, 1] for `rows` rows of keys phiK
// (rows x F) with log scales lk (row 0 first; null: all 0) and values V (rows x dv), relative
// to their largest log scale M_b, which it returns (0 without log scales): a block's own sum,
// every factor <= 1.
template <class T>
double own_kv(const T* phiK, const double* lk, const T* V, std::size_t rows, std::size_t F, std::size_t dv, T* acc);

// The query side of non-causal linear attention for `rows` query rows phi (rows x F):
// out (rows x dv) = phi KV1[:, :dv], each row divided by its denominator phi_i . KV1[:, dv]
// when `normalise` (the denominators into den when given). The tile kernel for the product, a
// lane-order dot per row while the row is in cache: the fused forward and
// linear_attention_apply make the same bits.
template <class T>
void query_rows(const T* phi, std::size_t rows, std::size_t F, const T* KV1, std::size_t dv, T* out, bool normalise,
                T* den = nullptr);

// out (size entries) = sum_b exp(shift_b - M) parts_b over the blocks b < shift.size() (parts_b:
// `size` entries at parts + b size), M = max_b shift_b, which it returns: the blocks' own sums
// rescaled to the largest shift and added in block order, every entry in that order whatever
// the threads (the entries split over them in fixed chunks).
template <class T>
double add_parts(const T* parts, const std::vector<double>& shift, std::size_t size, T* out, int threads);

// Where causal_linear reads the features of a chunk of rows [r0, r0 + rows): the caller can
// keep them all (linear_attention) or make them per chunk (favor_forward). A chunk's pointers
// are used until the same thread asks for the next chunk's.
template <class T>
struct ChunkFeatures {
    // The key features (rows x F, row-major) and their log scales (rows, or null for all 0).
    std::function<std::pair<const T*, const double*>(std::size_t r0, std::size_t rows)> keys;
    // The query features (rows x F, row-major).
    std::function<const T*(std::size_t r0, std::size_t rows)> queries;
};

// Causal linear attention: out (L x dv) from V (L x dv) and the features of chunks of
// kLinearBlockRows rows, normalised by the last column of the prefix sums or not
// (`normalise`); details at its definition (causal_linear.cpp). The numbers do not depend on
// `threads`.
template <class T>
void causal_linear(const T* V, std::size_t L, std::size_t F, std::size_t dv, T* out, int threads, bool normalise,
                   const ChunkFeatures<T>& features);

}  // namespace favor
