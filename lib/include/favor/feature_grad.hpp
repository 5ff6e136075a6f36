#pragma once
// The Jacobians of the feature maps, for the backward pass of linear attention
// (docs/design.md section 2.7): FeatureMap::vjp's block contract and the whole-matrix call.
#include <algorithm>
#include <string>
#include <vector>

#include "favor/feature_maps.hpp"
#include "favor/tensor.hpp"

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
Mat<T> feature_vjp(const FeatureMap& f, const Mat<T>& X, double xs, const Mat<T>& W, Side side, const Mat<T>& phi,
                   const Mat<T>& G, int threads = 1);

// The vjp of a map whose features are functions of the projections u = xs W q of a row (and
// of the row itself): for each row i, rule(i, u, coef, dx) sets coef (m) = dLoss/du and dx
// (d) = the gradient through any other path (with respect to x = xs q); then
// dX_i = xs (dx + W^T coef).
template <class T, class Rule>
void projection_vjp(const FeatureGrad<T>& g, Rule rule) {
    const std::size_t m = g.W.shape(0), d = g.d;
    std::vector<double> u(m), coef(m), dx(d);
    for (std::size_t i = 0; i < g.rows; ++i) {
        const T* q = g.X + i * d;
        for (std::size_t j = 0; j < m; ++j) {
            double s = 0.0;
            for (std::size_t c = 0; c < d; ++c) s += double(g.W(j, c)) * double(q[c]);
            u[j] = g.xs * s;
        }
        std::fill(dx.begin(), dx.end(), 0.0);
        rule(i, u, coef, dx);
        for (std::size_t j = 0; j < m; ++j)
            for (std::size_t c = 0; c < d; ++c) dx[c] += coef[j] * double(g.W(j, c));
        for (std::size_t c = 0; c < d; ++c) g.dX[i * d + c] = T(g.xs * dx[c]);
    }
}

// Throws Error "backward: features 'NAME' have no gradient (WHY)".
[[noreturn]] void no_gradient(const FeatureMap& f, const std::string& why);

}  // namespace favor
