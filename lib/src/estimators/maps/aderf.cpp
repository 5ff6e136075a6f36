// aderf: asymmetric dense-exponential random features (FAVOR#, arXiv 2302.00787, sec. 4,
// Theorem 4.2): the DERF with a scalar A and dense B_1, B_2, B_1^T B_2 = (1-4A) I, i.e. oprf
// applied to (P x, P^{-T} y) for an invertible P (B_1 = sqrt(1-4A) P, B_2 = sqrt(1-4A) P^{-T}):
//   phi_q(x) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.(P x) - |P x|^2/2),
//   phi_k(y) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.(P^{-T} y) - |P^{-T} y|^2/2),
// unbiased for any such P because (P x).(P^{-T} y) = x.y. Fitted (docs/estimators.md, "aderf",
// has the derivation): with M_1 = mean x x^T + r_1 I, M_2 = mean y y^T + r_2 I (a ridge
// r_k = 1e-6 tr(M_k)/d keeps them nonsingular, e.g. when L < d), M_1 = Q_1 Lam_1 Q_1^T and
// Lam_1^{1/2} Q_1^T M_2 Q_1 Lam_1^{1/2} = U Sig^2 U^T,
//   P = Sig^{1/2} U^T Lam_1^{-1/2} Q_1^T,  P^{-T} = Sig^{-1/2} U^T Lam_1^{1/2} Q_1^T,
// the minimiser of tr(P M_1 P^T) + tr(P^{-T} M_2 P^{-1}) (value 2 tr Sig), and A = oprf's
// A*(rho), rho = mean |P x_i + P^{-T} y_j|^2 / d: together the minimiser of the mean over
// pairs of log E f^2 among scalar A and all P. Extra cost: O(L d^2 + d^3) to fit, O(d^2) per row.
#include <algorithm>
#include <cmath>

#include "exp_family.hpp"
#include "favor/core/blas.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
// tr(G M G^T) for d x d row-major G and M.
double sandwich_trace(const std::vector<double>& G, const std::vector<double>& M, std::size_t d) {
    std::vector<double> GM(d * d);
    gemm<double>(false, false, d, d, d, 1.0, G.data(), d, M.data(), d, 0.0, GM.data(), d);
    double t = 0.0;
    for (std::size_t r = 0; r < d; ++r)
        for (std::size_t c = 0; c < d; ++c) t += GM[r * d + c] * G[r * d + c];
    return t;
}

// M + r I with r = 1e-6 tr(M)/d (1e-300 for M = 0); returns r.
double add_ridge(std::vector<double>& M, std::size_t d) {
    double tr = 0.0;
    for (std::size_t c = 0; c < d; ++c) tr += M[c * d + c];
    const double r = tr > 0.0 ? 1e-6 * tr / double(d) : 1e-300;
    for (std::size_t c = 0; c < d; ++c) M[c * d + c] += r;
    return r;
}

struct AderfFit {
    std::vector<double> P, Pinv_t, sigma;   // P, P^{-T} (d x d), Sig (ascending)
    double ridge[2] = {0.0, 0.0};
};

// P and P^{-T} of Theorem 4.2 for the second moments M1 (queries) and M2 (keys), ridged.
AderfFit aderf_transform(std::vector<double> M1, std::vector<double> M2, std::size_t d) {
    AderfFit f;
    f.ridge[0] = add_ridge(M1, d);
    f.ridge[1] = add_ridge(M2, d);
    std::vector<double> lam, Q1;
    symmetric_eigen(M1, d, lam, Q1);
    // R = Lam_1^{1/2} Q_1^T (row l of Q_1^T scaled), N = R M_2 R^T = U Sig^2 U^T.
    std::vector<double> R(d * d), RM(d * d), N(d * d);
    for (std::size_t l = 0; l < d; ++l)
        for (std::size_t c = 0; c < d; ++c) R[l * d + c] = std::sqrt(std::max(lam[l], 0.0)) * Q1[c * d + l];
    gemm<double>(false, false, d, d, d, 1.0, R.data(), d, M2.data(), d, 0.0, RM.data(), d);
    gemm<double>(false, true, d, d, d, 1.0, RM.data(), d, R.data(), d, 0.0, N.data(), d);
    for (std::size_t r = 0; r < d; ++r)
        for (std::size_t c = 0; c < r; ++c) N[c * d + r] = N[r * d + c] = 0.5 * (N[r * d + c] + N[c * d + r]);
    std::vector<double> s2, U;
    symmetric_eigen(N, d, s2, U);
    f.sigma.resize(d);
    f.P.assign(d * d, 0.0);
    f.Pinv_t.assign(d * d, 0.0);
    for (std::size_t k = 0; k < d; ++k) {
        f.sigma[k] = std::sqrt(std::max(s2[k], 1e-300));
        const double up = std::sqrt(f.sigma[k]), down = 1.0 / up;
        // Row k: Sig_k^{±1/2} U_{:,k}^T Lam_1^{∓1/2} Q_1^T = Sig_k^{±1/2} sum_l U_lk Lam_l^{∓1} R_l.
        for (std::size_t l = 0; l < d; ++l) {
            const double ll = std::max(lam[l], 1e-300);
            for (std::size_t c = 0; c < d; ++c) {
                f.P[k * d + c] += up * U[l * d + k] / ll * R[l * d + c];
                f.Pinv_t[k * d + c] += down * U[l * d + k] * R[l * d + c];
            }
        }
    }
    return f;
}

ExpShape aderf_shape(double A, const AderfFit& f) {
    ExpShape s;
    s.A = A;
    s.dense[0] = f.P;
    s.dense[1] = f.Pinv_t;
    return s;
}

class AderfMap : public ExpFamilyMap {
public:
    // Unfitted: A = 0, P = I (the positive map) until resolve().
    AderfMap(double epsilon, EpsilonAfter after) : ExpFamilyMap(epsilon, 0.0, false, after) {}
    AderfMap(double epsilon, EpsilonAfter after, double A, AderfFit fit)
        : ExpFamilyMap(epsilon, aderf_shape(A, fit), after), fit_(std::move(fit)), fitted_(true) {}
    std::string name() const override { return "aderf"; }
    // A fitted map reports "A_fitted", "sigma" (Sig, ascending) and "ridge" (r_1, r_2).
    nlohmann::json params() const override {
        nlohmann::json p = ExpFamilyMap::params();
        if (fitted_) {
            p["A_fitted"] = A();
            p["sigma"] = fit_.sigma;
            p["ridge"] = {fit_.ridge[0], fit_.ridge[1]};
        }
        return p;
    }
    bool data_dependent() const override { return true; }
    double feature_flops(std::size_t L, std::size_t Lk, std::size_t m, std::size_t d) const override {
        return 2.0 * double(L + Lk) * double(d) * double(m + d);
    }
    FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const override {
        const std::size_t d = X.shape(1);
        const std::vector<double> M1 = second_moment(X), M2 = second_moment(Y);
        AderfFit f = aderf_transform(M1, M2, d);
        const std::vector<double> mx = column_means(X), my = column_means(Y);
        double z2 = sandwich_trace(f.P, M1, d) + sandwich_trace(f.Pinv_t, M2, d);   // unridged moments
        for (std::size_t c = 0; c < d; ++c) z2 += 2.0 * mx[c] * my[c];
        return std::make_shared<AderfMap>(epsilon(), epsilon_after(), oprf_optimal_A(z2 / double(d)), std::move(f));
    }
    // oprf's variance for (P x, P^{-T} y): per row |P x|^2 and |P^{-T} y|^2.
    PairMse pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const override {
        return [x2 = side_norms2(X, Side::query), y2 = side_norms2(Y, Side::key), A = A(), d = X.shape(1), m](
                   std::size_t i, std::size_t j, double xy) { return oprf_feature_variance(A, x2[i], y2[j], xy, d) / double(m); };
    }

private:
    AderfFit fit_;
    bool fitted_ = false;
};
}  // namespace

FeatureMapPtr make_aderf(const FieldObject& v, double epsilon) {
    return std::make_shared<AderfMap>(epsilon, read_epsilon_after(v));
}

}  // namespace favor
