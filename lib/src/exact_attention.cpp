// Exact softmax attention in working precision (docs/design.md section 2.1): query rows in
// blocks of kExactQueryRows over key tiles of exact_tile_keys with a running row max (online
// softmax), both products in the register-blocked tile kernels (tile_kernels.hpp).
#include "favor/exact_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "favor/parallel.hpp"
#include "favor/vmath.hpp"
#include "tile_kernels.hpp"

namespace favor {

namespace {
static_assert(exact_tile_keys(sizeof(float)) % tiles::panel_keys<float>() == 0 &&
              exact_tile_keys(sizeof(double)) % tiles::panel_keys<double>() == 0);

constexpr std::size_t round_up(std::size_t n, std::size_t k) { return (n + k - 1) / k * k; }

// The operands in the layouts the tile kernels read (tile_kernels.hpp): K^T (d x Lkp) with the
// keys padded by zeros to whole score panels, V with its columns padded to whole vectors
// (V itself when dv already is), and the output accumulators as wide.
template <class T>
struct ExactOperands {
    std::size_t Lkp, dvp;
    std::vector<T> Kt, Vpad;
    const T* Vp;
    ExactOperands(const Mat<T>& K, const Mat<T>& V)
        : Lkp(round_up(K.shape(0), tiles::panel_keys<T>())), dvp(round_up(V.shape(1), tiles::lanes<T>())) {
        const std::size_t Lk = K.shape(0), d = K.shape(1), dv = V.shape(1);
        Kt.assign(d * Lkp, T(0));
        for (std::size_t j = 0; j < Lk; ++j)
            for (std::size_t k = 0; k < d; ++k) Kt[k * Lkp + j] = K(j, k);
        Vp = V.data();
        if (dvp != dv) {
            Vpad.assign(Lk * dvp, T(0));
            for (std::size_t j = 0; j < Lk; ++j) std::copy(V.data() + j * dv, V.data() + (j + 1) * dv, Vpad.data() + j * dvp);
            Vp = Vpad.data();
        }
    }
};

}  // namespace

// Row blocks of kExactQueryRows over key tiles with a running row max (online softmax: the
// rescaling is exact up to rounding). Both products run in the register-blocked tile kernels
// on operands laid out once per call (no BLAS: it packs K, V and every score tile anew per
// call; docs/speed.md).
template <class T>
Mat<T> exact_attention(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal, int threads) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1);
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const ExactOperands<T> op(K, V);
    const std::size_t rb = kExactQueryRows, kt = exact_tile_keys(sizeof(T)), dvp = op.dvp;
    const std::size_t nblocks = (L + rb - 1) / rb;
    const T alpha = T(1.0 / std::sqrt(double(d)));
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        // Causal rows r0..r0+rows-1 only see keys < r0 + rows.
        const std::size_t cols = causal ? std::min(Lk, r0 + rows) : Lk;
        std::vector<T> S(rows * kt), acc(rows * dvp, T(0)), row_max(rows, neg_inf);
        std::vector<double> row_sum(rows, 0.0);
        for (std::size_t c0 = 0; c0 < cols; c0 += kt) {
            const std::size_t nc = std::min(kt, cols - c0);
            tiles::times_transposed(Q.data() + r0 * d, rows, d, op.Kt.data() + c0, op.Lkp, round_up(nc, tiles::panel_keys<T>()),
                                    alpha, S.data(), kt);
            for (std::size_t i = 0; i < rows; ++i) {
                T* s = S.data() + i * kt;
                const std::size_t gi = r0 + i;
                // Keys c0 .. c0+n-1 of this tile are visible to row gi.
                const std::size_t n = !causal ? nc : (gi + 1 <= c0 ? 0 : std::min(nc, gi + 1 - c0));
                if (n > 0) {
                    const T mt = max_of(s, n);
                    if (mt > row_max[i]) {   // new running max: rescale what came before
                        if (row_max[i] != neg_inf) {
                            const T f = std::exp(row_max[i] - mt);
                            row_sum[i] *= double(f);
                            scale_in_place(acc.data() + i * dvp, dvp, f);
                        }
                        row_max[i] = mt;
                    }
                    row_sum[i] += exp_shifted_sum(s, n, row_max[i]);
                }
                std::fill(s + n, s + nc, T(0));
            }
            tiles::times(S.data(), rows, kt, 1, nc, op.Vp + c0 * dvp, dvp, dvp, acc.data(), dvp, true);
        }
        for (std::size_t i = 0; i < rows; ++i) {
            const T inv = T(1.0 / row_sum[i]);
            for (std::size_t c = 0; c < dv; ++c) out(r0 + i, c) = acc[i * dvp + c] * inv;
        }
    });
    return out;
}

template Mat<float> exact_attention<float>(const Mat<float>&, const Mat<float>&, const Mat<float>&, bool, int);
template Mat<double> exact_attention<double>(const Mat<double>&, const Mat<double>&, const Mat<double>&, bool, int);

}  // namespace favor
