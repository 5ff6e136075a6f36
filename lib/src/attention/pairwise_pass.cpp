// The streamed pairwise pass (docs/design.md section 3): the metrics over all pairs (i, j) of
// exact attention A against the estimator's A_hat (attention_mse, attention_tv, attention_kl,
// negative_fraction) and of SM against phi(x).phi(y) (kernel_mse, kernel_mse_theory), made
// over query blocks and key tiles whose features are made when needed.
#include "favor/attention/pairwise_pass.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/blas.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"

namespace favor {

FeatureMap::PairMse kernel_theory(const FeatureMapPtr& f, const Mat<double>& X, const Mat<double>& Y,
                                  std::size_t m) {
    return f->pair_mse_rows(X, Y, m);
}

namespace {
using B = xsimd::batch<double>;
using BB = xsimd::batch_bool<double>;
constexpr std::size_t kLanes = B::size;
// Keys per tile and rows per sum: the feature maps' block, so a tile's features are the same
// block calls as compute_features makes (feature_rows). Query blocks hold several of them
// (pairwise_query_rows, attention_blocks.hpp).
constexpr std::size_t kRows = feature_block_rows();
static_assert(pairwise_query_rows(0) % kRows == 0 && pairwise_query_rows(std::size_t(1) << 30) % kRows == 0);

// Keys of tile [t0, t0 + nt) that row gi sees (causal: j <= gi).
std::size_t visible(bool causal, std::size_t gi, std::size_t t0, std::size_t nt) {
    if (!causal) return nt;
    return gi + 1 <= t0 ? 0 : std::min(nt, gi + 1 - t0);
}

using BlockSums = PairwiseSums;

// The per-row numbers of the pairs of row i: its exact softmax (max score, 1 / sum, log sum),
// 1 / D_i (row-normalised maps) and its query log scale.
struct RowConst {
    double mx, inv_z, log_z, inv_d, lq;
};

// Per-lane sums of one row's pairs with one tile, combined in lane order (vmath.hpp's rule).
struct LaneSums {
    B attention = B(0.0), tv = B(0.0), kl = B(0.0), kernel = B(0.0), negative = B(0.0);   // broadcast, not a list
    BB kl_undefined = BB(false);
};

// Lanes of pairs (i, j) (`valid`: the lanes that are pairs): s the scores, k = phi~(x_i).phi~(y_j),
// w = exp(lk_j - P_i), lk the key log scales. A_ij = exp(s - max) / z; A_hat_ij = k w / D_i, or,
// for maps that are not row-normalised (nystrom), k with the shifts lq + lk_j undone.
inline void pair_lanes(const B& s, const B& k, const B& w, const B& lk, const BB& valid, const RowConst& r,
                       const PairwiseRequest& req, bool attention, bool kl, LaneSums& acc) {
    const B zero(0.0);
    if (attention) {
        const B a = vexp(s - B(r.mx)) * B(r.inv_z);
        const B ah = req.row_normalised ? (k * w) * B(r.inv_d) : k * vexp(B(r.lq) + lk);
        const B e = a - ah;
        acc.attention += xsimd::select(valid, e * e, zero);
        acc.tv += xsimd::select(valid, xsimd::abs(e), zero);
        // NaN counts as negative: not >= 0, not a valid weight (docs/design.md section 3).
        acc.negative += xsimd::select(valid && !(ah >= zero), B(1.0), zero);
        if (kl) {   // log A from the scores, so no underflow
            acc.kl_undefined = acc.kl_undefined || (valid && !(ah > zero));
            const B term = a * ((s - B(r.mx) - B(r.log_z)) - xsimd::log(ah));
            // a = 0 (underflow) adds 0 log 0 = 0; a NaN (float64 scores overflowed: s - max is
            // inf - inf) is kept, so the KL is NaN, never a finite sum of the other terms.
            acc.kl += xsimd::select(valid && !(a == zero), term, zero);
        }
    }
    if (req.kernel_mse) {   // phi(x).phi(y) = sign(k) exp(lq + lk + ln|k|): no overflow (2.3)
        const B mag = vexp(B(r.lq) + lk + xsimd::log(xsimd::abs(k)));
        const B est = xsimd::select(k == zero, zero, xsimd::copysign(mag, k));
        const B e = vexp(s) - est;
        acc.kernel += xsimd::select(valid, e * e, zero);
    }
}

double lane_total(const B& v) {
    alignas(64) double l[kLanes];
    v.store_aligned(l);
    double t = 0.0;
    for (std::size_t k = 0; k < kLanes; ++k) t += l[k];
    return t;
}

// The sums of row i's pairs with n keys of a tile (w null: all 1): whole lanes, then the tail
// as one padded batch whose extra lanes are masked out. Adds them to acc, tv_i and kl_i.
void row_pairs(const double* s, const double* k, const double* w, const double* lk, std::size_t n, const RowConst& r,
               const PairwiseRequest& req, bool attention, BlockSums& acc, double& tv, double& kl) {
    LaneSums ls;
    const bool do_kl = attention && req.attention_kl && !acc.kl_undefined;   // once undefined, blank
    const B one(1.0);
    std::size_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        pair_lanes(B::load_unaligned(s + j), B::load_unaligned(k + j), w ? B::load_unaligned(w + j) : one,
                   B::load_unaligned(lk + j), BB(true), r, req, attention, do_kl, ls);
    if (j < n) {
        alignas(64) double ts[kLanes] = {}, tk[kLanes] = {}, tw[kLanes] = {}, tl[kLanes] = {}, idx[kLanes];
        for (std::size_t q = 0; q < kLanes; ++q) {
            idx[q] = double(q);
            tk[q] = tw[q] = 1.0;
        }
        std::copy(s + j, s + n, ts);
        std::copy(k + j, k + n, tk);
        if (w) std::copy(w + j, w + n, tw);
        std::copy(lk + j, lk + n, tl);
        pair_lanes(B::load_aligned(ts), B::load_aligned(tk), B::load_aligned(tw), B::load_aligned(tl),
                   B::load_aligned(idx) < B(double(n - j)), r, req, attention, do_kl, ls);
    }
    acc.attention += lane_total(ls.attention);
    acc.negative += lane_total(ls.negative);
    acc.kernel += lane_total(ls.kernel);
    tv += lane_total(ls.tv);
    kl += lane_total(ls.kl);
    acc.kl_undefined = acc.kl_undefined || xsimd::any(ls.kl_undefined);
}

// One thread's scratch, kept across row blocks and calls (no page faults per block).
struct Scratch {
    std::vector<double> phiq, lq, phik, lk, K, S, w, inv_d, tv, kl;
    double w_for = 0.0;   // the P the weights w hold (valid while w_ok)
    bool w_ok = false;
};
Scratch& scratch() {
    thread_local Scratch s;
    return s;
}

// What the row blocks share: the keys' log scales, P_i, and the weighted key column sums.
struct Keys {
    std::vector<double> lk;       // (Lk) key log scales
    bool scaled = false;          // not all equal: weights w_j = exp(lk_j - P_i)
    std::vector<double> pmax;     // (L) P_i, the largest key log scale row i sees (if scaled)
    std::vector<double> colsum;   // (F) sum_j exp(lk_j - P) phi~_j (non-causal row-normalised)
    const double* phi = nullptr;  // (Lk x F) the key features where pairwise_keeps_keys, else null
};

// The key log scales and, for D_i = phi~_i . colsum (non-causal), the column sums: per tile
// relative to its largest log scale M_t, then added in tile order rescaled by exp(M_t - P).
// The key features it makes are kept (in storage the calling thread keeps) where
// pairwise_keeps_keys says, so the row blocks read them instead of making them again.
Keys key_pass(const FeatureRows& fk, std::size_t L, std::size_t Lk, const PairwiseRequest& req, int threads) {
    const std::size_t F = fk.columns(), nt = (Lk + kRows - 1) / kRows;
    const bool sums = req.row_normalised && !req.causal;
    Keys keys;
    keys.lk.resize(Lk);
    std::vector<double> parts(sums ? nt * F : 0, 0.0), top(nt, 0.0);
    thread_local std::vector<double> kept;
    double* const all_phi = req.keep_key_features && pairwise_keeps_keys(Lk, F) ? grown(kept, Lk * F) : nullptr;
    keys.phi = all_phi;
    parallel_for(nt, threads, [&](std::size_t t) {
        const std::size_t t0 = t * kRows, n = std::min(kRows, Lk - t0);
        double* phi = all_phi ? all_phi + t0 * F : grown(scratch().phik, n * F);
        fk.rows(t0, n, phi, keys.lk.data() + t0);
        if (!sums) return;
        top[t] = max_of(keys.lk.data() + t0, n);
        double* c = parts.data() + t * F;
        for (std::size_t j = 0; j < n; ++j) {
            const double f = std::exp(keys.lk[t0 + j] - top[t]);
            for (std::size_t q = 0; q < F; ++q) c[q] += f * phi[j * F + q];
        }
    });
    const std::vector<double>& lk = keys.lk;
    keys.scaled = std::any_of(lk.begin(), lk.end(), [&](double v) { return v != lk[0]; });
    const double all = Lk ? max_of(lk.data(), Lk) : 0.0;
    if (sums) {
        keys.colsum.assign(F, 0.0);
        for (std::size_t t = 0; t < nt; ++t) {   // in tile order
            const double f = keys.scaled ? std::exp(top[t] - all) : 1.0;
            for (std::size_t q = 0; q < F; ++q) keys.colsum[q] += f * parts[t * F + q];
        }
    }
    if (keys.scaled) {
        keys.pmax.assign(L, all);
        double p = -std::numeric_limits<double>::infinity();
        if (req.causal && !req.positions)
            for (std::size_t i = 0; i < L; ++i) keys.pmax[i] = i < Lk ? (p = std::max(p, lk[i])) : p;
        if (req.causal && req.positions) {   // the running max up to each sampled position
            std::size_t j = 0;
            for (std::size_t i = 0; i < L; ++i) {
                for (; j < Lk && j <= req.positions[i]; ++j) p = std::max(p, lk[j]);
                keys.pmax[i] = p;
            }
        }
    }
    return keys;
}

// What one call's row blocks share.
struct Pass {
    const Mat<double>&X, &Y;
    const SoftmaxRows& exact;
    const FeatureRows &fq, &fk;
    const PairwiseRequest& req;
    const Keys& keys;
    std::size_t L, Lk, d, F;
    bool attention;   // some metric of A_hat
};


// w_j = exp(lk_j - P) for the tile [t0, t0 + nt), kept while P is (causal: P_i grows rarely);
// null where the key log scales are all equal (w = 1).
const double* tile_weights(const Pass& p, Scratch& sc, std::size_t t0, std::size_t nt, double P) {
    if (!p.keys.scaled) return nullptr;
    if (sc.w_ok && sc.w_for == P) return sc.w.data();
    double* w = grown(sc.w, nt);
    std::copy(p.keys.lk.begin() + t0, p.keys.lk.begin() + t0 + nt, w);
    exp_shifted(w, nt, P);
    sc.w_for = P, sc.w_ok = true;
    return w;
}

double row_p(const Pass& p, std::size_t gi) { return p.keys.scaled ? p.keys.pmax[gi] : 0.0; }

// The key position of query row gi (row-sampled metrics: PairwiseRequest::positions).
std::size_t position(const Pass& p, std::size_t gi) { return p.req.positions ? p.req.positions[gi] : gi; }

// For each key tile row block [r0, r0 + rows) sees, in tile order: the tile's features, then,
// for the rows i0 <= i < rows that see it (causal: position >= t0; positions ascend),
// K = phi~(X_b) phi~(Y_t)^T into sc.K and (with `scores`) S = X_b Y_t^T into sc.S ((rows - i0)
// x nt each, row i at (i - i0) nt), then fn(t0, nt, i0).
template <class Fn>
void for_tiles(const Pass& p, Scratch& sc, std::size_t r0, std::size_t rows, bool scores, Fn&& fn) {
    const std::size_t cols = p.req.causal ? std::min(p.Lk, position(p, r0 + rows - 1) + 1) : p.Lk;
    std::size_t i0 = 0;
    for (std::size_t t0 = 0; t0 < cols; t0 += kRows) {
        const std::size_t nt = std::min(kRows, cols - t0);
        while (p.req.causal && position(p, r0 + i0) < t0) ++i0;
        const double* phik = p.keys.phi ? p.keys.phi + t0 * p.F : nullptr;
        if (!phik) {
            double* made = grown(sc.phik, nt * p.F);
            p.fk.rows(t0, nt, made, grown(sc.lk, nt));
            phik = made;
        }
        gemm<double>(false, true, rows - i0, nt, p.F, 1.0, sc.phiq.data() + i0 * p.F, p.F, phik, p.F, 0.0,
                     grown(sc.K, rows * nt), nt);
        if (scores)
            gemm<double>(false, true, rows - i0, nt, p.d, 1.0, p.X.data() + (r0 + i0) * p.d, p.d, p.Y.data() + t0 * p.d,
                         p.d, 0.0, grown(sc.S, rows * nt), nt);
        sc.w_ok = false;   // new tile: the weights are made again
        fn(t0, nt, i0);
    }
}

// 1 / D_i of the block's rows into sc.inv_d: D_i = phi~_i . colsum (non-causal), or the
// weighted sum of row i of K over the tiles it sees, in tile order (causal: the column sums
// would be prefix sums, so one more sweep of K instead); 1 for maps that are not
// row-normalised.
void normalisers(const Pass& p, Scratch& sc, std::size_t r0, std::size_t rows) {
    double* inv_d = grown(sc.inv_d, rows);
    if (!p.req.row_normalised || !p.attention) {   // no D_i (or no A_hat asked)
        std::fill(inv_d, inv_d + rows, 1.0);
    } else if (!p.req.causal) {
        for (std::size_t i = 0; i < rows; ++i) inv_d[i] = 1.0 / dot_lanes(sc.phiq.data() + i * p.F, p.keys.colsum.data(), p.F);
    } else {
        std::fill(inv_d, inv_d + rows, 0.0);
        for_tiles(p, sc, r0, rows, false, [&](std::size_t t0, std::size_t nt, std::size_t i0) {
            for (std::size_t i = i0; i < rows; ++i) {
                const std::size_t n = visible(p.req.causal, position(p, r0 + i), t0, nt);
                const double* k = sc.K.data() + (i - i0) * nt;
                const double* w = tile_weights(p, sc, t0, nt, row_p(p, r0 + i));
                if (n) inv_d[i] += w ? dot_lanes(k, w, n) : sum_lanes(k, n);
            }
        });
        for (std::size_t i = 0; i < rows; ++i) inv_d[i] = 1.0 / inv_d[i];
    }
}

// The sums of the row block [r0, r0 + rows) into acc[0], acc[1], ..., one per kRows rows (each
// added to in the same order as a block of kRows rows alone would be: by tile, then by row);
// with `own`, each row's sums there too (added into its part's in row order).
void row_block(const Pass& p, std::size_t r0, std::size_t rows, BlockSums* acc, PairwiseSums* own) {
    Scratch& sc = scratch();
    double* phiq = grown(sc.phiq, rows * p.F);
    double* lq = grown(sc.lq, rows);
    for (std::size_t c = 0; c < rows; c += kRows) p.fq.rows(r0 + c, std::min(kRows, rows - c), phiq + c * p.F, lq + c);
    normalisers(p, sc, r0, rows);
    double* tv = grown(sc.tv, rows);
    double* kl = grown(sc.kl, rows);
    std::fill(tv, tv + rows, 0.0);
    std::fill(kl, kl + rows, 0.0);
    for_tiles(p, sc, r0, rows, true, [&](std::size_t t0, std::size_t nt, std::size_t i0) {
        for (std::size_t i = i0; i < rows; ++i) {
            const std::size_t gi = r0 + i, n = visible(p.req.causal, position(p, gi), t0, nt);
            if (!n) continue;
            const double* s = sc.S.data() + (i - i0) * nt;
            const double z = p.exact.sum[gi];
            const RowConst rc{p.exact.max[gi], 1.0 / z, std::log(z), sc.inv_d[i], sc.lq[i]};
            const double* w = p.attention ? tile_weights(p, sc, t0, nt, row_p(p, gi)) : nullptr;
            BlockSums& into = own ? own[i] : acc[i / kRows];
            row_pairs(s, sc.K.data() + (i - i0) * nt, w, p.keys.lk.data() + t0, n, rc, p.req, p.attention, into, tv[i], kl[i]);
            into.pairs += double(n);
            if (p.req.theory)
                for (std::size_t j = 0; j < n; ++j) into.theory += p.req.theory(gi, t0 + j, s[j]);
        }
    });
    for (std::size_t i = 0; own && i < rows; ++i) {
        if (p.attention) own[i].tv = 0.5 * tv[i], own[i].kl = kl[i], own[i].rows = 1.0;
        acc[i / kRows].add(own[i]);
    }
    if (p.attention && !own)
        for (std::size_t i = 0; i < rows; ++i) {
            BlockSums& a = acc[i / kRows];
            a.tv += 0.5 * tv[i], a.kl += kl[i], a.rows += 1.0;
        }
}
}  // namespace

SoftmaxRows softmax_rows(const Mat<double>& X, const Mat<double>& Y, bool causal, int threads,
                         const std::size_t* positions) {
    auto at = [&](std::size_t gi) { return positions ? positions[gi] : gi; };
    const std::size_t L = X.shape(0), Lk = Y.shape(0), d = X.shape(1), nb = (L + kRows - 1) / kRows;
    SoftmaxRows out{std::vector<double>(L, -std::numeric_limits<double>::infinity()), std::vector<double>(L, 0.0)};
    // Per row block, two sweeps over the key tiles it sees: the row maxima, then the sums of
    // exp(s - max) in tile order (memory O(block x tile)).
    parallel_for(nb, threads, [&](std::size_t b) {
        const std::size_t r0 = b * kRows, rows = std::min(kRows, L - r0);
        const std::size_t cols = causal ? std::min(Lk, at(r0 + rows - 1) + 1) : Lk;
        std::vector<double> S(rows * kRows);
        for (int sweep = 0; sweep < 2; ++sweep)
            for (std::size_t t0 = 0; t0 < cols; t0 += kRows) {
                const std::size_t nt = std::min(kRows, cols - t0);
                gemm<double>(false, true, rows, nt, d, 1.0, X.data() + r0 * d, d, Y.data() + t0 * d, d, 0.0, S.data(), nt);
                for (std::size_t i = 0; i < rows; ++i) {
                    const std::size_t gi = r0 + i, n = visible(causal, at(gi), t0, nt);
                    if (!n) continue;
                    double* s = S.data() + i * nt;
                    if (sweep == 0) out.max[gi] = std::max(out.max[gi], max_of(s, n));
                    else out.sum[gi] += exp_shifted_sum(s, n, out.max[gi]);
                }
            }
    });
    return out;
}

template <class T>
void MatrixRows<T>::rows(std::size_t r0, std::size_t n, double* phi, double* log_scale) const {
    const std::size_t F = columns();
    std::transform(f_.phi.data() + r0 * F, f_.phi.data() + (r0 + n) * F, phi, [](T v) { return double(v); });
    std::copy(f_.log_scale.begin() + r0, f_.log_scale.begin() + r0 + n, log_scale);
}

template <class T>
EstimatorRows<T>::EstimatorRows(const Estimator<T>& est, const Mat<T>& X, Side side, int threads)
    : est_(est), X_(X), side_(side), xs_(1.0 / std::pow(double(X.shape(1)), 0.25)),
      F_(est.ready_map().num_features(est.W.shape(0), X.shape(1))), Wt_(transposed(est.W)) {
    if (side == Side::key) key_shift_ = common_key_shift(est.ready_map(), X, xs_, est.W, threads, est.rounding);
}

template <class T>
void EstimatorRows<T>::rows(std::size_t r0, std::size_t n, double* phi, double* log_scale) const {
    const FeatureMap& map = est_.ready_map();
    if constexpr (std::is_same_v<T, double>) {
        feature_rows(map, X_, r0, n, xs_, est_.W, side_, phi, log_scale, est_.rounding, est_.shift, key_shift_, Wt_.data());
    } else {   // made in T, as favor_attention makes them, then widened
        thread_local std::vector<T> buf;
        T* p = grown(buf, n * F_);
        feature_rows(map, X_, r0, n, xs_, est_.W, side_, p, log_scale, est_.rounding, est_.shift, key_shift_, Wt_.data());
        std::transform(p, p + n * F_, phi, [](T v) { return double(v); });
    }
}

PairwiseResult pairwise_result(const PairwiseSums& total, const PairwiseRequest& req) {
    PairwiseResult res;
    if (req.attention_mse) res.attention_mse = total.attention / total.pairs;
    if (req.attention_tv) res.attention_tv = total.tv / total.rows;
    if (req.attention_kl && !total.kl_undefined) res.attention_kl = total.kl / total.rows;
    if (req.negative_fraction) res.negative_fraction = total.negative / total.pairs;
    if (req.kernel_mse) res.kernel_mse = total.kernel / total.pairs;
    if (req.theory) res.kernel_mse_theory = total.theory / total.pairs;
    return res;
}

PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const SoftmaxRows& exact,
                                const FeatureRows& fq, const FeatureRows& fk, const PairwiseRequest& req,
                                int threads, std::vector<PairwiseSums>* per_row) {
    PairwiseResult res;
    if (!req.any()) return res;
    const std::size_t L = X.shape(0), Lk = Y.shape(0);
    if (exact.max.size() != L || exact.sum.size() != L)
        throw std::logic_error("pairwise_metrics: the softmax rows are not those of these queries");
    const Keys keys = key_pass(fk, L, Lk, req, threads);
    const bool attention = req.attention_mse || req.attention_tv || req.attention_kl || req.negative_fraction;
    const Pass p{X, Y, exact, fq, fk, req, keys, L, Lk, X.shape(1), fq.columns(), attention};
    const std::size_t Q = pairwise_query_rows(L), nblocks = (L + Q - 1) / Q;
    std::vector<BlockSums> sums((L + kRows - 1) / kRows);   // per kRows rows
    if (per_row) per_row->assign(L, PairwiseSums{});
    parallel_for(nblocks, threads, [&](std::size_t b) {
        const std::size_t r0 = b * Q;
        row_block(p, r0, std::min(Q, L - r0), sums.data() + r0 / kRows, per_row ? per_row->data() + r0 : nullptr);
    });

    BlockSums total;
    for (const BlockSums& s : sums) total.add(s);   // in block order
    return pairwise_result(total, req);
}

PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const Features<double>& fq,
                                const Features<double>& fk, const PairwiseRequest& req, int threads) {
    if (!req.any()) return {};
    return pairwise_metrics(X, Y, softmax_rows(X, Y, req.causal, threads), MatrixRows<double>(fq),
                            MatrixRows<double>(fk), req, threads);
}

template class MatrixRows<float>;
template class MatrixRows<double>;
template class EstimatorRows<float>;
template class EstimatorRows<double>;

}  // namespace favor
