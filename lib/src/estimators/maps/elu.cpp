// elu: phi(x) = elu(x) + 1, the feature map of "Transformers are RNNs" (Katharopoulos et al.
// 2020), F = d, no random projection. Katharopoulos et al. apply it to the projected queries
// and keys as they are; here it is applied to the scaled rows x = q / d^{1/4}, as every other
// map. Not an estimator of SM: a baseline of linear attention (docs/estimators.md).
#include <cmath>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
class EluMap : public FinishedMapKernels<EluMap> {
public:
    using FinishedMapKernels::FinishedMapKernels;
    std::string name() const override { return "elu"; }
    std::size_t num_features(std::size_t, std::size_t d) const override { return d; }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }

    // elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise; finished on both sides (row_log = 0).
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const double eps = epsilon();
        for (std::size_t i = 0; i < b.rows; ++i) {
            const T* x = b.X + i * b.d;
            T* e = b.out + i * b.F;
            for (std::size_t c = 0; c < b.d; ++c) {
                const double v = b.xs * double(x[c]);
                e[c] = T((v > 0.0 ? v + 1.0 : std::exp(v)) + eps);
            }
            b.row_log[i] = 0.0;
        }
    }
    // d(elu(v) + 1)/dv = 1 for v > 0, exp(v) otherwise (v = xs q_c): dq_c = xs g_c times that.
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        for (std::size_t i = 0; i < g.rows; ++i)
            for (std::size_t c = 0; c < g.d; ++c) {
                const double v = g.xs * double(g.X[i * g.d + c]);
                g.dX[i * g.d + c] = T(g.xs * double(g.G[i * g.F + c]) * (v > 0.0 ? 1.0 : std::exp(v)));
            }
    }
};
}  // namespace

FeatureMapPtr make_elu(const FieldObject&, double epsilon) { return std::make_shared<EluMap>(epsilon); }

}  // namespace favor
