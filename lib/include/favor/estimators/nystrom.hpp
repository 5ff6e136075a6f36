#pragma once
// The pieces of the Nystromformer baseline (Xiong et al. 2021, arXiv 2102.03902), the feature
// map "nystrom" (lib/src/estimators/maps/nystrom.cpp): landmarks, row softmax and the pseudo-inverses.
// docs/estimators.md has the formulas.
#include <cstddef>

#include "favor/core/tensor.hpp"

namespace favor {

// The m landmarks of the rows of X (L, d): segment l is rows [floor(l L / m),
// floor((l + 1) L / m)), its landmark the mean of those rows (the reference code's reshape and
// mean when m divides L). Needs 1 <= m <= L. Returns (m, d).
Mat<double> segment_means(const Mat<double>& X, std::size_t m);

// Each row of S replaced by softmax(row) (its max subtracted before exp).
Mat<double> softmax_rows(Mat<double> S);

// The iterative pseudo-inverse of the Nystromformer (after Razavi et al. 2014), as its
// reference code computes it: Z_0 = A^T / (|A|_1 |A|_inf) (max column sum times max row sum),
// then `iterations` times Z <- Z (13 I - A Z (15 I - A Z (7 I - A Z))) / 4. A: (m, m).
Mat<double> iterative_pinv(const Mat<double>& A, std::size_t iterations);

// The Moore-Penrose pseudo-inverse by LAPACK's SVD (gesdd through xtensor-blas); singular
// values at or below 1e-15 times the largest are taken as 0 (numpy's default rcond).
Mat<double> exact_pinv(const Mat<double>& A);

}  // namespace favor
