#pragma once
// The positive (exponential) family shared by positive, hyperbolic and oprf:
//   phi(x)_j = c exp(sqrt(1-4A) w_j.x + A |w_j|^2 - |x|^2/2 + (d/4) log(1-4A)),
// A = 0 for positive and hyperbolic (Performer Lemma 1), A < 1/8 for oprf (FAVOR++,
// arXiv 2205.15317 eq. 7); hyperbolic adds the mirrored half with -w_j. c = 1/sqrt(F).
// Exponents are shifted by their max before exp (per row for queries, one constant for the
// keys), then epsilon is added (docs/estimators.md).
#include "favor/feature_maps.hpp"

namespace favor {

class ExpFamilyMap : public FeatureMapKernels<ExpFamilyMap> {
public:
    ExpFamilyMap(double epsilon, double A, bool mirrored)
        : FeatureMapKernels(epsilon), A_(A), mirrored_(mirrored) {}
    std::size_t num_features(std::size_t m, std::size_t) const override { return mirrored_ ? 2 * m : m; }
    bool blockwise_key_shift() const override { return epsilon() == 0.0; }

    template <class T>
    void block_impl(const FeatureBlock<T>& b) const;
    template <class T>
    void finish_impl(T* out, std::size_t F, std::size_t rows, const double* row_log, double shift) const;

protected:
    double A() const { return A_; }

private:
    double A_;
    bool mirrored_;
};

}  // namespace favor
