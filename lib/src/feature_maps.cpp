#include "favor/feature_maps.hpp"

#include <algorithm>
#include <cmath>

#include "favor/blas.hpp"
#include "favor/memory.hpp"
#include "favor/names.hpp"
#include "favor/parallel.hpp"
#include "favor/theory.hpp"
#include "favor/vmath.hpp"

namespace favor {

namespace {
const std::vector<std::pair<FeatureKind, std::string>>& table() {
    static const std::vector<std::pair<FeatureKind, std::string>> t = {
        {FeatureKind::trig, "trig"},         {FeatureKind::positive, "positive"},
        {FeatureKind::hyperbolic, "hyperbolic"}, {FeatureKind::relu, "relu"},
        {FeatureKind::oprf, "oprf"},
    };
    return t;
}
}  // namespace

FeatureKind parse_features(const std::string& name) { return lookup_name(table(), name, "feature map"); }
std::string features_name(FeatureKind k) { return name_of(table(), k); }
const std::vector<std::string>& feature_names() {
    static const std::vector<std::string> names = names_of(table());
    return names;
}

std::size_t FeatureMap::num_features(std::size_t m) const {
    return (kind == FeatureKind::trig || kind == FeatureKind::hyperbolic) ? 2 * m : m;
}

template <class T>
std::vector<double> row_norms2(const Mat<T>& X) {
    const std::size_t L = X.shape(0), d = X.shape(1);
    std::vector<double> out(L);
    for (std::size_t i = 0; i < L; ++i) {
        double s = 0.0;
        for (std::size_t c = 0; c < d; ++c) s += double(X(i, c)) * double(X(i, c));
        out[i] = s;
    }
    return out;
}

template <class T>
FeatureMap resolve_for_inputs(const FeatureMap& f, const Mat<T>& X, const Mat<T>& Y) {
    FeatureMap r = f;
    if (f.kind != FeatureKind::oprf || !f.A_optimal) return r;
    // mean_{i,j} |x_i + y_j|^2 = mean|x|^2 + mean|y|^2 + 2 (mean x).(mean y): O(L d).
    const std::size_t d = X.shape(1);
    std::vector<double> mx(d, 0.0), my(d, 0.0);
    for (std::size_t i = 0; i < X.shape(0); ++i)
        for (std::size_t c = 0; c < d; ++c) mx[c] += double(X(i, c)) / double(X.shape(0));
    for (std::size_t j = 0; j < Y.shape(0); ++j)
        for (std::size_t c = 0; c < d; ++c) my[c] += double(Y(j, c)) / double(Y.shape(0));
    double mean_z2 = 0.0;
    for (double v : row_norms2(X)) mean_z2 += v / double(X.shape(0));
    for (double v : row_norms2(Y)) mean_z2 += v / double(Y.shape(0));
    for (std::size_t c = 0; c < d; ++c) mean_z2 += 2.0 * mx[c] * my[c];
    r.A = oprf_optimal_A(mean_z2 / double(d));
    return r;
}

template <class T>
void feature_block(const FeatureMap& f, const T* Xin, std::size_t rows, std::size_t d, double xs,
                   const Mat<T>& W, Side side, T* pb, std::size_t F, double* row_max) {
    const std::size_t m = W.shape(0);
    // positive = oprf with A = 0: e_ij = sqrt(1-4A) w_j.x_i + A |w_j|^2 - |x_i|^2/2 + (d/4) log(1-4A)
    const double A = (f.kind == FeatureKind::oprf) ? f.A : 0.0;
    const T a = T(std::sqrt(1.0 - 4.0 * A));
    const double log_c = 0.25 * double(d) * std::log1p(-4.0 * A);
    const bool hyp = f.kind == FeatureKind::hyperbolic;
    const bool trig = f.kind == FeatureKind::trig;
    const double norm = 1.0 / std::sqrt(double(hyp ? 2 * m : m));
    const T eps = T(f.epsilon);
    const double xs2 = xs * xs;
    // P = X W^T straight into the feature rows, then the exponents and their row maxima;
    // queries (per-row shift) finish here, while the block is in cache.
    gemm<T>(false, true, rows, m, d, T(xs), Xin, d, W.data(), d, T(0), pb, F);
    if (f.kind == FeatureKind::relu) {
        const T c = T(1.0 / std::sqrt(double(m)));
        for (std::size_t i = 0; i < rows; ++i) {
            T* e = pb + i * F;
            for (std::size_t j = 0; j < m; ++j) e[j] = (std::max(e[j], T(0)) + eps) * c;
            row_max[i] = 0.0;
        }
        return;
    }
    std::vector<T> wterm;
    if (A != 0.0) {
        wterm.assign(m, T(0));
        for (std::size_t j = 0; j < m; ++j) {
            double w2 = 0.0;
            for (std::size_t c = 0; c < d; ++c) w2 += double(W(j, c)) * double(W(j, c));
            wterm[j] = T(A * w2);
        }
    }
    for (std::size_t i = 0; i < rows; ++i) {
        const T* xr = Xin + i * d;
        const double x2 = sum_squares(xr, d) * xs2;
        T* e = pb + i * F;
        if (trig) {
            row_max[i] = 0.5 * x2;   // exp(|x|^2/2)
            if (side == Side::query)
                sincos_scale(e, e, e + m, m, eps, T(std::exp(0.5 * x2 - row_max[i]) * norm));
            continue;
        }
        const T base = T(log_c - 0.5 * x2);
        if (hyp)   // [exp(Wx), exp(-Wx)]
            for (std::size_t j = 0; j < m; ++j) e[m + j] = -e[j] + base;
        if (A != 0.0)
            for (std::size_t j = 0; j < m; ++j) e[j] = a * e[j] + wterm[j] + base;
        else
            for (std::size_t j = 0; j < m; ++j) e[j] = e[j] + base;
        row_max[i] = double(max_of(e, F));
        if (side == Side::query) exp_shift_scale(e, F, T(row_max[i]), eps, T(norm));
    }
}

template <class T>
void finish_key_block(const FeatureMap& f, std::size_t m, T* pb, std::size_t F, std::size_t rows,
                      const double* row_max, double shift) {
    if (f.kind == FeatureKind::relu) return;
    const bool hyp = f.kind == FeatureKind::hyperbolic;
    const double norm = 1.0 / std::sqrt(double(hyp ? 2 * m : m));
    const T eps = T(f.epsilon);
    for (std::size_t i = 0; i < rows; ++i) {
        T* e = pb + i * F;
        if (f.kind == FeatureKind::trig)
            sincos_scale(e, e, e + m, m, eps, T(std::exp(row_max[i] - shift) * norm));
        else
            exp_shift_scale(e, F, T(shift), eps, T(norm));
    }
}

namespace {

// The feature map on X = Xin * xs: (L, d) rows, W: (m, d). See compute_features.
template <class T>
Features<T> features_impl(const FeatureMap& f, const T* Xin, std::size_t L, std::size_t d,
                          double xs, const Mat<T>& W, Side side, int threads) {
    const std::size_t m = W.shape(0);
    const std::size_t F = f.num_features(m);
    Features<T> out{Mat<T>::from_shape({L, F}), std::vector<double>(L, 0.0)};
    T* phi = out.phi.data();
    advise_hugepages(phi, out.phi.size() * sizeof(T));
    const std::size_t rb = feature_block_rows();
    const std::size_t nblocks = (L + rb - 1) / rb;
    std::vector<double> row_max(L, 0.0);

    // Pass 1 per block: exponents and row maxima (queries finish here).
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        feature_block(f, Xin + r0 * d, rows, d, xs, W, side, phi + r0 * F, F, row_max.data() + r0);
    });
    if (f.kind == FeatureKind::relu) return out;

    // Keys: one shift over all keys (design.md, numerical stability), then pass 2.
    if (side == Side::key && L > 0) {
        const double s = max_of(row_max.data(), L);
        parallel_for(nblocks, threads, [&](std::size_t blk) {
            const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
            finish_key_block(f, m, phi + r0 * F, F, rows, row_max.data() + r0, s);
        });
        std::fill(row_max.begin(), row_max.end(), s);
    }
    out.log_scale = std::move(row_max);
    return out;
}

}  // namespace

template <class T>
Features<T> compute_features(const FeatureMap& f, const Mat<T>& X, const Mat<T>& W, Side side,
                             int threads) {
    return features_impl(f, X.data(), X.shape(0), X.shape(1), 1.0, W, side, threads);
}

template <class T>
Features<T> compute_features_scaled(const FeatureMap& f, const Mat<T>& Q, double input_scale,
                                    const Mat<T>& W, Side side, int threads) {
    return features_impl(f, Q.data(), Q.shape(0), Q.shape(1), input_scale, W, side, threads);
}

double kernel_estimate(const FeatureMap& f, const Mat<double>& W, const Mat<double>& x,
                       const Mat<double>& y) {
    const FeatureMap map = resolve_for_inputs(f, x, y);
    // Per-row shifts on both sides, undone exactly: phi = exp(log_scale) * phi~.
    const Features<double> fx = compute_features(map, x, W, Side::query);
    const Features<double> fy = compute_features(map, y, W, Side::query);
    double dot = 0.0;
    for (std::size_t j = 0; j < fx.phi.shape(1); ++j) dot += fx.phi(0, j) * fy.phi(0, j);
    return dot * std::exp(fx.log_scale[0] + fy.log_scale[0]);
}

#define FAVOR_INSTANTIATE(T)                                                                   \
    template std::vector<double> row_norms2<T>(const Mat<T>&);                                  \
    template FeatureMap resolve_for_inputs<T>(const FeatureMap&, const Mat<T>&, const Mat<T>&); \
    template Features<T> compute_features<T>(const FeatureMap&, const Mat<T>&, const Mat<T>&, Side, int); \
    template Features<T> compute_features_scaled<T>(const FeatureMap&, const Mat<T>&, double,       \
                                                    const Mat<T>&, Side, int);                      \
    template void feature_block<T>(const FeatureMap&, const T*, std::size_t, std::size_t, double,    \
                                   const Mat<T>&, Side, T*, std::size_t, double*);                  \
    template void finish_key_block<T>(const FeatureMap&, std::size_t, T*, std::size_t, std::size_t,  \
                                      const double*, double);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
