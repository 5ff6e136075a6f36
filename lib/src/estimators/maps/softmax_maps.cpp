// The parameter-free softmax maps over the head dimension, applied to the scaled rows
// x = q / d^{1/4} (favor's scaling of every map's input). Deterministic, no projection, F
// fixed by d; not estimators of SM (phi(x).phi(y) is a kernel of its own).
//   liger (Liger, Lan et al. 2025, arXiv 2503.01496): phi(x) = softmax(x) over the d entries,
//     F = d.
//   softmax_dim (LoLCATs' SoftmaxDim, Zhang et al. 2024, arXiv 2410.10254, untrained):
//     phi(x) = [softmax(x), softmax(-x)], each half normalised over its own d entries, F = 2d.
//     Not hedgehog (hedgehog.cpp): that is the joint softmax([2x, -2x]) over 2d entries.
#include <algorithm>
#include <cmath>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "softmax_rows.hpp"

namespace favor {

namespace {
// halves = 1: liger's softmax(x); halves = 2: softmax_dim's [softmax(x), softmax(-x)].
template <std::size_t halves>
class SoftmaxHeadMap : public FinishedMapKernels<SoftmaxHeadMap<halves>> {
public:
    using FinishedMapKernels<SoftmaxHeadMap<halves>>::FinishedMapKernels;
    std::string name() const override { return halves == 1 ? "liger" : "softmax_dim"; }
    std::size_t num_features(std::size_t, std::size_t d) const override { return halves * d; }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }
    // An exp, a sum and a division per feature.
    double feature_flops(std::size_t L, std::size_t Lk, std::size_t, std::size_t d) const override {
        return 3.0 * double(halves) * double(L + Lk) * double(d);
    }

    // Finished on both sides (row_log = 0), epsilon added after each softmax.
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        for (std::size_t i = 0; i < b.rows; ++i) {
            for (std::size_t h = 0; h < halves; ++h)
                softmax_half(b.X + i * b.d, b.d, h == 0 ? b.xs : -b.xs, this->epsilon(), b.out + i * b.F + h * b.d);
            b.row_log[i] = 0.0;
        }
    }
    // z_h = sign_h v, v = xs q: dq_c = xs sum_h sign_h dz_{h,c}.
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const std::size_t d = g.d;
        std::vector<double> dz(d);
        for (std::size_t i = 0; i < g.rows; ++i) {
            std::fill(dz.begin(), dz.end(), 0.0);
            for (std::size_t h = 0; h < halves; ++h)
                softmax_half_vjp(g.G + i * g.F + h * d, g.phi + i * g.F + h * d, d, this->epsilon(), h == 0 ? 1.0 : -1.0,
                                 dz.data());
            for (std::size_t c = 0; c < d; ++c) g.dX[i * d + c] = T(g.xs * dz[c]);
        }
    }
};
}  // namespace

FeatureMapPtr make_liger(const FieldObject&, double epsilon) { return std::make_shared<SoftmaxHeadMap<1>>(epsilon); }
FeatureMapPtr make_softmax_dim(const FieldObject&, double epsilon) {
    return std::make_shared<SoftmaxHeadMap<2>>(epsilon);
}

}  // namespace favor
