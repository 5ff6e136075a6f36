#pragma once
// The Jacobians of the feature maps, for the backward pass of linear attention
// (docs/design.md section 2.7): FeatureMap::vjp's block contract and the whole-matrix call.
#include <algorithm>
#include <string>
#include <vector>

#include "favor/core/blas.hpp"
#include "favor/core/half.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

// One block of rows for a map's vector-Jacobian product. X (rows x d) are the unscaled rows,
// x = xs * X row; phi (rows x F) their stabilised features as compute_features makes them
// (each row with its own shift); G (rows x F) a gradient with respect to phi. vjp writes
// dX (rows x d):
//   dX_i = exp(-ls_i) J_i^T G_i,  J_i = d phi(x_i) / d X_i  (the factor xs included),
// phi(x) = exp(ls(x)) phi~(x) the unstabilised features, ls_i their log scale. For the
// exp-type maps ls is the shift S_i, held fixed: exp(e(x) - S) with S a constant has the
// derivative of exp(e(x)) up to the factor exp(-S), so holding it is exact (with epsilon > 0
// the features are not exp(S) times anything fixed, and those maps refuse). For trig
// ls = |x|^2/2 is part of the features and its term (G_i . phi_i) x_i is included. Fitted
// parameters (oprf's A*, gerf's A and t, sderf's A, saderf's Psi) are held fixed, as in a
// training step where they are refitted between steps, not differentiated.
template <class T>
struct FeatureGrad {
    const T* X;
    std::size_t rows, d;
    double xs;
    const Mat<T>& W;   // (m, d)
    Side side;
    const T* phi;
    const T* G;
    std::size_t F;
    T* dX;
};

// dX (L, d) = the map's vjp of G (L, F) at the rows X (L, d) with features phi (L, F), in
// blocks of feature_block_rows() rows on up to `threads` threads (each row's result is made
// by one block: the numbers do not depend on `threads`).
template <class T>
Mat<T> feature_vjp(const FeatureMap& f, MatView<T> X, double xs, const Mat<T>& W, Side side, const Mat<T>& phi,
                   const Mat<T>& G, int threads = 1);

// The vjp of a map whose features are functions of the projections u = xs W q of a row (and
// of the row itself): for each row i, rule(i, u, coef, dx) sets coef (m) = dLoss/du and dx
// (d) = the gradient through any other path (with respect to x = xs q); then
// dX_i = xs (dx + W^T coef).
template <class T, class Rule>
void projection_vjp(const FeatureGrad<T>& g, Rule rule) {
    const std::size_t m = g.W.shape(0), d = g.d, n = g.rows;
    // The block's projections X W^T and, after the rules, coef W as products (blas.hpp).
    std::vector<T> proj(n * m), coefs(n * m), back(n * d);
    gemm<T>(false, true, n, m, d, T(1), g.X, d, g.W.data(), d, T(0), proj.data(), m);
    std::vector<double> u(m), coef(m), dx(d);
    std::vector<double> dxs(n * d);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < m; ++j) u[j] = g.xs * double(proj[i * m + j]);
        std::fill(dx.begin(), dx.end(), 0.0);
        rule(i, u, coef, dx);
        for (std::size_t j = 0; j < m; ++j) coefs[i * m + j] = T(coef[j]);
        std::copy(dx.begin(), dx.end(), dxs.begin() + std::ptrdiff_t(i * d));
    }
    gemm<T>(false, false, n, d, m, T(1), coefs.data(), m, g.W.data(), d, T(0), back.data(), d);
    for (std::size_t k = 0; k < n * d; ++k) g.dX[k] = T(g.xs * (dxs[k] + double(back[k])));
}

// Throws Error "backward: features 'NAME' have no gradient (WHY)".
[[noreturn]] void no_gradient(const FeatureMap& f, const std::string& why);

// An estimator's ready map (Estimator::ready_map) checked to have a gradient at this rounding:
// throws Error for a map's gradient_refusal() and for the emulated half dtypes (favor_backward's
// and hybrid_backward's gate).
const FeatureMap& gradient_map(const FeatureMap& ready, Rounding rounding);

}  // namespace favor
