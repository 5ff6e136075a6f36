#include "favor/feature_maps.hpp"

#include <cmath>

#include "favor/blas.hpp"
#include "favor/names.hpp"
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
Features<T> compute_features(const FeatureMap& f, const Mat<T>& X, const Mat<T>& W, Side side) {
    const std::size_t L = X.shape(0), d = X.shape(1), m = W.shape(0);
    const std::size_t F = f.num_features(m);
    // P = X W^T: (L, m), the only O(L m d) work of the map.
    Mat<T> P = Mat<T>::from_shape({L, m});
    gemm<T>(false, true, L, m, d, T(1), X.data(), d, W.data(), d, T(0), P.data(), m);
    const std::vector<double> x2 = row_norms2(X);

    Features<T> out{Mat<T>::from_shape({L, F}), std::vector<double>(L, 0.0)};
    T* phi = out.phi.data();

    if (f.kind == FeatureKind::relu) {
        const T c = T(1.0 / std::sqrt(double(m)));
        for (std::size_t k = 0; k < L * m; ++k)
            phi[k] = (std::max(P.data()[k], T(0)) + T(f.epsilon)) * c;
        return out;
    }

    // Exponents e_ij, with the row maxima, before any shift.
    std::vector<double> row_max(L);
    if (f.kind == FeatureKind::trig) {
        for (std::size_t i = 0; i < L; ++i) row_max[i] = 0.5 * x2[i];   // exp(|x|^2/2)
    } else {
        // positive = oprf with A = 0: e_ij = sqrt(1-4A) w_j.x_i + A |w_j|^2 - |x_i|^2/2 + (d/4) log(1-4A)
        const double A = (f.kind == FeatureKind::oprf) ? f.A : 0.0;
        const T a = T(std::sqrt(1.0 - 4.0 * A));
        const double log_c = 0.25 * double(d) * std::log1p(-4.0 * A);
        std::vector<T> wterm(m, T(0));
        if (A != 0.0)
            for (std::size_t j = 0; j < m; ++j) {
                double w2 = 0.0;
                for (std::size_t c = 0; c < d; ++c) w2 += double(W(j, c)) * double(W(j, c));
                wterm[j] = T(A * w2);
            }
        const bool hyp = f.kind == FeatureKind::hyperbolic;
        for (std::size_t i = 0; i < L; ++i) {
            const T base = T(log_c - 0.5 * x2[i]);
            const T* p = P.data() + i * m;
            T* e = phi + i * F;
            for (std::size_t j = 0; j < m; ++j) e[j] = a * p[j] + wterm[j] + base;
            if (hyp)   // [exp(Wx), exp(-Wx)]
                for (std::size_t j = 0; j < m; ++j) e[m + j] = -p[j] + base;
            row_max[i] = double(max_of(e, F));
        }
    }

    // Shift: per row for queries, one constant over all keys (design.md, numerical stability).
    if (side == Side::key && L > 0) {
        const double s = max_of(row_max.data(), L);
        std::fill(row_max.begin(), row_max.end(), s);
    }
    out.log_scale = row_max;

    const double norm = 1.0 / std::sqrt(double(f.kind == FeatureKind::hyperbolic ? 2 * m : m));
    const T eps = T(f.epsilon);
    for (std::size_t i = 0; i < L; ++i) {
        T* e = phi + i * F;
        if (f.kind == FeatureKind::trig) {
            const T c = T(std::exp(0.5 * x2[i] - row_max[i]) * norm);
            const T* p = P.data() + i * m;
            for (std::size_t j = 0; j < m; ++j) {
                e[j] = (std::sin(p[j]) + eps) * c;
                e[m + j] = (std::cos(p[j]) + eps) * c;
            }
        } else {
            exp_shifted(e, F, T(row_max[i]));
            const T c = T(norm);
            for (std::size_t j = 0; j < F; ++j) e[j] = (e[j] + eps) * c;
        }
    }
    return out;
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
    template Features<T> compute_features<T>(const FeatureMap&, const Mat<T>&, const Mat<T>&, Side);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
