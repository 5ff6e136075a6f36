// hedgehog: the feature map of Hedgehog (Zhang et al. 2024, arXiv 2402.04347) with its trained
// linear layer left out (untrained), as a baseline: phi(x) = softmax([2x, -2x]) over the 2d
// entries, F = 2d, applied to the scaled rows x = q / d^{1/4}. Deterministic, no projection.
// Not an estimator of SM (phi(x).phi(y) is no kernel of SM's form): a linear-attention
// baseline like elu and dpfp. With "weights" a hedgehog variant is the fitted map instead
// (fitted.cpp: [softmax(xA + b), softmax(-(xA + b))], each half normalised alone).
#include <algorithm>
#include <cmath>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
class HedgehogMap : public FinishedMapKernels<HedgehogMap> {
public:
    using FinishedMapKernels::FinishedMapKernels;
    std::string name() const override { return "hedgehog"; }
    std::size_t num_features(std::size_t, std::size_t d) const override { return 2 * d; }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }
    double feature_flops(std::size_t L, std::size_t Lk, std::size_t, std::size_t d) const override {
        return 4.0 * double(L + Lk) * double(d);
    }

    // The softmax shifted by max |2x_c| (exact: it is normalised); finished on both sides
    // (row_log = 0), epsilon added after it.
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const std::size_t d = b.d;
        for (std::size_t i = 0; i < b.rows; ++i) {
            const T* x = b.X + i * d;
            T* e = b.out + i * b.F;
            double top = 0.0, sum = 0.0;
            for (std::size_t c = 0; c < d; ++c) top = std::max(top, std::fabs(2.0 * b.xs * double(x[c])));
            std::vector<double> p(2 * d);
            for (std::size_t c = 0; c < d; ++c) {
                const double z = 2.0 * b.xs * double(x[c]);
                p[c] = std::exp(z - top);
                p[d + c] = std::exp(-z - top);
                sum += p[c] + p[d + c];
            }
            for (std::size_t f = 0; f < 2 * d; ++f) e[f] = T(p[f] / sum + epsilon());
            b.row_log[i] = 0.0;
        }
    }
    // Softmax: dz_f = p_f (g_f - sum_k g_k p_k), p = phi - epsilon; z = [2v, -2v], v = xs q:
    // dq_c = xs 2 (dz_c - dz_{d+c}).
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const std::size_t d = g.d;
        for (std::size_t i = 0; i < g.rows; ++i) {
            const T* G = g.G + i * g.F;
            const T* phi = g.phi + i * g.F;
            double gp = 0.0;
            for (std::size_t f = 0; f < 2 * d; ++f) gp += double(G[f]) * (double(phi[f]) - epsilon());
            for (std::size_t c = 0; c < d; ++c) {
                const double dz1 = (double(phi[c]) - epsilon()) * (double(G[c]) - gp);
                const double dz2 = (double(phi[d + c]) - epsilon()) * (double(G[d + c]) - gp);
                g.dX[i * d + c] = T(g.xs * 2.0 * (dz1 - dz2));
            }
        }
    }
};
}  // namespace

FeatureMapPtr make_fitted_hedgehog(const FieldObject& v, double epsilon);   // fitted.cpp

// With "weights": the fitted map (fitted.cpp), the paper's separately normalised halves.
FeatureMapPtr make_hedgehog(const FieldObject& v, double epsilon) {
    if (v.has("weights")) return make_fitted_hedgehog(v, epsilon);
    return std::make_shared<HedgehogMap>(epsilon);
}

}  // namespace favor
