// none: no features, the remainder of a hybrid that has none (docs/design.md section 2.8):
// {"features": "none", "window": w} is sliding-window softmax. Not in the registry (alone it
// is no estimator: a row would have no keys); parse_variant makes it with a window or sinks,
// and hybrid_attention never asks it for features.
#include <algorithm>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
class NoneMap : public FeatureMapKernels<NoneMap> {
public:
    using FeatureMapKernels::FeatureMapKernels;
    std::string name() const override { return "none"; }
    std::size_t num_features(std::size_t, std::size_t) const override { return 0; }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }
    bool is_kernel() const override { return false; }
    nlohmann::json params() const override { return nlohmann::json::object(); }
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        for (std::size_t i = 0; i < b.rows; ++i) b.row_log[i] = 0.0;
    }
    template <class T>
    void finish_impl(T*, std::size_t, std::size_t, const double*, double) const {}
    // No features, so nothing flows through them: a window-only hybrid's gradient is its
    // exact part alone (hybrid_backward); the vjp of the empty Jacobian is 0.
    std::string gradient_refusal() const override { return ""; }
    void vjp(const FeatureGrad<float>& g) const override { std::fill(g.dX, g.dX + g.rows * g.d, 0.0f); }
    void vjp(const FeatureGrad<double>& g) const override { std::fill(g.dX, g.dX + g.rows * g.d, 0.0); }
};
}  // namespace

FeatureMapPtr make_none_map() { return std::make_shared<NoneMap>(0.0); }

}  // namespace favor
