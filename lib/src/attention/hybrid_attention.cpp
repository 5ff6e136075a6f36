// Hybrid attention, the reference path (docs/design.md section 2.8): for each query row its
// exact support E(i) (window and sinks, or the oracle top-k), the exact kernel there and the
// feature map's kernel estimate on the other visible keys, one shift and one normaliser.
#include "favor/attention/hybrid_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/features.hpp"

namespace favor {

namespace {

constexpr std::size_t kHybridRowBlock = 32;   // query rows per parallel item (any size gives the same numbers)

// What every row reads: the inputs, the support, and the features of the rows asked (fq, in
// their order) and of all keys (fk); no features for the remainder "none".
template <class T>
struct Parts {
    MatView<T> Q, K, V;
    HybridSupport support;
    bool causal = false;
    Rounding rounding = Rounding::none;
    bool remainder = false;
    Features<T> fq, fk;
};

// The query features of `rows` (ascending), each bitwise that row of compute_features over
// all of Q: made per block of feature_block_rows() rows that holds an asked row (feature_rows).
template <class T>
Features<T> query_features(const Estimator<T>& est, MatView<T> Q, double xs, const std::vector<std::size_t>& rows) {
    const std::size_t F = est.map->num_features(est.W.shape(0), Q.shape(1)), B = feature_block_rows();
    Features<T> f{Mat<T>::from_shape({rows.size(), F}), std::vector<double>(rows.size()), 0};
    std::vector<T> phi(B * F);
    std::vector<double> lg(B);
    const std::vector<T> Wt = transposed(est.W);
    std::size_t have = std::size_t(-1);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::size_t b = rows[r] / B, at = rows[r] - b * B;
        if (b != have)
            feature_rows(*est.map, Q, b * B, std::min(B, Q.shape(0) - b * B), xs, est.W, Side::query, phi.data(), lg.data(),
                         est.rounding, est.shift, 0.0, Wt.data());
        have = b;
        std::copy(phi.data() + at * F, phi.data() + (at + 1) * F, f.phi.data() + r * F);
        f.log_scale[r] = lg[at];
    }
    return f;
}

// rows: the query rows asked (ascending), or null for all.
template <class T>
Parts<T> make_parts(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads,
                    const std::vector<std::size_t>* rows) {
    const FeatureMap& map = est.ready_map();
    Parts<T> p{Q, K, V, est.hybrid, causal, est.rounding, map.num_features(est.W.shape(0), Q.shape(1)) != 0, {}, {}};
    if (p.remainder) {
        const double xs = 1.0 / std::pow(double(Q.shape(1)), 0.25);
        p.fq = rows ? query_features(est, Q, xs, *rows)
                    : compute_features(map, Q, xs, est.W, Side::query, threads, est.rounding, est.shift);
        p.fk = compute_features(map, K, xs, est.W, Side::key, threads, est.rounding, est.shift);
    }
    return p;
}

// q_i . k_j / sqrt(d) in T, products in index order (half dtypes: the score stored rounded,
// as exact_attention_rounded stores it).
template <class T>
T score(const Parts<T>& p, std::size_t i, std::size_t j) {
    const std::size_t d = p.Q.shape(1);
    const T* q = p.Q.data() + i * d;
    const T* k = p.K.data() + j * d;
    T s = 0;
    for (std::size_t c = 0; c < d; ++c) s += q[c] * k[c];
    s *= T(1.0 / std::sqrt(double(d)));
    if constexpr (std::is_same_v<T, float>)
        if (p.rounding != Rounding::none) round_to(p.rounding, &s, 1);
    return s;
}

// Marks row i's exact support among its n visible keys. Top-k: the `window` largest scores
// (ties to the lower index), then the sinks.
template <class T>
void mark_support(const Parts<T>& p, std::size_t i, std::size_t n, std::vector<char>& exact, std::vector<double>& s,
                  std::vector<std::size_t>& order) {
    exact.assign(n, 0);
    const HybridSupport& e = p.support;
    for (std::size_t j = 0; j < n; ++j) exact[j] = e.in_window_or_sinks(i, j);
    if (!e.topk) return;
    for (std::size_t j = 0; j < n; ++j) s[j] = double(score(p, i, j));
    order.resize(n);
    for (std::size_t j = 0; j < n; ++j) order[j] = j;
    const std::size_t k = std::min(e.window, n);
    std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(k == 0 ? 0 : k - 1), order.end(),
                     [&](std::size_t a, std::size_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    for (std::size_t t = 0; t < k; ++t) exact[order[t]] = 1;
}

// Scratch of one thread.
struct RowScratch {
    std::vector<char> exact;
    std::vector<double> s, kt, w;
    std::vector<double> exact_scores;   // hybrid_pairwise: x_r . y_j in float64
    std::vector<std::size_t> order;
};

// Row i's (the r-th row asked) weights w[j] = K_ij exp(-c) over its n visible keys, and c:
// the largest exact score or remainder log scale lq_i + lk_j, one shift for both parts
// (docs/design.md 2.8), so no weight overflows and the largest exact one is 1.
template <class T>
double row_weights(const Parts<T>& p, std::size_t i, std::size_t r, std::size_t n, RowScratch& x) {
    x.s.assign(n, 0.0), x.kt.assign(n, 0.0), x.w.assign(n, 0.0);
    mark_support(p, i, n, x.exact, x.s, x.order);
    const std::size_t F = p.fq.phi.shape(1);
    double c = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) {
        if (x.exact[j]) {
            if (!p.support.topk) x.s[j] = double(score(p, i, j));
            c = std::max(c, x.s[j]);
        } else if (p.remainder) {
            const T* a = p.fq.phi.data() + r * F;
            const T* b = p.fk.phi.data() + j * F;
            T dot = 0;
            for (std::size_t f = 0; f < F; ++f) dot += a[f] * b[f];
            x.kt[j] = double(dot);
            x.s[j] = p.fq.log_scale[r] + p.fk.log_scale[j];
            c = std::max(c, x.s[j]);
        }
    }
    for (std::size_t j = 0; j < n; ++j)
        x.w[j] = x.exact[j] ? std::exp(x.s[j] - c) : p.remainder ? x.kt[j] * std::exp(x.s[j] - c) : 0.0;
    return c;
}

template <class T>
std::size_t visible(const Parts<T>& p, std::size_t i) {
    return p.causal ? std::min(i + 1, p.K.shape(0)) : p.K.shape(0);
}

// Out row r (query i) = sum_j w_j v_j / sum_j w_j, in key order.
template <class T>
void row_output(const Parts<T>& p, std::size_t i, std::size_t r, RowScratch& x, Mat<T>& out) {
    const std::size_t n = visible(p, i), dv = p.V.shape(1);
    row_weights(p, i, r, n, x);
    std::vector<double> num(dv, 0.0);
    double den = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        if (x.w[j] == 0.0) continue;
        const T* v = p.V.data() + j * dv;
        for (std::size_t c = 0; c < dv; ++c) num[c] += x.w[j] * double(v[c]);
        den += x.w[j];
    }
    T* o = out.data() + r * dv;
    for (std::size_t c = 0; c < dv; ++c) o[c] = T(num[c] / den);
    if constexpr (std::is_same_v<T, float>)
        if (p.rounding != Rounding::none) round_to(p.rounding, o, dv);
}

std::vector<std::size_t> all_rows(std::size_t L) {
    std::vector<std::size_t> r(L);
    for (std::size_t i = 0; i < L; ++i) r[i] = i;
    return r;
}

// --- the gradient (hybrid_backward) ------------------------------------------------------
// With D_i = sum_j K_ij and the row's shift c_i (K_ij = w_ij exp(c_i), D_i = Dt_i exp(c_i)):
//   dLoss/dK_ij = (G_i.v_j - G_i.Out_i) / D_i = a_ij exp(-c_i),  a_ij = (G_i.v_j - G_i.Out_i) / Dt_i.
// On the support K_ij = exp(s_ij): dLoss/ds_ij = a_ij w_ij, then dq_i += that k_j / sqrt(d),
// dk_j += that q_i / sqrt(d). Off it K_ij = phi~(x_i).phi~(y_j) exp(lq_i + lk_j): with the log
// scales held fixed (FeatureGrad's contract) dLoss/dphi~(x_i) += a_ij e_ij phi~(y_j) and
// dLoss/dphi~(y_j) += a_ij e_ij phi~(x_i), e_ij = exp(lq_i + lk_j - c_i) <= 1 (no overflow).
// dV_j = sum_i A_ij G_i, A_ij = w_ij / Dt_i.

// What the key pass needs of each query row (the row pass makes it): c_i, Dt_i, G_i.Out_i and,
// for top-k, the row's exact keys (ascending).
struct RowStats {
    std::vector<double> c, den, gout;
    std::vector<std::vector<std::size_t>> top;
};

template <class T>
double dot_rows(const T* a, const T* b, std::size_t n) {
    double t = 0.0;
    for (std::size_t k = 0; k < n; ++k) t += double(a[k]) * double(b[k]);
    return t;
}

// Row i's pass: its weights (row_weights), its stats, dq_i's exact part (dq, double) and
// dLoss/dphi~(x_i) (dphi, in T), in key order.
template <class T>
void backward_row(const Parts<T>& p, const Mat<T>& G, std::size_t i, RowScratch& x, RowStats& st, double* dq, T* dphi) {
    const std::size_t n = visible(p, i), d = p.Q.shape(1), dv = p.V.shape(1), F = p.fq.phi.shape(1);
    const double c = row_weights(p, i, i, n, x), inv_sqrt_d = 1.0 / std::sqrt(double(d));
    std::vector<double> out(dv, 0.0), dphi_d(F, 0.0);
    double den = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        den += x.w[j];
        for (std::size_t k = 0; k < dv; ++k) out[k] += x.w[j] * double(p.V.data()[j * dv + k]);
    }
    const T* g = G.data() + i * dv;
    double gout = 0.0;
    for (std::size_t k = 0; k < dv; ++k) gout += double(g[k]) * (out[k] / den);
    st.c[i] = c, st.den[i] = den, st.gout[i] = gout;
    for (std::size_t j = 0; j < n; ++j) {
        if (!x.exact[j] && !p.remainder) continue;
        const double a = (dot_rows(g, p.V.data() + j * dv, dv) - gout) / den;
        if (x.exact[j]) {
            const double ds = a * x.w[j] * inv_sqrt_d;   // dLoss/ds_ij / sqrt(d)
            for (std::size_t k = 0; k < d; ++k) dq[k] += ds * double(p.K.data()[j * d + k]);
        } else {
            const double t = a * std::exp(x.s[j] - c);   // a_ij e_ij
            for (std::size_t f = 0; f < F; ++f) dphi_d[f] += t * double(p.fk.phi.data()[j * F + f]);
        }
    }
    if (p.support.topk)
        for (std::size_t j = 0; j < n; ++j)
            if (x.exact[j]) st.top[i].push_back(j);
    for (std::size_t f = 0; f < F; ++f) dphi[f] = T(dphi_d[f]);
}

template <class T>
bool exact_pair(const Parts<T>& p, const RowStats& st, std::size_t i, std::size_t j) {
    if (p.support.in_window_or_sinks(i, j)) return true;
    return p.support.topk && std::binary_search(st.top[i].begin(), st.top[i].end(), j);
}

// Key j's pass over the query rows that see it, in row order: dv_j, dk_j's exact part (dk,
// double) and dLoss/dphi~(y_j) (dphi, in T). Each pair's weight as row_weights makes it.
template <class T>
void backward_key(const Parts<T>& p, const Mat<T>& G, const RowStats& st, std::size_t j, double* dk, double* dvj,
                  T* dphi) {
    const std::size_t L = p.Q.shape(0), d = p.Q.shape(1), dv = p.V.shape(1), F = p.fq.phi.shape(1);
    const double inv_sqrt_d = 1.0 / std::sqrt(double(d));
    std::vector<double> dphi_d(F, 0.0);
    for (std::size_t i = p.causal ? j : 0; i < L; ++i) {
        const bool exact = exact_pair(p, st, i, j);
        if (!exact && !p.remainder) continue;
        const T* g = G.data() + i * dv;
        const double a = (dot_rows(g, p.V.data() + j * dv, dv) - st.gout[i]) / st.den[i];
        double w;
        if (exact) {
            w = std::exp(double(score(p, i, j)) - st.c[i]);
            const double ds = a * w * inv_sqrt_d;
            for (std::size_t k = 0; k < d; ++k) dk[k] += ds * double(p.Q.data()[i * d + k]);
        } else {
            const T* fq = p.fq.phi.data() + i * F;
            T kt = 0;
            for (std::size_t f = 0; f < F; ++f) kt += fq[f] * p.fk.phi.data()[j * F + f];
            const double e = std::exp(p.fq.log_scale[i] + p.fk.log_scale[j] - st.c[i]);
            w = double(kt) * e;
            for (std::size_t f = 0; f < F; ++f) dphi_d[f] += a * e * double(fq[f]);
        }
        for (std::size_t k = 0; k < dv; ++k) dvj[k] += w / st.den[i] * double(g[k]);
    }
    for (std::size_t f = 0; f < F; ++f) dphi[f] = T(dphi_d[f]);
}

// exact (double) + through (T, the map's vjp), into T.
template <class T>
Mat<T> added(const Mat<double>& exact, const Mat<T>* through) {
    Mat<T> out = Mat<T>::from_shape(exact.shape());
    for (std::size_t k = 0; k < exact.size(); ++k)
        out.data()[k] = T(exact.data()[k] + (through ? double(through->data()[k]) : 0.0));
    return out;
}

// --- the pairwise sums (hybrid_pairwise) ---------------------------------------------------
// Row r's (query i) sums of A_hat_ij = w_ij / Dt_i against A_ij = exp(s_ij - max) / z, s the
// float64 scores of the scaled rows, as pairwise_pass.cpp's pair_lanes defines each term. The
// row's exact max and z come from the same scores, in key order (not from softmax_rows: its
// BLAS tiles can round a score differently with the row's place in the block, so a row would
// not be bitwise the same whichever rows are asked with it; docs/design.md 2.8).
template <class T>
PairwiseSums pairwise_row(const Parts<T>& p, std::size_t i, std::size_t r, const Mat<double>& X, const Mat<double>& Y,
                          const PairwiseRequest& req, RowScratch& x) {
    const std::size_t n = visible(p, i), d = X.shape(1);
    const double c = row_weights(p, i, r, n, x);
    std::vector<double>& sc = x.exact_scores;
    sc.resize(n);
    double mx = -std::numeric_limits<double>::infinity(), z = 0.0, den = 0.0;
    for (std::size_t j = 0; j < n; ++j) mx = std::max(mx, sc[j] = dot_rows(X.data() + r * d, Y.data() + j * d, d));
    for (std::size_t j = 0; j < n; ++j) z += std::exp(sc[j] - mx);
    for (std::size_t j = 0; j < n; ++j) den += x.w[j];
    const double log_z = std::log(z);
    PairwiseSums s;
    double tv = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        const double a = std::exp(sc[j] - mx) / z, ah = x.w[j] / den, e = a - ah;
        s.attention += e * e;
        tv += std::fabs(e);
        s.negative += !(ah >= 0.0) ? 1.0 : 0.0;   // NaN counts (docs/design.md 3)
        if (req.attention_kl) {
            s.kl_undefined = s.kl_undefined || !(ah > 0.0);
            if (a != 0.0) s.kl += a * ((sc[j] - mx - log_z) - std::log(ah));   // log A from the scores
        }
        if (req.kernel_mse) {
            const double k = x.w[j] == 0.0 ? 0.0 : x.w[j] * std::exp(c), err = std::exp(sc[j]) - k;
            s.kernel += err * err;
        }
    }
    s.tv = 0.5 * tv, s.pairs = double(n), s.rows = 1.0;
    if (s.kl_undefined) s.kl = 0.0;
    return s;
}

}  // namespace

template <class T>
Mat<T> hybrid_attention(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads,
                        const std::vector<std::size_t>* rows) {
    const std::vector<std::size_t> which = rows ? *rows : all_rows(Q.shape(0));
    const Parts<T> p = make_parts(est, Q, K, V, causal, threads, rows);
    Mat<T> out = Mat<T>::from_shape({which.size(), V.shape(1)});
    const std::size_t blocks = (which.size() + kHybridRowBlock - 1) / kHybridRowBlock;
    parallel_for(blocks, threads, [&](std::size_t b) {
        RowScratch x;
        const std::size_t end = std::min(which.size(), (b + 1) * kHybridRowBlock);
        for (std::size_t r = b * kHybridRowBlock; r < end; ++r) row_output(p, which[r], r, x, out);
    });
    return out;
}

template <class T>
std::vector<double> hybrid_kernel_row(const Estimator<T>& est, MatView<T> Q, MatView<T> K, std::size_t i, bool causal) {
    const std::vector<std::size_t> row = {i};
    const Parts<T> p = make_parts(est, Q, K, K, causal, 1, &row);
    RowScratch x;
    const std::size_t n = visible(p, i);
    const double c = row_weights(p, i, 0, n, x);
    std::vector<double> k(K.shape(0), 0.0);
    for (std::size_t j = 0; j < n; ++j) k[j] = x.w[j] * std::exp(c);
    return k;
}

template <class T>
Gradients<T> hybrid_backward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                             const Mat<T>& G, bool causal, int threads) {
    check_backward_shapes<T>(Q, K, V, G, causal);
    const FeatureMap& map = gradient_map(est.ready_map(), est.rounding);
    Estimator<T> shifted = est;   // the features with their shifts (the gradient is the same)
    shifted.shift = true;
    const Parts<T> p = make_parts(shifted, MatView<T>(Q), MatView<T>(K), MatView<T>(V), causal, threads, nullptr);
    const std::size_t L = Q.shape(0), Lk = K.shape(0), d = Q.shape(1), dv = V.shape(1), F = p.fq.phi.shape(1);
    RowStats st{std::vector<double>(L), std::vector<double>(L), std::vector<double>(L),
                std::vector<std::vector<std::size_t>>(p.support.topk ? L : 0)};
    Mat<double> dq = xt::zeros<double>({L, d}), dk = xt::zeros<double>({Lk, d}), dvv = xt::zeros<double>({Lk, dv});
    Mat<T> dphiq = xt::zeros<T>({L, F}), dphik = xt::zeros<T>({Lk, F});
    const std::size_t qb = (L + kHybridRowBlock - 1) / kHybridRowBlock, kb = (Lk + kHybridRowBlock - 1) / kHybridRowBlock;
    parallel_for(qb, threads, [&](std::size_t b) {   // rows: dq_i, dphi~(x_i), the stats
        RowScratch x;
        for (std::size_t i = b * kHybridRowBlock; i < std::min(L, (b + 1) * kHybridRowBlock); ++i)
            backward_row(p, G, i, x, st, dq.data() + i * d, dphiq.data() + i * F);
    });
    parallel_for(kb, threads, [&](std::size_t b) {   // keys: dk_j, dv_j, dphi~(y_j)
        for (std::size_t j = b * kHybridRowBlock; j < std::min(Lk, (b + 1) * kHybridRowBlock); ++j)
            backward_key(p, G, st, j, dk.data() + j * d, dvv.data() + j * dv, dphik.data() + j * F);
    });
    Gradients<T> out{{}, {}, cast_mat<T>(dvv)};
    if (!p.remainder) {
        out.dQ = added<T>(dq, nullptr), out.dK = added<T>(dk, nullptr);
        return out;
    }
    const double xs = 1.0 / std::pow(double(d), 0.25);
    const Mat<T> vq = feature_vjp(map, Q, xs, est.W, Side::query, p.fq.phi, dphiq, threads);
    const Mat<T> vk = feature_vjp(map, K, xs, est.W, Side::key, p.fk.phi, dphik, threads);
    out.dQ = added<T>(dq, &vq), out.dK = added<T>(dk, &vk);
    return out;
}

template <class T>
std::vector<PairwiseSums> hybrid_pairwise(const Estimator<T>& est, MatView<T> Q, MatView<T> K, const Mat<double>& X,
                                          const Mat<double>& Y, const PairwiseRequest& req, int threads,
                                          const std::vector<std::size_t>* rows) {
    const std::vector<std::size_t> which = rows ? *rows : all_rows(Q.shape(0));
    if (X.shape(0) != which.size() || Y.shape(0) != K.shape(0))
        throw std::logic_error("hybrid_pairwise: X or Y are not those of these rows");
    const Parts<T> p = make_parts(est, Q, K, K, req.causal, threads, rows);
    std::vector<PairwiseSums> out(which.size());
    const std::size_t blocks = (which.size() + kHybridRowBlock - 1) / kHybridRowBlock;
    parallel_for(blocks, threads, [&](std::size_t b) {
        RowScratch x;
        const std::size_t end = std::min(which.size(), (b + 1) * kHybridRowBlock);
        for (std::size_t r = b * kHybridRowBlock; r < end; ++r) out[r] = pairwise_row(p, which[r], r, X, Y, req, x);
    });
    return out;
}

template Mat<float> hybrid_attention<float>(const Estimator<float>&, MatView<float>, MatView<float>, MatView<float>, bool,
                                            int, const std::vector<std::size_t>*);
template Mat<double> hybrid_attention<double>(const Estimator<double>&, MatView<double>, MatView<double>, MatView<double>,
                                              bool, int, const std::vector<std::size_t>*);
template std::vector<double> hybrid_kernel_row<float>(const Estimator<float>&, MatView<float>, MatView<float>, std::size_t,
                                                      bool);
template std::vector<double> hybrid_kernel_row<double>(const Estimator<double>&, MatView<double>, MatView<double>,
                                                       std::size_t, bool);

template Gradients<float> hybrid_backward<float>(const Estimator<float>&, const Mat<float>&, const Mat<float>&,
                                                 const Mat<float>&, const Mat<float>&, bool, int);
template Gradients<double> hybrid_backward<double>(const Estimator<double>&, const Mat<double>&, const Mat<double>&,
                                                   const Mat<double>&, const Mat<double>&, bool, int);
template std::vector<PairwiseSums> hybrid_pairwise<float>(const Estimator<float>&, MatView<float>, MatView<float>,
                                                          const Mat<double>&, const Mat<double>&, const PairwiseRequest&,
                                                          int, const std::vector<std::size_t>*);
template std::vector<PairwiseSums> hybrid_pairwise<double>(const Estimator<double>&, MatView<double>, MatView<double>,
                                                           const Mat<double>&, const Mat<double>&, const PairwiseRequest&,
                                                           int, const std::vector<std::size_t>*);

}  // namespace favor
