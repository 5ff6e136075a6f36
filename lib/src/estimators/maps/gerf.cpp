// gerf: oprf with a scalar asymmetry t between the sides, i.e. FAVOR#'s SADERF (arXiv
// 2302.00787, sec. 4) with Psi = t I; with t = 1 it is the GERF of "Chefs' Random Tables"
// (arXiv 2205.15317, sec. 3: same B, C on both sides) with s = +1, real A (docs/estimators.md,
// gerf, on the attribution). For SM(x, y) = exp(x . y), the sides
//   phi_q(x) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) t w.x - t^2 |x|^2/2),
//   phi_k(y) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A)/t w.y - |y|^2/(2 t^2)),
// i.e. B1 B2 = 1 - 4A, C_k = -B_k^2/(2(1-4A)), A < 1/8, t > 0: oprf applied to (t x, y / t),
// unbiased for any such A and t; t = 1 is oprf exactly. "optimal" (the default for both)
// minimises the mean over all query/key pairs of log E f^2 (docs/estimators.md):
//   t* = (mean|y|^2 / mean|x|^2)^{1/4}  (whatever A is),
//   A* = oprf's A*(rho), rho = (t^2 mean|x|^2 + mean|y|^2 / t^2 + 2 xbar.ybar) / d.
#include <cmath>

#include "exp_family.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
ExpShape gerf_shape(double A, double t) {
    ExpShape s;
    s.A = A;
    s.scale[0] = t;
    s.scale[1] = 1.0 / t;
    return s;
}

class GerfMap : public ExpFamilyMap {
public:
    GerfMap(double epsilon, EpsilonAfter after, double A, double t, bool A_optimal, bool t_optimal, bool fitted = false)
        : ExpFamilyMap(epsilon, gerf_shape(A, t), after), t_(t), A_optimal_(A_optimal), t_optimal_(t_optimal), fitted_(fitted) {}
    std::string name() const override { return "gerf"; }
    // "A", "t": "optimal" or the numbers given; a fitted map also reports "A_fitted", "t_fitted".
    nlohmann::json params() const override {
        auto value = [](bool optimal, double v) { return optimal ? nlohmann::json("optimal") : nlohmann::json(v); };
        nlohmann::json p = ExpFamilyMap::params();
        p["A"] = value(A_optimal_, A());
        p["t"] = value(t_optimal_, t_);
        if (fitted_) {
            p["A_fitted"] = A();
            p["t_fitted"] = t_;
        }
        return p;
    }
    bool data_dependent() const override { return A_optimal_ || t_optimal_; }
    FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const override {
        if (!data_dependent()) return shared_from_this();
        const std::size_t d = X.shape(1);
        double x2 = 0.0, y2 = 0.0, xy = 0.0;
        for (double v : column_mean_squares(X)) x2 += v;
        for (double v : column_mean_squares(Y)) y2 += v;
        const std::vector<double> mx = column_means(X), my = column_means(Y);
        for (std::size_t c = 0; c < d; ++c) xy += mx[c] * my[c];
        const double t = t_optimal_ ? quartic_root_ratio(y2, x2) : t_;
        const double A = A_optimal_ ? oprf_optimal_A((t * t * x2 + y2 / (t * t) + 2.0 * xy) / double(d)) : this->A();
        return std::make_shared<GerfMap>(epsilon(), epsilon_after(), A, t, A_optimal_, t_optimal_, true);
    }
    // oprf's variance for (t x, y / t): x.y is unchanged.
    std::optional<double> pair_mse(double x2, double y2, double xy, std::size_t m, std::size_t d) const override {
        return oprf_feature_variance(A(), t_ * t_ * x2, y2 / (t_ * t_), xy, d) / double(m);
    }

private:
    double t_;
    bool A_optimal_, t_optimal_, fitted_;
};

bool is_optimal(const FieldObject& v, const std::string& key) {
    return !v.has(key) || (v.value(key).is_string() && v.value(key).get<std::string>() == "optimal");
}
}  // namespace

FeatureMapPtr make_gerf(const FieldObject& v, double epsilon) {
    const bool A_opt = is_optimal(v, "A"), t_opt = is_optimal(v, "t");
    double A = 0.0, t = 1.0;
    if (!A_opt) {
        if (v.value("A").is_string()) v.at("A").fail("must be a number < 1/8 or \"optimal\", got " + v.value("A").dump());
        A = v.number("A", 0.0);
        if (!(A < kOprfAMax)) v.at("A").fail("must be < 1/8 (0.125), got " + v.value("A").dump());
    }
    if (!t_opt) {
        if (v.value("t").is_string()) v.at("t").fail("must be a number > 0 or \"optimal\", got " + v.value("t").dump());
        t = v.number("t", 1.0);
        if (!(t > 0.0)) v.at("t").fail("must be > 0, got " + v.value("t").dump());
    }
    return std::make_shared<GerfMap>(epsilon, read_epsilon_after(v), A, t, A_opt, t_opt);
}

}  // namespace favor
