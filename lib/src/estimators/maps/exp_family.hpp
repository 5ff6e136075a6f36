#pragma once
// The positive (exponential) family shared by positive, hyperbolic, oprf, gerf, sderf and
// saderf: the dense-exponential features (DERF, arXiv 2302.00787) in the form
//   phi_s(x)_j = c exp(w_j^T A w_j + w_j^T B u - |u|^2/2 + (1/4) log det(I - 4A)),
//   u = G_s x,  B = (I - 4A)^{1/2},  c = 1/sqrt(F),
// with a per-side linear map G_s (s = query or key) such that G_query^T G_key = I, so that
// E phi_q(x) . phi_k(y) = exp((G_q x).(G_k y)) = exp(x . y) whenever 4A < I (finite variance
// needs 8A < I). A is a scalar times I (positive, hyperbolic: A = 0, Performer Lemma 1;
// oprf, gerf, saderf: FAVOR++, arXiv 2205.15317 eq. 7) or a symmetric matrix given by its
// eigen-decomposition (sderf). G_s is a scalar (gerf: t, 1/t), a diagonal (saderf: Psi,
// Psi^{-1}), a dense matrix (aderf: P, P^{-T}) or I. Hyperbolic adds the mirrored half with -w_j.
// Exponents are shifted by their max before exp (per row for queries, one constant for the
// keys), then epsilon is added (docs/estimators.md).
//
// Where epsilon goes ("epsilon_after", docs/design.md section 2.3): after subtracting the max of
// the exponents, max(w.x - |x|^2/2) ("max_exponent", favor's default), or after subtracting
// the max of the exponents without their -|x|^2/2 term, max(w.x) for positive
// ("max_wx", the official Performer code's softmax_kernel_transformation). Keys: the max over
// all keys in both cases. With epsilon = 0 the placement changes nothing. For the general
// form, "max_wx" leaves out the -|u|^2/2 term: the shift is the max of
// w^T A w + w^T B u + (1/4) log det(I - 4A).
#include <vector>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

enum class EpsilonAfter { max_exponent, max_wx };
const char* epsilon_after_name(EpsilonAfter a);
// The variant's "epsilon_after" ("max_exponent" when absent); fails naming the key otherwise.
EpsilonAfter read_epsilon_after(const FieldObject& variant);

// The parameters of one member of the family (defaults: A = 0, G_s = I, i.e. `positive`).
struct ExpShape {
    double A = 0.0;                  // scalar A (A I), A < 1/8; used when `a` is empty
    std::vector<double> a;           // or the eigenvalues a_l < 1/8 of a symmetric A ...
    std::vector<double> U;           // ... and its eigenvectors: d x d row-major, column l for a_l
    double scale[2] = {1.0, 1.0};    // G_s = scale[s] diag(diag[s]); s = 0 query, 1 key
    std::vector<double> diag[2];     // per-coordinate factors (empty: all 1)
    std::vector<double> dense[2];    // or a dense G_s / scale[s]: d x d row-major (empty: none)
};

class ExpFamilyMap : public FeatureMapKernels<ExpFamilyMap> {
public:
    ExpFamilyMap(double epsilon, double A, bool mirrored, EpsilonAfter after = EpsilonAfter::max_exponent);
    ExpFamilyMap(double epsilon, ExpShape shape, EpsilonAfter after = EpsilonAfter::max_exponent);
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
    // J^T G with the shift and the fitted parameters held fixed (exp_family_grad.cpp).
    void vjp(const FeatureGrad<float>& g) const override;
    void vjp(const FeatureGrad<double>& g) const override;
    std::string gradient_refusal() const override;

protected:
    double A() const { return shape_.A; }
    const ExpShape& shape() const { return shape_; }
    // |G_s z_i|^2 for every row z_i of Z (n, d): the norms the variance of a scalar A reads.
    std::vector<double> side_norms2(const Mat<double>& Z, Side side) const;

private:
    ExpShape shape_;
    bool mirrored_ = false;
    EpsilonAfter after_ = EpsilonAfter::max_exponent;
    // For a matrix A: A and B = (I - 4A)^{1/2} (d x d row-major) and (1/4) log det(I - 4A).
    std::vector<double> A_mat_, B_;
    double log_det_quarter_ = 0.0;
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const;
};

// --- statistics of the scaled queries X (L, d) and keys Y (Lk, d), in float64 ---------------

// Column means of X (d).
std::vector<double> column_means(const Mat<double>& X);
// Column means of the squares, mean_i x_il^2 (d).
std::vector<double> column_mean_squares(const Mat<double>& X);
// mean_i x_i x_i^T (d x d row-major), O(L d^2).
std::vector<double> second_moment(const Mat<double>& X);
// Eigenvalues (ascending) and eigenvectors (d x d row-major, column l for value l) of a
// symmetric d x d matrix (LAPACK syevd through xtensor-blas).
void symmetric_eigen(const std::vector<double>& S, std::size_t d, std::vector<double>& values,
                     std::vector<double>& vectors);
// r^{1/4} for a ratio r = num / den of two means of squares, clamped to [1e-8, 1e8] (so a
// zero column gives a large finite factor), 1 where both are 0: gerf's t and saderf's Psi_ll.
double quartic_root_ratio(double num, double den);

}  // namespace favor
