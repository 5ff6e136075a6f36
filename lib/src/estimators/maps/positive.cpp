// positive: phi(x) = exp(-|x|^2/2)/sqrt(m) exp(Wx) (Performer Lemma 1, FAVOR+).
#include "exp_family.hpp"
#include "favor/estimators/theory.hpp"

namespace favor {

namespace {
class PositiveMap : public ExpFamilyMap {
public:
    PositiveMap(double epsilon, EpsilonAfter after) : ExpFamilyMap(epsilon, 0.0, false, after) {}
    std::string name() const override { return "positive"; }
    std::optional<double> pair_mse(double x2, double y2, double xy, std::size_t m, std::size_t) const override {
        return mse_positive_iid(x2, y2, xy, m);
    }
};
}  // namespace

FeatureMapPtr make_positive(const FieldObject& v, double epsilon) {
    return std::make_shared<PositiveMap>(epsilon, read_epsilon_after(v));
}

}  // namespace favor
