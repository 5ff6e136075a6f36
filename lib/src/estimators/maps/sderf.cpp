// sderf: symmetric dense-exponential random features (FAVOR#, arXiv 2302.00787, sec. 4):
//   phi(x) = det(I-4A)^{1/4}/sqrt(m) exp(w^T A w + w^T (I-4A)^{1/2} x - |x|^2/2)
// on both sides, with a symmetric matrix A (8A < I), fitted to the data: U, lam the
// eigen-decomposition of M = mean over all pairs (x_i + y_j)(x_i + y_j)^T
// = mean x x^T + mean y y^T + xbar ybar^T + ybar xbar^T, A = U diag(a) U^T with
// a_l = oprf's A*(lam_l) = (1 - 2 lam_l - sqrt((2 lam_l + 1)^2 + 8 lam_l)) / 16, the
// minimiser of the mean over pairs of log E f^2. Unbiased for any such A. Extra cost:
// O(L d^2 + d^3) to fit, O(d^2) per row and O(m d^2) per block of rows.
#include <cmath>

#include "sderf.hpp"

#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
ExpShape sderf_shape(std::vector<double> a, std::vector<double> U) {
    ExpShape s;
    s.a = std::move(a);
    s.U = std::move(U);
    return s;
}

class SderfMap : public ExpFamilyMap {
public:
    // Unfitted: A = 0 (the positive map) until resolve().
    SderfMap(double epsilon, EpsilonAfter after, SderfNames names) : ExpFamilyMap(epsilon, 0.0, false, after), names_(names) {}
    SderfMap(double epsilon, EpsilonAfter after, SderfNames names, std::vector<double> a, std::vector<double> U,
             std::vector<double> lam)
        : ExpFamilyMap(epsilon, sderf_shape(std::move(a), std::move(U)), after), lam_(std::move(lam)), names_(names),
          fitted_(true) {}
    std::string name() const override { return names_ == SderfNames::dark ? "dark" : "sderf"; }
    // A fitted map reports the eigenvalues a_l of A and lam_l of M (ascending); as `dark`,
    // those of Sigma = I - 4A and of C = M (dark.cpp).
    nlohmann::json params() const override {
        nlohmann::json p = ExpFamilyMap::params();
        if (fitted_ && names_ == SderfNames::dark) {
            std::vector<double> sigma(shape().a.size());
            for (std::size_t l = 0; l < sigma.size(); ++l) sigma[l] = 1.0 - 4.0 * shape().a[l];
            p["Sigma_eigenvalues"] = sigma;
            p["C_eigenvalues"] = lam_;
        } else if (fitted_) {
            p["A_eigenvalues"] = shape().a;
            p["M_eigenvalues"] = lam_;
        }
        return p;
    }
    bool data_dependent() const override { return true; }
    FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const override {
        const std::size_t d = X.shape(1);
        std::vector<double> M = second_moment(X);
        const std::vector<double> Syy = second_moment(Y), mx = column_means(X), my = column_means(Y);
        for (std::size_t r = 0; r < d; ++r)
            for (std::size_t c = 0; c < d; ++c) M[r * d + c] += Syy[r * d + c] + mx[r] * my[c] + my[r] * mx[c];
        std::vector<double> lam, U;
        symmetric_eigen(M, d, lam, U);
        std::vector<double> a(d);
        for (std::size_t l = 0; l < d; ++l) {
            lam[l] = std::max(lam[l], 0.0);   // M is positive semi-definite; rounding may not be
            a[l] = oprf_optimal_A(lam[l]);
        }
        return std::make_shared<SderfMap>(epsilon(), epsilon_after(), names_, std::move(a), std::move(U), std::move(lam));
    }
    // Var f = SM^2 (exp(S) - 1), S = sum_l [log(1-4a_l) - log(1-8a_l)/2 + (U^T z)_l^2 / (1-8a_l)],
    // z = x + y (the DERF variance of arXiv 2302.00787 with B = (I-4A)^{1/2}, C = -I/2).
    // Per row: p = N^{1/2} x with N^{1/2} = U diag((1-8a)^{-1/2}) U^T, so z^T N z = |p_x + p_y|^2.
    PairMse pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const override {
        const std::size_t d = X.shape(1);
        const std::vector<double>& a = shape().a;
        std::vector<double> a0;
        const std::vector<double>* av = &a;
        std::vector<double> U = shape().U;
        if (a.empty()) {   // unfitted: A = 0
            a0.assign(d, 0.0);
            av = &a0;
            U.assign(d * d, 0.0);
            for (std::size_t c = 0; c < d; ++c) U[c * d + c] = 1.0;
        }
        double c0 = 0.0;
        std::vector<double> root(d * d, 0.0);
        for (std::size_t l = 0; l < d; ++l) {
            const double al = (*av)[l], s = 1.0 / std::sqrt(1.0 - 8.0 * al);
            c0 += std::log1p(-4.0 * al) - 0.5 * std::log1p(-8.0 * al);
            for (std::size_t r = 0; r < d; ++r)
                for (std::size_t c = 0; c < d; ++c) root[r * d + c] += s * U[r * d + l] * U[c * d + l];
        }
        auto transform = [&](const Mat<double>& Z) {
            std::vector<double> P(Z.shape(0) * d, 0.0);
            for (std::size_t i = 0; i < Z.shape(0); ++i)
                for (std::size_t r = 0; r < d; ++r) {
                    double t = 0.0;
                    for (std::size_t c = 0; c < d; ++c) t += root[r * d + c] * Z(i, c);
                    P[i * d + r] = t;
                }
            return P;
        };
        return [px = transform(X), py = transform(Y), c0, d, m](std::size_t i, std::size_t j, double xy) {
            double s = c0;
            for (std::size_t c = 0; c < d; ++c) {
                const double z = px[i * d + c] + py[j * d + c];
                s += z * z;
            }
            return std::exp(2.0 * xy) * std::expm1(s) / double(m);
        };
    }

private:
    std::vector<double> lam_;
    SderfNames names_ = SderfNames::sderf;
    bool fitted_ = false;
};
}  // namespace

FeatureMapPtr make_sderf_map(const FieldObject& v, double epsilon, SderfNames names) {
    return std::make_shared<SderfMap>(epsilon, read_epsilon_after(v), names);
}

FeatureMapPtr make_sderf(const FieldObject& v, double epsilon) { return make_sderf_map(v, epsilon, SderfNames::sderf); }

}  // namespace favor
