// oprf: optimal positive random features, FAVOR++ ("Chefs' Random Tables", arXiv 2205.15317):
//   phi(x) = (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.x - |x|^2/2),  A < 1/8,
// unbiased for any such A (A = 0 is the positive map). "A": "optimal" (the default) takes
// A* = (1 - 2 rho - sqrt((2 rho + 1)^2 + 8 rho)) / 16, rho = mean_{i,j} |x_i + y_j|^2 / d.
#include "exp_family.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
class OprfMap : public ExpFamilyMap {
public:
    OprfMap(double epsilon, EpsilonAfter after, double A, bool optimal, bool fitted = false)
        : ExpFamilyMap(epsilon, A, false, after), optimal_(optimal), fitted_(fitted) {}
    std::string name() const override { return "oprf"; }
    // "A": "optimal" or the number given; a fitted optimal map also reports "A_fitted": A*.
    nlohmann::json params() const override {
        nlohmann::json p = ExpFamilyMap::params();
        p["A"] = optimal_ ? nlohmann::json("optimal") : nlohmann::json(A());
        if (fitted_) p["A_fitted"] = A();
        return p;
    }
    bool data_dependent() const override { return optimal_; }
    FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const override {
        if (!optimal_) return shared_from_this();
        return std::make_shared<OprfMap>(epsilon(), epsilon_after(), oprf_optimal_A(mean_pair_sum_norm2(X, Y) / double(X.shape(1))), true,
                                         true);
    }
    std::optional<double> pair_mse(double x2, double y2, double xy, std::size_t m, std::size_t d) const override {
        return oprf_feature_variance(A(), x2, y2, xy, d) / double(m);
    }

private:
    bool optimal_, fitted_;
};
}  // namespace

FeatureMapPtr make_oprf(const FieldObject& v, double epsilon) {
    const EpsilonAfter after = read_epsilon_after(v);
    if (!v.has("A") || (v.value("A").is_string() && v.value("A").get<std::string>() == "optimal"))
        return std::make_shared<OprfMap>(epsilon, after, 0.0, true);
    if (v.value("A").is_string())
        v.at("A").fail("must be a number < 1/8 or \"optimal\", got " + v.value("A").dump());
    const double A = v.number("A", 0.0);
    if (!(A < kOprfAMax)) v.at("A").fail("must be < 1/8 (0.125), got " + v.value("A").dump());
    return std::make_shared<OprfMap>(epsilon, after, A, false);
}

}  // namespace favor
