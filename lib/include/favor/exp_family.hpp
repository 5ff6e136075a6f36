#pragma once
// The positive (exponential) family shared by positive, hyperbolic and oprf:
//   phi(x)_j = c exp(sqrt(1-4A) w_j.x + A |w_j|^2 - |x|^2/2 + (d/4) log(1-4A)),
// A = 0 for positive and hyperbolic (Performer Lemma 1), A < 1/8 for oprf (FAVOR++,
// arXiv 2205.15317 eq. 7); hyperbolic adds the mirrored half with -w_j. c = 1/sqrt(F).
// Exponents are shifted by their max before exp (per row for queries, one constant for the
// keys), then epsilon is added (docs/estimators.md).
//
// Where epsilon goes ("epsilon_after", docs/design.md section 2.3): after subtracting the max of
// the exponents, max(w.x - |x|^2/2) ("max_exponent", favor's default), or after subtracting
// the max of the exponents without their -|x|^2/2 term, max(w.x) for positive
// ("max_wx", the official Performer code's softmax_kernel_transformation). Keys: the max over
// all keys in both cases. With epsilon = 0 the placement changes nothing.
#include "favor/feature_maps.hpp"

namespace favor {

enum class EpsilonAfter { max_exponent, max_wx };
const char* epsilon_after_name(EpsilonAfter a);
// The variant's "epsilon_after" ("max_exponent" when absent); fails naming the key otherwise.
EpsilonAfter read_epsilon_after(const FieldObject& variant);

class ExpFamilyMap : public FeatureMapKernels<ExpFamilyMap> {
public:
    ExpFamilyMap(double epsilon, double A, bool mirrored, EpsilonAfter after = EpsilonAfter::max_exponent)
        : FeatureMapKernels(epsilon), A_(A), mirrored_(mirrored), after_(after) {}
    std::size_t num_features(std::size_t m, std::size_t) const override { return mirrored_ ? 2 * m : m; }
    bool blockwise_key_shift() const override { return epsilon() == 0.0; }
    nlohmann::json params() const override {
        return {{"epsilon", epsilon()}, {"epsilon_after", epsilon_after_name(after_)}};
    }
    EpsilonAfter epsilon_after() const { return after_; }

    template <class T>
    void block_impl(const FeatureBlock<T>& b) const;
    template <class T>
    void finish_impl(T* out, std::size_t F, std::size_t rows, const double* row_log, double shift) const;

protected:
    double A() const { return A_; }

private:
    double A_;
    bool mirrored_;
    EpsilonAfter after_;
};

}  // namespace favor
