// relu: phi(x) = relu(Wx)/sqrt(m), the Performer's generalized attention (Section 2.2 with
// f = ReLU). Not an estimator of SM: it has no kernel theory and reports no kernel MSE bound.
#include <algorithm>
#include <cmath>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
class ReluMap : public FinishedMapKernels<ReluMap> {
public:
    using FinishedMapKernels::FinishedMapKernels;
    std::string name() const override { return "relu"; }
    bool estimates_softmax() const override { return false; }

    // Finished on both sides in one pass (no shift: row_log = 0).
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const std::size_t m = b.W.shape(0);
        const T c = T(1.0 / std::sqrt(double(m))), eps = T(epsilon());
        project_block(b);
        for (std::size_t i = 0; i < b.rows; ++i) {
            T* e = b.out + i * b.F;
            for (std::size_t j = 0; j < m; ++j) e[j] = (std::max(e[j], T(0)) + eps) * c;
            b.row_log[i] = 0.0;
        }
    }
    // phi = (relu(W x) + eps) / sqrt m: dq = xs W^T (g o 1[W x > 0]) / sqrt m.
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const double norm = 1.0 / std::sqrt(double(g.W.shape(0)));
        projection_vjp(g, [&](std::size_t i, const std::vector<double>& u, std::vector<double>& coef,
                              std::vector<double>&) {
            for (std::size_t j = 0; j < u.size(); ++j) coef[j] = u[j] > 0.0 ? double(g.G[i * g.F + j]) * norm : 0.0;
        });
    }
};
}  // namespace

FeatureMapPtr make_relu(const FieldObject&, double epsilon) { return std::make_shared<ReluMap>(epsilon); }

}  // namespace favor
