// FeatureMap::vjp's default (no gradient) and the whole-matrix vjp (favor/estimators/feature_grad.hpp).
#include "favor/estimators/feature_grad.hpp"

#include <algorithm>

#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"

namespace favor {

[[noreturn]] void no_gradient(const FeatureMap& f, const std::string& why) {
    throw Error("backward: features '" + f.name() + "' have no gradient (" + why + ")");
}

const FeatureMap& gradient_map(const FeatureMap& f, Rounding rounding) {
    if (const std::string why = f.gradient_refusal(); !why.empty()) no_gradient(f, why);
    if (rounding != Rounding::none) throw Error("backward: no gradient for the emulated half dtypes");
    return f;
}

void FeatureMap::vjp(const FeatureGrad<float>&) const { no_gradient(*this, gradient_refusal()); }
void FeatureMap::vjp(const FeatureGrad<double>&) const { no_gradient(*this, gradient_refusal()); }

template <class T>
Mat<T> feature_vjp(const FeatureMap& f, MatView<T> X, double xs, const Mat<T>& W, Side side, const Mat<T>& phi,
                   const Mat<T>& G, int threads) {
    const std::size_t L = X.shape(0), d = X.shape(1), F = phi.shape(1), B = feature_block_rows();
    Mat<T> dX = Mat<T>::from_shape({L, d});
    parallel_for((L + B - 1) / B, threads, [&](std::size_t b) {
        const std::size_t r0 = b * B, rows = std::min(B, L - r0);
        f.vjp(FeatureGrad<T>{X.data() + r0 * d, rows, d, xs, W, side, phi.data() + r0 * F, G.data() + r0 * F, F,
                             dX.data() + r0 * d});
    });
    return dX;
}

template Mat<float> feature_vjp(const FeatureMap&, MatView<float>, double, const Mat<float>&, Side,
                                const Mat<float>&, const Mat<float>&, int);
template Mat<double> feature_vjp(const FeatureMap&, MatView<double>, double, const Mat<double>&, Side,
                                 const Mat<double>&, const Mat<double>&, int);

}  // namespace favor
