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

namespace favor {

// Fixed row norms (orthogonal-fixed, hadamard-fixed; Demni & Kadri, arXiv 2310.07370): a row
// w uniform on the sphere of radius sqrt(p) in R^p has E exp(w.v) = 0F1(; p/2; p|v|^2/4)
// = Gamma(p/2) (2/r)^(p/2-1) I_{p/2-1}(r) and E cos(w.v) = 0F1(; p/2; -p|v|^2/4)
// = Gamma(p/2) (2/r)^(p/2-1) J_{p/2-1}(r), r = sqrt(p)|v| (a Bessel kernel, not SM).
// log 0F1(; b; s) for s >= 0, b > 0: the series sum_k s^k / ((b)_k k!) summed around its
// largest term, so it neither overflows nor loses digits (all terms are positive).
double log_hyp0f1(double b, double s);
// 0F1(; b; -s) for s >= 0, b > 0: the alternating series while s <= b + 1 (terms then decrease
// from the first, so at most a digit cancels), else Gamma(b) s^((1-b)/2) J_{b-1}(2 sqrt(s))
// with std::cyl_bessel_j in float64 (b = 1/2: cos(2 sqrt(s)), where the order is negative).
double hyp0f1_neg(double b, double s);
// E[phi(x).phi(y)] / SM(x, y) for the positive (and hyperbolic) map with rows uniform on the
// sphere of radius sqrt(p) in R^p (p = d for a square block):
//   exp(-(|x|^2 + |y|^2)/2) 0F1(; p/2; p|z|^2/4) / exp(x.y) = exp(log 0F1 - |z|^2/2).
double fixed_norm_positive_ratio(double x2, double y2, double xy, std::size_t p);
// The same for trig: exp((|x|^2 + |y|^2)/2) 0F1(; p/2; -p|u|^2/4) / exp(x.y)
//   = exp(|u|^2/2) 0F1(; p/2; -p|u|^2/4), u = x - y.
double fixed_norm_trig_ratio(double x2, double y2, double xy, std::size_t p);

}  // namespace favor
