// trig: phi(x) = exp(|x|^2/2)/sqrt(m) [sin Wx, cos Wx], random Fourier features for the
// softmax kernel (Performer eq. (2) with Lemma 2's MSE). Its features change sign, so the
// denominators D can cross zero (negative_fraction reports it).
#include <cmath>

#include "favor/core/vmath.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
class TrigMap : public FeatureMapKernels<TrigMap> {
public:
    using FeatureMapKernels::FeatureMapKernels;
    std::string name() const override { return "trig"; }
    std::size_t num_features(std::size_t m, std::size_t) const override { return 2 * m; }
    std::optional<double> pair_mse(double x2, double y2, double xy, std::size_t m, std::size_t) const override {
        return mse_trig_iid(x2, y2, xy, m);
    }

    // row_log[i] = |x_i|^2 / 2: the log of the row's factor exp(|x|^2/2). Keys keep W x.
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const std::size_t m = b.W.shape(0);
        const double norm = 1.0 / std::sqrt(double(m));
        project_block(b);
        for (std::size_t i = 0; i < b.rows; ++i) {
            T* e = b.out + i * b.F;
            const double x2 = sum_squares(b.X + i * b.d, b.d) * (b.xs * b.xs);
            b.row_log[i] = 0.5 * x2;
            if (b.finish_rows()) sincos_scale(e, e, e + m, m, T(epsilon()), T(norm));
        }
    }
    template <class T>
    void finish_impl(T* out, std::size_t F, std::size_t rows, const double* row_log, double shift) const {
        const std::size_t m = F / 2;
        const double norm = 1.0 / std::sqrt(double(m));
        for (std::size_t i = 0; i < rows; ++i) {
            T* e = out + i * F;
            sincos_scale(e, e, e + m, m, T(epsilon()), T(std::exp(row_log[i] - shift) * norm));
        }
    }
    void vjp(const FeatureGrad<float>& g) const override { vjp_impl(g); }
    void vjp(const FeatureGrad<double>& g) const override { vjp_impl(g); }
    std::string gradient_refusal() const override { return ""; }
    // u = W x, phi~ = [sin u + eps, cos u + eps] / sqrt m and ls = |x|^2/2 (FeatureGrad):
    // dx = W^T (g_sin o cos u - g_cos o sin u) / sqrt m + (g . phi~) x, dq = xs dx.
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const std::size_t m = g.W.shape(0);
        const double norm = 1.0 / std::sqrt(double(m));
        projection_vjp(g, [&](std::size_t i, const std::vector<double>& u, std::vector<double>& coef,
                              std::vector<double>& dx) {
            const T* G = g.G + i * g.F;
            double gp = 0.0;
            for (std::size_t f = 0; f < 2 * m; ++f) gp += double(G[f]) * double(g.phi[i * g.F + f]);
            for (std::size_t c = 0; c < g.d; ++c) dx[c] = gp * g.xs * double(g.X[i * g.d + c]);
            for (std::size_t j = 0; j < m; ++j)
                coef[j] = (double(G[j]) * std::cos(u[j]) - double(G[m + j]) * std::sin(u[j])) * norm;
        });
    }
};
}  // namespace

FeatureMapPtr make_trig(const FieldObject&, double epsilon) { return std::make_shared<TrigMap>(epsilon); }

}  // namespace favor
