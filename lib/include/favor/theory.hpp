#pragma once
// Closed forms for the mean squared error of the softmax-kernel estimators.
// Arguments are the scaled vectors' statistics: x2 = |x|^2, y2 = |y|^2, xy = x.y, so that
// SM(x, y) = exp(xy), |x + y|^2 = x2 + y2 + 2xy, |x - y|^2 = x2 + y2 - 2xy.
#include <cstddef>

namespace favor {

inline double z2_of(double x2, double y2, double xy) { return x2 + y2 + 2.0 * xy; }
inline double u2_of(double x2, double y2, double xy) { return x2 + y2 - 2.0 * xy; }

// Lemma 2: MSE(SM_trig) = exp(|z|^2) SM^-2 (1 - exp(-|u|^2))^2 / (2m), iid W.
double mse_trig_iid(double x2, double y2, double xy, std::size_t m);
// Lemma 2: MSE(SM_pos) = exp(|z|^2) SM^2 (1 - exp(-|z|^2)) / m, iid W.
double mse_positive_iid(double x2, double y2, double xy, std::size_t m);
// Lemma 2: MSE(SM_hyp) = (1 - exp(-|z|^2)) MSE(SM_pos) / 2, iid W.
double mse_hyperbolic_iid(double x2, double y2, double xy, std::size_t m);

// Theorem 2 upper bound on MSE of the positive estimator with orthogonal (chi-norm) W:
//   MSE_pos(m) - 2 (m-1) / (m (d+2)) (SM - exp(-(|x|^2+|y|^2)/2))^2   for m <= d,
// extended to m > d over independent blocks of d rows (last block of m mod d rows):
//   MSE_pos(m) - 2 c^2 sum_b n_b (n_b - 1) / ((d + 2) m^2).
double theorem2_bound(double x2, double y2, double xy, std::size_t m, std::size_t d);

// OPRF needs A < 1/8: E f^2 involves (1 - 8A)^(-d/2) (arXiv 2205.15317, Theorem 3.1).
constexpr double kOprfAMax = 0.125;

// FAVOR++ (OPRF, arXiv 2205.15317): variance of ONE feature
//   (1-4A)^d (1-8A)^(-d/2) exp(2(1-4A)|z|^2/(1-8A) - |x|^2 - |y|^2) - SM^2,   A < 1/8.
// (A = 0 gives m * MSE_pos.) The m-feature iid MSE is this over m.
double oprf_feature_variance(double A, double x2, double y2, double xy, std::size_t d);
// The A minimising the variance averaged over pairs with mean |x+y|^2 / d = rho:
//   A* = (1 - 2 rho - sqrt((2 rho + 1)^2 + 8 rho)) / 16.
double oprf_optimal_A(double rho);

}  // namespace favor
