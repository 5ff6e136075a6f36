#pragma once
// Hybrid attention (docs/design.md section 2.8): the exact kernel on each row's support (a
// sliding window and sink tokens, or the oracle top-k), a feature map's estimate on the other
// visible keys, one normaliser over both:
//   Out_i = sum_j K_ij v_j / sum_j K_ij,  K_ij = exp(x_i.y_j) on E(i), phi(x_i).phi(y_j) elsewhere.
// This is the reference path: every query row against all its visible keys, O(L Lk (d + F)).
#include <cstddef>
#include <vector>

#include "favor/tensor.hpp"

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

}  // namespace favor
