// The sampled rows' exact reference of a float run (docs/design.md 3.1): float32 products in
// the tile kernels (tile_kernels.hpp) inside each key tile, the online softmax across tiles
// (running max, row sums, output rows) in float64.
//
// Error bound (first order in u = 2^-24; exact_rows_f32_bound). Row q, keys k_j, values v_j
// (float64, then rounded to float32: relative error <= u each), alpha = 1/sqrt(d) (rounded:
// u), x_j = alpha q.k_j the float64 score, a_j = alpha sum_k |q_k k_jk| <= A (so |x_j| <= A).
//  1. Scores: one FMA chain of d terms (d roundings), times alpha (one rounding): with the
//     input roundings |s_j - x_j| <= (d + 4) u a_j.
//  2. Weights: p_j = exp(fl(s_j - m_t)), m_t the tile's max (one of the s_j, so the shift
//     cancels between numerator and denominator); the subtraction rounds by u |s_j - m_t| <=
//     2 u A, vexp is within 2 ulp (4 u, vmath.hpp); exp(m_t - M) and the float64 fold add
//     O(2^-53) per tile. So each key's weight is exp(x_j - M)(1 + theta_j) with
//     |theta_j| <= theta = ((d + 6) A + 4) u + 4 * 2^-53 * tiles.
//  3. A tile's row sum: lane sums of at most kt / W float32 terms (exp_shifted_sum), then
//     float64: relative eta <= (kt / W) u (positive terms).
//  4. A tile's P V: FMA chains of kChunk terms, kt / kChunk partials added in float32:
//     |error| <= (kChunk + kt / kChunk) u sum_j p_j |v_jc|; with v's rounding, one u more.
//  5. out_c - o_c = [sum_j w_j theta_j (v_jc - o_c) + E_c - o_c sum_j w_j eta_j] / D (w the
//     exact weights, sum_j w_j (v_jc - o_c) = 0, D >= (1 - theta)(1 - eta) sum_j w_j). With
//     mu_c = sum_j w_j |v_jc| / sum_j w_j (so |o_c| <= mu_c, sum_j w_j |v_jc - o_c| <= 2 mu_c
//     sum_j w_j): |out_c - o_c| <= [2 theta + kChunk + kt / kChunk + 1 + kt / W] u mu_c, to
//     first order; second-order terms are below 1e-3 of it while theta, eta < 1e-4 (factor
//     1.001). Weights that underflow (s_j < m_t - 87 in float32, below 2^-126) change the
//     output by at most Lk 2^-126 max|v|: nothing beside the terms above.
// Typical: d = 64, |q|, |k| ~ 16 (entries of scale 2), A ~ 32: about 4600 u = 2.7e-4 mu; d =
// 16, scale 1, A ~ 5: about 400 u = 2.4e-5 mu. Worst cases (rounding errors all of one sign);
// tests/attention/test_exact_rows.cpp measures 1e-3 to 1e-2 of them.
#include "favor/attention/exact_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "favor/attention/attention_blocks.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "core/tile_kernels.hpp"
#include "core/transpose.hpp"

namespace favor {

namespace {
constexpr std::size_t kRowBlock = kExactQueryRows;         // sampled rows per block
constexpr std::size_t kTileKeys = exact_tile_keys(sizeof(float));   // keys per tile (512)
static_assert(kTileKeys % tiles::panel_keys<float>() == 0);

// A block's float64 state per row: the running max M, the row sum of exp(s - M) and the
// output accumulator (dvp wide), over the key tiles folded so far.
struct Running {
    std::vector<double> max, sum, acc;
    std::size_t dvp;
    Running(std::size_t rows, std::size_t dvp_)
        : max(rows, -std::numeric_limits<double>::infinity()), sum(rows, 0.0), acc(rows * dvp_, 0.0), dvp(dvp_) {}
    // Folds row r's tile partials (max mt, sum lt, output o) in: rescaled to the larger max.
    void fold(std::size_t r, double mt, double lt, const float* o) {
        const double M = std::max(max[r], mt), a = std::exp(max[r] - M), b = std::exp(mt - M);
        double* y = acc.data() + r * dvp;
        for (std::size_t c = 0; c < dvp; ++c) y[c] = y[c] * a + double(o[c]) * b;
        sum[r] = sum[r] * a + lt * b;
        max[r] = M;
    }
};

// Keys c0 .. c0 + nc - 1 of K in the score kernel's layout: Kt (d x kt), keys contiguous,
// zero-padded to whole score panels (ncp keys).
void lay_out_keys(const Mat<float>& K, std::size_t c0, std::size_t nc, std::size_t ncp, std::vector<float>& Kt) {
    const std::size_t d = K.shape(1);
    // (register blocks of 8 x 8 / 16 x 16: the plain loop's stores, 2 kB apart, were half of
    // this function's time at d = 64)
    tiles::transpose(K.data() + c0 * d, nc, d, d, Kt.data(), kTileKeys);
    for (std::size_t k = 0; k < d; ++k)
        std::fill(Kt.begin() + std::ptrdiff_t(k * kTileKeys + nc), Kt.begin() + std::ptrdiff_t(k * kTileKeys + ncp), 0.0f);
}

// The value rows c0 .. c0 + nc - 1 with dvp columns: V's own rows when dv = dvp, else copied
// into Vt zero-padded.
const float* value_rows(const Mat<float>& V, std::size_t c0, std::size_t nc, std::size_t dvp, std::vector<float>& Vt) {
    const std::size_t dv = V.shape(1);
    if (dv == dvp) return V.data() + c0 * dv;
    for (std::size_t j = 0; j < nc; ++j) std::copy(V.data() + (c0 + j) * dv, V.data() + (c0 + j + 1) * dv, Vt.data() + j * dvp);
    return Vt.data();
}

// The sampled rows r0 .. r0 + nr - 1 of `rows` against every key tile they see, into out.
void row_block(const Mat<float>& Q, const std::vector<std::size_t>& rows, std::size_t r0, std::size_t nr,
               const Mat<float>& K, const Mat<float>& V, bool causal, Mat<double>& out) {
    const std::size_t d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1), dvp = round_up(dv, tiles::lanes<float>());
    const std::size_t* pos = rows.data() + r0;
    const std::size_t cols = causal ? std::min(Lk, pos[nr - 1] + 1) : Lk;
    const float alpha = float(1.0 / std::sqrt(double(d)));
    std::vector<float> q(nr * d), Kt(d * kTileKeys), Vt(dv == dvp ? 0 : kTileKeys * dvp, 0.0f), S(nr * kTileKeys),
        O(nr * dvp), mt(nr);
    std::vector<double> lt(nr);
    for (std::size_t i = 0; i < nr; ++i) std::copy(Q.data() + pos[i] * d, Q.data() + (pos[i] + 1) * d, q.data() + i * d);
    Running run(nr, dvp);
    std::size_t lo = 0;   // causal: rows before lo see no key of this tile or a later one
    for (std::size_t c0 = 0; c0 < cols; c0 += kTileKeys) {
        const std::size_t nc = std::min(kTileKeys, cols - c0), ncp = round_up(nc, tiles::panel_keys<float>());
        while (causal && pos[lo] < c0) ++lo;
        const std::size_t m = nr - lo;
        lay_out_keys(K, c0, nc, ncp, Kt);
        tiles::times_transposed(q.data() + lo * d, m, d, Kt.data(), kTileKeys, ncp, alpha, S.data(), kTileKeys);
        for (std::size_t i = 0; i < m; ++i) {   // the tile's softmax numerators, float32
            float* s = S.data() + i * kTileKeys;
            const std::size_t n = causal ? std::min(nc, pos[lo + i] + 1 - c0) : nc;
            mt[i] = max_of(s, n);
            lt[i] = exp_shifted_sum(s, n, mt[i]);
            std::fill(s + n, s + nc, 0.0f);
        }
        tiles::times(S.data(), m, kTileKeys, 1, nc, value_rows(V, c0, nc, dvp, Vt), dvp, dvp, O.data(), dvp, false);
        for (std::size_t i = 0; i < m; ++i) run.fold(lo + i, double(mt[i]), lt[i], O.data() + i * dvp);
    }
    for (std::size_t i = 0; i < nr; ++i)
        for (std::size_t c = 0; c < dv; ++c) out(r0 + i, c) = run.acc[i * dvp + c] / run.sum[i];
}
}  // namespace

Mat<double> exact_attention_rows_f32(const Mat<float>& Q, const std::vector<std::size_t>& rows, const Mat<float>& K,
                                     const Mat<float>& V, bool causal, int threads) {
    const std::size_t N = rows.size();
    Mat<double> out = Mat<double>::from_shape({N, V.shape(1)});
    parallel_for((N + kRowBlock - 1) / kRowBlock, threads, [&](std::size_t b) {
        row_block(Q, rows, b * kRowBlock, std::min(kRowBlock, N - b * kRowBlock), K, V, causal, out);
    });
    return out;
}

double exact_rows_f32_bound(std::size_t d, double A, std::size_t Lk) {
    const double u = std::ldexp(1.0, -24), tiles = std::ceil(double(Lk) / double(kTileKeys));
    const double theta = (double(d + 6) * A + 4.0) * u + 4.0 * std::ldexp(1.0, -53) * tiles;
    const double sums = double(tiles::kChunk + kTileKeys / tiles::kChunk + 1 + kTileKeys / tiles::lanes<float>());
    return 1.001 * (2.0 * theta + sums * u);
}

double exact_rows_thread_bytes(std::size_t d, std::size_t dv, std::size_t elem) {
    const double r = double(kExactQueryRows), kt = double(exact_tile_keys(elem)), D = double(d), Dv = double(dv);
    // q rows, K^T tile, V tile, score tile, the tile's output (float32) or the accumulator.
    const double tile = double(elem) * (r * D + D * kt + kt * Dv + r * kt + r * Dv);
    return tile + (elem == 4 ? 8.0 * r * (Dv + 2.0) : 0.0);   // float32: the float64 accumulators too
}

}  // namespace favor
