// hyperbolic: phi(x) = exp(-|x|^2/2)/sqrt(2m) [exp(Wx), exp(-Wx)] (Performer Lemma 1).
#include "exp_family.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
class HyperbolicMap : public ExpFamilyMap {
public:
    HyperbolicMap(double epsilon, EpsilonAfter after) : ExpFamilyMap(epsilon, 0.0, true, after) {}
    std::string name() const override { return "hyperbolic"; }
    std::optional<double> pair_mse(double x2, double y2, double xy, std::size_t m, std::size_t) const override {
        return mse_hyperbolic_iid(x2, y2, xy, m);
    }
};
}  // namespace

FeatureMapPtr make_hyperbolic(const FieldObject& v, double epsilon) {
    return std::make_shared<HyperbolicMap>(epsilon, read_epsilon_after(v));
}

}  // namespace favor
