// The Jacobian of the exp family's features (exp_family.hpp) for the backward pass,
// docs/design.md section 2.7. With u = G_s x (x = xs q) and
//   e_j = w_j^T A w_j + w_j^T B u - |u|^2/2 + (1/4) log det(I - 4A),  phi_j = exp(e_j - S) / sqrt(F),
// de_j/du = B w_j - u, so for h_j = g_j phi_j
//   J^T g = G_s^T (B W^T h - (sum_j h_j) u)  (times xs for the unscaled row q; G_s diagonal,
//   or dense for aderf);
// the mirrored half of hyperbolic has e_{m+j} with -w_j (B = I), giving W^T (h_+ - h_-).
// S (the shift), A, B, G_s (oprf's A*, gerf's A and t, sderf's A, saderf's Psi) are held
// fixed: the gradient of a training step, where fitted values are refitted, not differentiated.
#include <cmath>

#include "exp_family.hpp"
#include "favor/blas.hpp"

namespace favor {

template <class T>
void ExpFamilyMap::vjp_impl(const FeatureGrad<T>& g) const {
    if (const std::string why = gradient_refusal(); !why.empty()) no_gradient(*this, why);
    const std::size_t m = g.W.shape(0), d = g.d, F = g.F;
    const int s = g.side == Side::query ? 0 : 1;
    std::vector<double> gs(d, g.xs * shape_.scale[s]);   // xs G_s, diagonal
    if (!shape_.diag[s].empty())
        for (std::size_t c = 0; c < d; ++c) gs[c] *= shape_.diag[s][c];
    const std::vector<double>& Gd = shape_.dense[s];   // aderf: G_s = scale G, gs = xs scale
    const bool dense = !B_.empty();
    const double a = std::sqrt(1.0 - 4.0 * shape_.A);
    // h_j = g_j phi_j (mirrored: h_+ - h_-) for the block's rows, then W^T h as one product.
    std::vector<T> h(g.rows * m), hw_rows(g.rows * d);
    std::vector<double> hsum(g.rows, 0.0);
    for (std::size_t i = 0; i < g.rows; ++i) {
        const T* phi = g.phi + i * F;
        const T* G = g.G + i * F;
        for (std::size_t j = 0; j < m; ++j) {
            double coef = double(G[j]) * double(phi[j]);
            hsum[i] += coef;
            if (mirrored_) {
                const double h2 = double(G[m + j]) * double(phi[m + j]);
                hsum[i] += h2;
                coef -= h2;
            }
            h[i * m + j] = T(coef);
        }
    }
    gemm<T>(false, false, g.rows, d, m, T(1), h.data(), m, g.W.data(), d, T(0), hw_rows.data(), d);
    std::vector<double> u(d), du(d);
    for (std::size_t i = 0; i < g.rows; ++i) {
        const T* hw = &hw_rows[i * d];
        for (std::size_t c = 0; c < d; ++c) {
            u[c] = gs[c] * double(g.X[i * d + c]);
            if (!Gd.empty()) {
                u[c] = 0.0;
                for (std::size_t k = 0; k < d; ++k) u[c] += gs[c] * Gd[c * d + k] * double(g.X[i * d + k]);
            }
            double bh = a * double(hw[c]);
            if (dense) {
                bh = 0.0;
                for (std::size_t k = 0; k < d; ++k) bh += B_[c * d + k] * double(hw[k]);
            }
            du[c] = bh - hsum[i] * u[c];
        }
        if (Gd.empty()) {
            for (std::size_t c = 0; c < d; ++c) g.dX[i * d + c] = T(gs[c] * du[c]);
            continue;
        }
        for (std::size_t c = 0; c < d; ++c) {   // xs scale G^T du
            double t = 0.0;
            for (std::size_t r = 0; r < d; ++r) t += Gd[r * d + c] * du[r];
            g.dX[i * d + c] = T(gs[c] * t);
        }
    }
}

std::string ExpFamilyMap::gradient_refusal() const {
    return epsilon() != 0.0 ? "epsilon > 0 is added after a shift that is a maximum of the exponents; use epsilon 0"
                            : "";
}

void ExpFamilyMap::vjp(const FeatureGrad<float>& g) const { vjp_impl(g); }
void ExpFamilyMap::vjp(const FeatureGrad<double>& g) const { vjp_impl(g); }

}  // namespace favor
