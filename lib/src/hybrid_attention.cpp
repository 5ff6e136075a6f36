// Hybrid attention, the reference path (docs/design.md section 2.8): for each query row its
// exact support E(i) (window and sinks, or the oracle top-k), the exact kernel there and the
// feature map's kernel estimate on the other visible keys, one shift and one normaliser.
#include "favor/hybrid_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "favor/estimator.hpp"
#include "favor/features.hpp"
#include "favor/parallel.hpp"

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

template Mat<float> hybrid_attention<float>(const Estimator<float>&, MatView<float>, MatView<float>, MatView<float>, bool,
                                            int, const std::vector<std::size_t>*);
template Mat<double> hybrid_attention<double>(const Estimator<double>&, MatView<double>, MatView<double>, MatView<double>,
                                              bool, int, const std::vector<std::size_t>*);
template std::vector<double> hybrid_kernel_row<float>(const Estimator<float>&, MatView<float>, MatView<float>, std::size_t,
                                                      bool);
template std::vector<double> hybrid_kernel_row<double>(const Estimator<double>&, MatView<double>, MatView<double>,
                                                       std::size_t, bool);

}  // namespace favor
