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

#include "core/tile_kernels.hpp"
#include "exp_family.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/vmath.hpp"

namespace favor {

namespace {
// h (rows x m) = G o phi (mirrored: h_+ - h_-, the halves at columns j and m + j) and each
// row's sum of both halves, sum_j G_j phi_j, for `rows` rows of G and phi (ld F); vectorised,
// in a fixed order.
template <class T>
void weighted_rows(const FeatureGrad<T>& g, std::size_t m, bool mirrored, T* h, double* hsum) {
    const std::size_t F = g.F;
    for (std::size_t i = 0; i < g.rows; ++i) {
        const T* phi = g.phi + i * F;
        const T* G = g.G + i * F;
        T* hi = h + i * m;
        for (std::size_t j = 0; j < m; ++j) hi[j] = G[j] * phi[j];
        hsum[i] = sum_lanes(hi, m);
        if (!mirrored) continue;
        const T* phi2 = phi + m;
        const T* G2 = G + m;
        T s2 = T(0);
        for (std::size_t j = 0; j < m; ++j) {
            const T h2 = G2[j] * phi2[j];
            hi[j] -= h2;
            s2 += h2;
        }
        hsum[i] += double(s2);
    }
}

// dX for a dense B (sderf, aderf) or a dense G_s (aderf), in double: with u = G_s x,
// du = B W^T h - hsum u, dX = xs scale G^T du (gs = xs scale here), or gs o du for a diagonal G_s.
template <class T>
void general_rows(const FeatureGrad<T>& g, const std::vector<double>& gs, const std::vector<double>& Gd,
                  const std::vector<double>& B, double a, const T* hw_rows, const double* hsum) {
    const std::size_t d = g.d;
    const bool dense = !B.empty();
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
                for (std::size_t k = 0; k < d; ++k) bh += B[c * d + k] * double(hw[k]);
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
}  // namespace

template <class T>
void ExpFamilyMap::vjp_impl(const FeatureGrad<T>& g) const {
    if (const std::string why = gradient_refusal(); !why.empty()) no_gradient(*this, why);
    const std::size_t m = g.W.shape(0), d = g.d;
    const int s = g.side == Side::query ? 0 : 1;
    std::vector<double> gs(d, g.xs * shape_.scale[s]);   // xs G_s, diagonal
    if (!shape_.diag[s].empty())
        for (std::size_t c = 0; c < d; ++c) gs[c] *= shape_.diag[s][c];
    const std::vector<double>& Gd = shape_.dense[s];   // aderf: G_s = scale G, gs = xs scale
    const bool dense = !B_.empty();
    const double a = std::sqrt(1.0 - 4.0 * shape_.A);
    // h = g o phi for the block's rows, then W^T h as one product in the tile kernels
    // (W (m x d) as stored), in buffers the thread keeps.
    thread_local std::vector<T> h_kept, hw_kept;
    thread_local std::vector<double> hsum_kept;
    T* const h = grown(h_kept, g.rows * m);
    T* const hw_rows = grown(hw_kept, g.rows * d);
    double* const hsum = grown(hsum_kept, g.rows);
    weighted_rows(g, m, mirrored_, h, hsum);
    tiles::times(h, g.rows, m, 1, m, g.W.data(), d, d, hw_rows, d, false);
    if (!dense && Gd.empty()) {   // G_s diagonal, B = a I: dX = gs o (a W^T h - hsum gs o x), in T
        std::vector<T> gsT(gs.begin(), gs.end());
        const T aT = T(a);
        for (std::size_t i = 0; i < g.rows; ++i) {
            const T hs = T(hsum[i]);
            const T* x = g.X + i * d;
            const T* hw = hw_rows + i * d;
            T* dx = g.dX + i * d;
            for (std::size_t c = 0; c < d; ++c) dx[c] = gsT[c] * (aT * hw[c] - hs * gsT[c] * x[c]);
        }
        return;
    }
    general_rows(g, gs, Gd, B_, a, hw_rows, hsum);
}

std::string ExpFamilyMap::gradient_refusal() const {
    return epsilon() != 0.0 ? "epsilon > 0 is added after a shift that is a maximum of the exponents; use epsilon 0"
                            : "";
}

void ExpFamilyMap::vjp(const FeatureGrad<float>& g) const { vjp_impl(g); }
void ExpFamilyMap::vjp(const FeatureGrad<double>& g) const { vjp_impl(g); }

}  // namespace favor
