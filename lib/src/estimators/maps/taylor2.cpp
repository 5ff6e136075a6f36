// taylor2: the second-order Taylor feature map of Based (Arora et al. 2024, arXiv 2402.18668,
// sec. 3.1), applied to the scaled rows x = q / d^{1/4}:
//   phi(x) = [1, x_1..x_d, x_l^2/sqrt(2) (l = 1..d), x_l x_k (l < k)],  F = 1 + d + d(d+1)/2,
// so that phi(x).phi(y) = 1 + x.y + (x.y)^2/2 = 1 + q.k/sqrt(d) + (q.k)^2/(2d) exactly (the
// symmetric packing of the d^2 products x_l x_k; Based keeps all d^2). Deterministic: no
// projection, no m. A biased approximation of SM (its error exp(t) - 1 - t - t^2/2, t = x.y),
// not an estimator; its kernel value is always >= 1/2, so D > 0.
#include <cmath>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
class Taylor2Map : public FinishedMapKernels<Taylor2Map> {
public:
    using FinishedMapKernels::FinishedMapKernels;
    std::string name() const override { return "taylor2"; }
    std::size_t num_features(std::size_t, std::size_t d) const override { return 1 + d + d * (d + 1) / 2; }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }
    // Every feature is one product: F multiplies per row.
    double feature_flops(std::size_t L, std::size_t Lk, std::size_t, std::size_t d) const override {
        return double(L + Lk) * double(num_features(0, d));
    }

    // Finished on both sides (row_log = 0); epsilon added to every feature as elu does.
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const double eps = epsilon(), r2 = std::sqrt(0.5);
        const std::size_t d = b.d;
        for (std::size_t i = 0; i < b.rows; ++i) {
            const T* x = b.X + i * d;
            T* e = b.out + i * b.F;
            std::size_t f = 0;
            e[f++] = T(1.0 + eps);
            for (std::size_t c = 0; c < d; ++c) e[f++] = T(b.xs * double(x[c]) + eps);
            for (std::size_t c = 0; c < d; ++c) {
                const double v = b.xs * double(x[c]);
                e[f++] = T(r2 * v * v + eps);
            }
            for (std::size_t c = 0; c < d; ++c)
                for (std::size_t k = c + 1; k < d; ++k) e[f++] = T(b.xs * double(x[c]) * b.xs * double(x[k]) + eps);
            b.row_log[i] = 0.0;
        }
    }
    // d/dx_c: x_c -> 1, x_c^2/sqrt 2 -> sqrt 2 x_c, x_c x_k -> x_k (and x_l x_c -> x_l); dq = xs dx.
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const std::size_t d = g.d;
        std::vector<double> v(d), dx(d);
        for (std::size_t i = 0; i < g.rows; ++i) {
            const T* G = g.G + i * g.F;
            for (std::size_t c = 0; c < d; ++c) {
                v[c] = g.xs * double(g.X[i * d + c]);
                dx[c] = double(G[1 + c]) + std::sqrt(2.0) * v[c] * double(G[1 + d + c]);
            }
            std::size_t f = 1 + 2 * d;
            for (std::size_t c = 0; c < d; ++c)
                for (std::size_t k = c + 1; k < d; ++k, ++f) {
                    dx[c] += double(G[f]) * v[k];
                    dx[k] += double(G[f]) * v[c];
                }
            for (std::size_t c = 0; c < d; ++c) g.dX[i * d + c] = T(g.xs * dx[c]);
        }
    }
};
}  // namespace

FeatureMapPtr make_taylor2(const FieldObject&, double epsilon) { return std::make_shared<Taylor2Map>(epsilon); }

}  // namespace favor
