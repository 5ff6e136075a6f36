// Exact softmax attention in working precision (docs/design.md section 2.1): query rows in
// blocks of exact_query_rows(L) over key tiles of exact_tile_keys with a running row max (online
// softmax), both products in the register-blocked tile kernels (tile_kernels.hpp).
#include "favor/attention/exact_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "core/tile_kernels.hpp"
#include "core/transpose.hpp"

namespace favor {

namespace {
static_assert(exact_tile_keys(sizeof(float)) % tiles::panel_keys<float>() == 0 &&
              exact_tile_keys(sizeof(double)) % tiles::panel_keys<double>() == 0);

// The operands in the layouts the tile kernels read (tile_kernels.hpp): K^T (d x Lkp) with the
// keys padded by zeros to whole score panels, V with its columns padded to whole vectors
// (V itself when dv already is), and the output accumulators as wide.
template <class T>
struct ExactOperands {
    std::size_t Lkp, dvp;
    std::vector<T> Kt, Vpad;
    const T* Vp;
    ExactOperands(MatView<T> K, MatView<T> V)
        : Lkp(round_up(K.shape(0), tiles::panel_keys<T>())), dvp(round_up(V.shape(1), tiles::lanes<T>())) {
        const std::size_t Lk = K.shape(0), d = K.shape(1), dv = V.shape(1);
        Kt.assign(d * Lkp, T(0));
        tiles::transpose(K.data(), Lk, d, d, Kt.data(), Lkp);
        Vp = V.data();
        if (dvp != dv) {
            Vpad.assign(Lk * dvp, T(0));
            for (std::size_t j = 0; j < Lk; ++j) std::copy(V.data() + j * dv, V.data() + (j + 1) * dv, Vpad.data() + j * dvp);
            Vp = Vpad.data();
        }
    }
};

// The online softmax of one score tile S (rows x kt, keys c0 .. c0 + nc - 1) for a block of
// rows at key positions pos(i): each row's running max and sum, its accumulator rescaled when
// the max grows, and the scores of keys it does not see set to 0.
template <class T, class Pos>
void online_tile(T* S, std::size_t rows, std::size_t kt, std::size_t c0, std::size_t nc, bool causal, Pos pos,
                 T* row_max, double* row_sum, T* acc, std::size_t dvp) {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    for (std::size_t i = 0; i < rows; ++i) {
        T* s = S + i * kt;
        const std::size_t gi = pos(i);
        // Keys c0 .. c0+n-1 of this tile are visible to row gi.
        const std::size_t n = !causal ? nc : (gi + 1 <= c0 ? 0 : std::min(nc, gi + 1 - c0));
        if (n > 0) {
            const T mt = max_of(s, n);
            if (mt > row_max[i]) {   // new running max: rescale what came before
                if (row_max[i] != neg_inf) {
                    const T f = std::exp(row_max[i] - mt);
                    row_sum[i] *= double(f);
                    scale_in_place(acc + i * dvp, dvp, f);
                }
                row_max[i] = mt;
            }
            row_sum[i] += exp_shifted_sum(s, n, row_max[i]);
        }
        std::fill(s + n, s + nc, T(0));
    }
}

}  // namespace

// Row blocks of exact_query_rows(L) over key tiles with a running row max (online softmax: the
// rescaling is exact up to rounding). Both products run in the register-blocked tile kernels
// on operands laid out once per call (no BLAS: it packs K, V and every score tile anew per
// call; docs/speed.md).
namespace {
// lse (L entries, or null): each row's log-sum-exp of its scores, max + log(sum) in double,
// written beside the output and changing nothing in it.
template <class T>
void exact_forward(MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads, Mat<T>& out,
                   double* lse) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1);
    if (out.shape(0) != L || out.shape(1) != dv) out = Mat<T>::from_shape({L, dv});   // else reused: every entry is written
    const ExactOperands<T> op(K, V);
    // Key tiles of exact_tile_keys (fewer keys: one tile of them all, the same partition).
    const std::size_t rb = exact_query_rows(L), kt = std::min(exact_tile_keys(sizeof(T)), op.Lkp), dvp = op.dvp;
    const std::size_t nblocks = (L + rb - 1) / rb;
    const T alpha = T(1.0 / std::sqrt(double(d)));
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const double work = 2.0 * double(L) * double(Lk) * double(d + dv) * (causal ? 0.5 : 1.0);
    parallel_for(nblocks, threads_for(work, threads), [&](std::size_t blk) {   // small L: no pool wake-up
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        // Causal rows r0..r0+rows-1 only see keys < r0 + rows.
        const std::size_t cols = causal ? std::min(Lk, r0 + rows) : Lk;
        // The block's scores (512 kB), sums and maxima in storage the running thread keeps: a
        // fresh buffer per block was mapped and zeroed by the kernel each time under favor's
        // fixed malloc thresholds (use_predictable_allocator), ~128 page faults a block.
        thread_local std::vector<T> S_kept, acc_kept, max_kept;
        thread_local std::vector<double> sum_kept;
        T* const S = grown(S_kept, rows * kt);
        T* const acc = grown(acc_kept, rows * dvp);
        T* const row_max = grown(max_kept, rows);
        double* const row_sum = grown(sum_kept, rows);
        std::fill(acc, acc + rows * dvp, T(0));
        std::fill(row_max, row_max + rows, neg_inf);
        std::fill(row_sum, row_sum + rows, 0.0);
        for (std::size_t c0 = 0; c0 < cols; c0 += kt) {
            const std::size_t nc = std::min(kt, cols - c0);
            tiles::times_transposed(Q.data() + r0 * d, rows, d, op.Kt.data() + c0, op.Lkp, round_up(nc, tiles::panel_keys<T>()),
                                    alpha, S, kt);
            online_tile(S, rows, kt, c0, nc, causal, [r0](std::size_t i) { return r0 + i; }, row_max, row_sum, acc, dvp);
            tiles::times(S, rows, kt, 1, nc, op.Vp + c0 * dvp, dvp, dvp, acc, dvp, true);
        }
        for (std::size_t i = 0; i < rows; ++i) {
            const T inv = T(1.0 / row_sum[i]);
            for (std::size_t c = 0; c < dv; ++c) out(r0 + i, c) = acc[i * dvp + c] * inv;
            if (lse) lse[r0 + i] = double(row_max[i]) + std::log(row_sum[i]);
        }
    });
}

}  // namespace

template <class T>
Mat<T> exact_attention(MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads) {
    Mat<T> out;
    exact_forward(Q, K, V, causal, threads, out, nullptr);
    return out;
}

template <class T>
void exact_attention_into(MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out, bool causal, int threads) {
    exact_forward(Q, K, V, causal, threads, out, nullptr);
}

template <class T>
ExactForward<T> exact_attention_saved(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal, int threads) {
    ExactForward<T> f;
    f.lse.resize(Q.shape(0));
    exact_forward(Q, K, V, causal, threads, f.out, f.lse.data());
    return f;
}

// The rows at `rows` in float64: per block of kExactQueryRows sampled rows, each key tile
// widened into the tile kernels' layouts as it is used (no whole K^T copy: O(block x tile)
// memory beyond the output, so float32 inputs at L = 2^20 stay float32).
template <class T>
Mat<double> exact_attention_rows(const Mat<T>& Q, const std::vector<std::size_t>& rows, const Mat<T>& K,
                                 const Mat<T>& V, bool causal, int threads) {
    const std::size_t N = rows.size(), d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1);
    const std::size_t rb = kExactQueryRows, kt = exact_tile_keys(sizeof(double)), dvp = round_up(dv, tiles::lanes<double>());
    Mat<double> out = Mat<double>::from_shape({N, dv});
    const double alpha = 1.0 / std::sqrt(double(d));
    parallel_for((N + rb - 1) / rb, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, nr = std::min(rb, N - r0);
        const std::size_t cols = causal ? std::min(Lk, rows[r0 + nr - 1] + 1) : Lk;
        std::vector<double> q(nr * d), Kt(d * kt), Vt(kt * dvp, 0.0), S(nr * kt), acc(nr * dvp, 0.0),
            row_max(nr, -std::numeric_limits<double>::infinity()), row_sum(nr, 0.0);
        for (std::size_t i = 0; i < nr; ++i)
            for (std::size_t k = 0; k < d; ++k) q[i * d + k] = double(Q(rows[r0 + i], k));
        for (std::size_t c0 = 0; c0 < cols; c0 += kt) {
            const std::size_t nc = std::min(kt, cols - c0), ncp = round_up(nc, tiles::panel_keys<double>());
            for (std::size_t k = 0; k < d; ++k) {
                for (std::size_t j = 0; j < nc; ++j) Kt[k * kt + j] = double(K(c0 + j, k));
                std::fill(Kt.begin() + std::ptrdiff_t(k * kt + nc), Kt.begin() + std::ptrdiff_t(k * kt + ncp), 0.0);
            }
            for (std::size_t j = 0; j < nc; ++j)
                for (std::size_t c = 0; c < dv; ++c) Vt[j * dvp + c] = double(V(c0 + j, c));
            tiles::times_transposed(q.data(), nr, d, Kt.data(), kt, ncp, alpha, S.data(), kt);
            online_tile(S.data(), nr, kt, c0, nc, causal, [&](std::size_t i) { return rows[r0 + i]; }, row_max.data(),
                        row_sum.data(), acc.data(), dvp);
            tiles::times(S.data(), nr, kt, 1, nc, Vt.data(), dvp, dvp, acc.data(), dvp, true);
        }
        for (std::size_t i = 0; i < nr; ++i)
            for (std::size_t c = 0; c < dv; ++c) out(r0 + i, c) = acc[i * dvp + c] / row_sum[i];
    });
    return out;
}

template Mat<double> exact_attention_rows<float>(const Mat<float>&, const std::vector<std::size_t>&, const Mat<float>&,
                                                 const Mat<float>&, bool, int);
template Mat<double> exact_attention_rows<double>(const Mat<double>&, const std::vector<std::size_t>&,
                                                  const Mat<double>&, const Mat<double>&, bool, int);
template Mat<float> exact_attention<float>(MatView<float>, MatView<float>, MatView<float>, bool, int);
template Mat<double> exact_attention<double>(MatView<double>, MatView<double>, MatView<double>, bool, int);
template void exact_attention_into<float>(MatView<float>, MatView<float>, MatView<float>, Mat<float>&, bool, int);
template void exact_attention_into<double>(MatView<double>, MatView<double>, MatView<double>, Mat<double>&, bool, int);
template ExactForward<float> exact_attention_saved<float>(const Mat<float>&, const Mat<float>&, const Mat<float>&, bool,
                                                           int);
template ExactForward<double> exact_attention_saved<double>(const Mat<double>&, const Mat<double>&, const Mat<double>&,
                                                            bool, int);

}  // namespace favor
