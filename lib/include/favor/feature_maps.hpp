#pragma once
// Random feature maps phi with E[phi(x) . phi(y)] = SM(x, y) = exp(x . y) (design.md s. 2).
// x, y are the scaled rows q / d^{1/4}, k / d^{1/4}; W (m x d) is shared by both sides.
#include <string>
#include <vector>

#include "favor/tensor.hpp"

namespace favor {

enum class FeatureKind {
    trig,        // exp(|x|^2/2)/sqrt(m) [sin Wx, cos Wx]              (Performer eq. 2, RFF)
    positive,    // exp(-|x|^2/2)/sqrt(m) exp(Wx)                       (Lemma 1, FAVOR+)
    hyperbolic,  // exp(-|x|^2/2)/sqrt(2m) [exp(Wx), exp(-Wx)]          (Lemma 1)
    relu,        // relu(Wx)/sqrt(m): generalized attention, not an estimator of SM
    oprf,        // (1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.x - |x|^2/2)  (FAVOR++)
};

FeatureKind parse_features(const std::string& name);   // throws Error
std::string features_name(FeatureKind k);
const std::vector<std::string>& feature_names();       // without "exact"

// OPRF needs A < 1/8: E f^2 involves (1 - 8A)^(-d/2) (arXiv 2205.15317, Theorem 3.1).
constexpr double kOprfAMax = 0.125;

struct FeatureMap {
    FeatureKind kind = FeatureKind::positive;
    // Added to every stabilised feature before the 1/sqrt(m) factor, as the official code
    // does (it uses 1e-6); it biases the estimate, so it is 0 unless asked for.
    double epsilon = 0.0;
    double A = 0.0;          // oprf: the A < 1/8 in use (A = 0 is the positive map)
    bool A_optimal = false;  // oprf: A is set per input from rho (see resolve_for_inputs)

    std::size_t num_features(std::size_t m) const;   // 2m for trig and hyperbolic
    bool estimates_softmax() const { return kind != FeatureKind::relu; }
};

enum class Side { query, key };

// phi(x_i) = exp(log_scale[i]) * phi(i, :). The shift is per row for queries and one
// constant for all keys, so it cancels in D^{-1} and never changes an output (design.md).
template <class T>
struct Features {
    Mat<T> phi;                    // (L, F)
    std::vector<double> log_scale; // (L)
};

// X: (L, d) scaled rows; W: (m, d). Returns features (L, num_features(m)).
// Rows are done in blocks of feature_block_rows() on up to `threads` threads; the numbers
// do not depend on `threads`.
template <class T>
Features<T> compute_features(const FeatureMap& f, const Mat<T>& X, const Mat<T>& W, Side side,
                             int threads = 1);

// As compute_features(f, Q * input_scale, W, side), with the scaling folded into the
// product X W^T and the row norms (no scaled copy of Q). Q: (L, d); W: (m, d).
template <class T>
Features<T> compute_features_scaled(const FeatureMap& f, const Mat<T>& Q, double input_scale,
                                    const Mat<T>& W, Side side, int threads = 1);

// The building blocks of compute_features_scaled (also used by the fused forward):
// feature_block: rows of Xin (ld d, scaled by xs) -> pb (rows x F, ld F), row_max (rows).
//   Side::query: the finished features with a per-row shift, row_max[i] = log_scale[i].
//   Side::key: relu finished (row_max 0); trig: pb holds W x, row_max[i] = |x_i|^2 / 2;
//   the exp maps: pb holds the exponents, row_max[i] their row maxima.
// finish_key_block: the key features from pass 1's pb and row_max with one shift `shift`
//   (phi = exp(shift) * pb afterwards).
template <class T>
void feature_block(const FeatureMap& f, const T* Xin, std::size_t rows, std::size_t d, double xs,
                   const Mat<T>& W, Side side, T* pb, std::size_t F, double* row_max);
template <class T>
void finish_key_block(const FeatureMap& f, std::size_t m, T* pb, std::size_t F, std::size_t rows,
                      const double* row_max, double shift);

// Rows per block of the feature maps (fixed, so results never depend on the thread count).
constexpr std::size_t feature_block_rows() { return 256; }

// The map with data-dependent parameters fixed for these scaled queries X and keys Y
// (oprf "optimal": A* from rho = mean_{i,j} |x_i + y_j|^2 / d, computed in O(L d)).
template <class T>
FeatureMap resolve_for_inputs(const FeatureMap& f, const Mat<T>& X, const Mat<T>& Y);

// phi(x) . phi(y) for one pair, with the shifts undone: the kernel estimate of SM(x, y).
// x, y: (1, d); data-dependent parameters (oprf's A*) are resolved for this pair.
double kernel_estimate(const FeatureMap& f, const Mat<double>& W, const Mat<double>& x,
                       const Mat<double>& y);

// Squared row norms |x_i|^2 in double.
template <class T>
std::vector<double> row_norms2(const Mat<T>& X);

}  // namespace favor
