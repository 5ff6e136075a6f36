// saderf: simplified asymmetric dense-exponential random features (FAVOR#, arXiv
// 2302.00787, sec. 4): oprf applied to (Psi x, Psi^{-1} y) with a diagonal Psi,
//   phi_q(x) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.(Psi x) - |Psi x|^2/2),
//   phi_k(y) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.(Psi^{-1} y) - |Psi^{-1} y|^2/2),
// unbiased because (Psi x).(Psi^{-1} y) = x.y. Fitted to the data:
//   Psi_ll = (mean_j y_jl^2 / mean_i x_il^2)^{1/4}  (the paper's sums when L = Lk),
//   A = oprf's A*(rho), rho = mean |Psi x_i + Psi^{-1} y_j|^2 / d
//     = (2 sum_l sqrt(mean x_l^2 mean y_l^2) + 2 xbar.ybar) / d,
// which together minimise the mean over pairs of log E f^2 among diagonal Psi and scalar A.
// Extra cost: O(L d) to fit, d multiplies per row.
#include <cmath>

#include "exp_family.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
ExpShape saderf_shape(double A, const std::vector<double>& psi) {
    ExpShape s;
    s.A = A;
    s.diag[0] = psi;
    for (double p : psi) s.diag[1].push_back(1.0 / p);
    return s;
}

class SaderfMap : public ExpFamilyMap {
public:
    // Unfitted: A = 0, Psi = I (the positive map) until resolve().
    SaderfMap(double epsilon, EpsilonAfter after) : ExpFamilyMap(epsilon, 0.0, false, after) {}
    SaderfMap(double epsilon, EpsilonAfter after, double A, const std::vector<double>& psi)
        : ExpFamilyMap(epsilon, saderf_shape(A, psi), after), fitted_(true) {}
    std::string name() const override { return "saderf"; }
    // A fitted map reports "A_fitted" and "psi_fitted" (Psi_ll).
    nlohmann::json params() const override {
        nlohmann::json p = ExpFamilyMap::params();
        if (fitted_) {
            p["A_fitted"] = A();
            p["psi_fitted"] = shape().diag[0];
        }
        return p;
    }
    bool data_dependent() const override { return true; }
    FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const override {
        const std::size_t d = X.shape(1);
        const std::vector<double> sx = column_mean_squares(X), sy = column_mean_squares(Y);
        const std::vector<double> mx = column_means(X), my = column_means(Y);
        std::vector<double> psi(d);
        double z2 = 0.0;   // mean |Psi x_i + Psi^{-1} y_j|^2
        for (std::size_t l = 0; l < d; ++l) {
            psi[l] = quartic_root_ratio(sy[l], sx[l]);
            z2 += psi[l] * psi[l] * sx[l] + sy[l] / (psi[l] * psi[l]) + 2.0 * mx[l] * my[l];
        }
        return std::make_shared<SaderfMap>(epsilon(), epsilon_after(), oprf_optimal_A(z2 / double(d)), psi);
    }
    // oprf's variance for (Psi x, Psi^{-1} y): per row |Psi x|^2 and |Psi^{-1} y|^2.
    PairMse pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const override {
        return [x2 = side_norms2(X, Side::query), y2 = side_norms2(Y, Side::key), A = A(), d = X.shape(1), m](
                   std::size_t i, std::size_t j, double xy) { return oprf_feature_variance(A, x2[i], y2[j], xy, d) / double(m); };
    }

private:
    bool fitted_ = false;
};
}  // namespace

FeatureMapPtr make_saderf(const FieldObject& v, double epsilon) {
    return std::make_shared<SaderfMap>(epsilon, read_epsilon_after(v));
}

}  // namespace favor
