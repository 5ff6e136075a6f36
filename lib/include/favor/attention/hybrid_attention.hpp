#pragma once
// Hybrid attention (docs/design.md section 2.8): the exact kernel on each row's support (a
// sliding window and sink tokens, or the oracle top-k), a feature map's estimate on the other
// visible keys, one normaliser over both:
//   Out_i = sum_j K_ij v_j / sum_j K_ij,  K_ij = exp(x_i.y_j) on E(i), phi(x_i).phi(y_j) elsewhere.
// This is the reference path: every query row against all its visible keys, O(L Lk (d + F)).
#include <cstddef>
#include <vector>

#include "favor/attention/backward_exact.hpp"
#include "favor/attention/pairwise_pass.hpp"
#include "favor/core/tensor.hpp"

namespace favor {

template <class T>
struct Estimator;

// The rows `rows` (positions in Q, ascending) of the hybrid estimate, in that order; every row
// of Q when `rows` is null. est.hybrid is the support; est.map the remainder ("none": no remainder).
// Rows are independent and each is made on one thread in key order, so the numbers do not
// depend on `threads`, and a row is bitwise the same whichever rows are asked with it.
// Scores and feature products in T (half dtypes: scores and the output rounded, the features
// as compute_features rounds them); the shift, the weights and the sums in double.
template <class T>
Mat<T> hybrid_attention(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal = false,
                        int threads = 1, const std::vector<std::size_t>* rows = nullptr);

// Row i's kernel estimates K_ij over keys j < Lk (0 where j is not visible), the shift undone:
// exp(x_i.y_j) on the support, phi(x_i).phi(y_j) elsewhere (tests: Monte Carlo unbiasedness).
template <class T>
std::vector<double> hybrid_kernel_row(const Estimator<T>& est, MatView<T> Q, MatView<T> K, std::size_t i,
                                      bool causal = false);

// The exact gradient of the reference path's output (docs/design.md 2.8) for the upstream
// gradient G (L, dv): with K_ij the kernel above, D_i = sum_j K_ij and A_ij = K_ij / D_i,
//   dV_j = sum_i A_ij G_i,  dLoss/dK_ij = (G_i.v_j - G_i.Out_i) / D_i,
// on the support dLoss/ds_ij = dLoss/dK_ij K_ij (s_ij = q_i.k_j / sqrt(d)), off it through
// phi(x_i).phi(y_j) and the map's vjp (FeatureMap::vjp; W and fitted parameters held fixed,
// the support held fixed: top-k's choice is piecewise constant). est must be fitted
// (for_inputs); the features are made with their shifts whatever est.shift says (the
// gradient is the same, as favor_backward). Sums in double; each row of dQ is made by one
// thread in key order, each row of dK and dV by one thread in query order: the numbers do not
// depend on `threads`. Throws Error for maps with a gradient_refusal(), the half dtypes and
// shapes that do not fit (check_backward_shapes).
template <class T>
Gradients<T> hybrid_backward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                             const Mat<T>& G, bool causal = false, int threads = 1);

// The pairwise sums (pairwise_pass.hpp) of each query row asked (`rows` as hybrid_attention's;
// null: all rows), in that order, of the hybrid's explicit A_hat_ij = K_ij / D_i against exact
// softmax A_ij = exp(x_i.y_j - max_i) / z_i over the row's visible keys (causal: j <= i):
// attention (sum (A - A_hat)^2), tv (1/2 sum |A - A_hat|), kl (sum A log(A / A_hat), from the
// scores; kl_undefined when some A_hat <= 0 or NaN), negative (A_hat not >= 0), kernel
// (sum (exp(x.y) - K_ij)^2), pairs, rows = 1; theory stays 0 (kernel_mse_theory is blank for
// hybrids). X: the asked rows of Q scaled by d^{-1/4} in double (row r for the r-th row asked),
// Y: K scaled. Each row's exact max and sum are made from its own scores in key order, so a row
// is bitwise the same whichever rows are asked with it (softmax_rows' BLAS tiles need not be).
template <class T>
std::vector<PairwiseSums> hybrid_pairwise(const Estimator<T>& est, MatView<T> Q, MatView<T> K, const Mat<double>& X,
                                          const Mat<double>& Y, const PairwiseRequest& req, int threads = 1,
                                          const std::vector<std::size_t>* rows = nullptr);

}  // namespace favor
