#pragma once
// Feature maps over whole matrices: the features of all rows of Q (or of a range of them) in
// fixed blocks of rows, the keys' common shift, and the per-pair helpers (kernel estimate,
// closed-form MSE) built on a FeatureMap (feature_map.hpp).
#include <cstddef>
#include <optional>
#include <vector>

#include "favor/core/half.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/feature_map.hpp"

namespace favor {

// phi(x_i) = exp(log_scale[i]) * phi(i, :). The shift is per row, for queries and keys alike
// (keys: one constant for all rows only where the map has no blockwise key shift, i.e.
// epsilon > 0 after a shifted exp); linear attention folds the key log scales back in, so
// the shifts never change an output beyond rounding (docs/design.md section 2.3).
template <class T>
struct Features {
    Mat<T> phi;                    // (L, F)
    std::vector<double> log_scale; // (L)
    std::size_t overflow = 0;      // entries of phi that are +-Inf (after rounding)
};

// Rows per block of the feature maps (fixed, so results never depend on the thread count).
constexpr std::size_t feature_block_rows() { return 256; }

// The features of the rows of Q scaled by `input_scale` (x = input_scale * q), W: (m, d).
// Returns (L, F); rows in blocks of feature_block_rows() on up to `threads` threads.
// Without `shift`, the rows are exp(log_scale) phi~ with log_scale 0 (the unstabilised
// formula: it overflows or underflows where the plain exp does). `rounding` (T = float):
// the projections and then phi rounded to half (docs/design.md section 2.6); `overflow`
// counts the entries of phi that are +-Inf, whatever the rounding.
template <class T>
Features<T> compute_features(const FeatureMap& f, MatView<T> Q, double input_scale, const Mat<T>& W,
                             Side side, int threads = 1, Rounding rounding = Rounding::none, bool shift = true);
// The same into phi (L x F, row-major) and row_log (L), storage the caller keeps and reuses;
// returns the overflow count.
template <class T>
std::size_t compute_features_into(const FeatureMap& f, MatView<T> Q, double input_scale, const Mat<T>& W,
                                  Side side, int threads, T* phi, double* row_log, Rounding rounding = Rounding::none,
                                  bool shift = true);

// Rows [r0, r0 + rows) of compute_features(f, Q, ...) (r0 a multiple of feature_block_rows())
// into phi (rows x F) and row_log (rows), made block by block with the same calls: bitwise
// those rows of the whole matrix, so a pass can make the rows it needs when it needs them.
// key_shift: for the keys of a map without a blockwise key shift, their common shift
// (common_key_shift); unused otherwise. Wt: W^T laid out once by a caller that asks for many
// ranges (transposed(W)), or null. Returns the entries of phi that are +-Inf.
template <class T>
std::size_t feature_rows(const FeatureMap& f, MatView<T> Q, std::size_t r0, std::size_t rows, double input_scale,
                         const Mat<T>& W, Side side, T* phi, double* row_log, Rounding rounding = Rounding::none,
                         bool shift = true, double key_shift = 0.0, const T* Wt = nullptr);
// The one shift of all keys K (L, d) of a map without a blockwise key shift (epsilon after a
// shifted exp: docs/design.md section 2.3), as compute_features takes it; 0 for other maps.
template <class T>
double common_key_shift(const FeatureMap& f, MatView<T> K, double input_scale, const Mat<T>& W, int threads = 1,
                        Rounding rounding = Rounding::none);

// phi(x) . phi(y) for one pair, with the shifts undone: the kernel estimate of SM(x, y).
// x, y: (1, d); x goes through the query side of the map, y through the key side;
// data-dependent parameters (oprf's A*) are resolved for this pair.
double kernel_estimate(const FeatureMap& f, const Mat<double>& W, const Mat<double>& x, const Mat<double>& y);

// mean over all pairs (i, j) of |x_i + y_j|^2, in O(L d):
//   mean|x|^2 + mean|y|^2 + 2 (mean x).(mean y)   (oprf's rho times d).
double mean_pair_sum_norm2(const Mat<double>& X, const Mat<double>& Y);

// The map's closed-form MSE for the pair (x, y) ((1, d) each) with m iid random vectors,
// parameters as they are (not resolved); nullopt where it has none.
std::optional<double> pair_mse_at(const FeatureMap& f, const Mat<double>& x, const Mat<double>& y, std::size_t m);

// Squared row norms |x_i|^2 in double.
template <class T>
std::vector<double> row_norms2(const Mat<T>& X);

}  // namespace favor
