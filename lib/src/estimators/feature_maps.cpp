#include "favor/estimators/feature_maps.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "favor/core/blas.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "core/tile_kernels.hpp"

namespace favor {

template <class T>
void project_block(const FeatureBlock<T>& b) {
    // The tile kernel on W^T (d x m), instead of a BLAS call that packs both operands and
    // zeroes its output first (docs/speed.md).
    const std::size_t m = b.W.shape(0), d = b.d;
    thread_local std::vector<T> own;
    const T* Wt = b.Wt;
    if (!Wt) {
        own = transposed(b.W);
        Wt = own.data();
    }
    tiles::times_transposed(b.X, b.rows, d, Wt, m, m, T(b.xs), b.out, b.F);
    if (b.rounding != Rounding::none)
        for (std::size_t i = 0; i < b.rows; ++i) round_to(b.rounding, b.out + i * b.F, b.W.shape(0));
}

template <class T>
std::vector<T> transposed(const Mat<T>& W) {
    const std::size_t m = W.shape(0), d = W.shape(1);
    std::vector<T> t(d * m);
    for (std::size_t k = 0; k < d; ++k)
        for (std::size_t j = 0; j < m; ++j) t[k * m + j] = W(j, k);
    return t;
}

template <class T>
std::vector<double> row_norms2(const Mat<T>& X) {
    const std::size_t L = X.shape(0), d = X.shape(1);
    std::vector<double> out(L);
    for (std::size_t i = 0; i < L; ++i) {
        double s = 0.0;
        for (std::size_t c = 0; c < d; ++c) s += double(X(i, c)) * double(X(i, c));
        out[i] = s;
    }
    return out;
}

template <class T>
Features<T> compute_features(const FeatureMap& f, MatView<T> Q, double xs, const Mat<T>& W, Side side,
                             int threads, Rounding rounding, bool shift) {
    const std::size_t L = Q.shape(0), F = f.num_features(W.shape(0), Q.shape(1));
    Features<T> out{Mat<T>::from_shape({L, F}), std::vector<double>(L, 0.0)};
    advise_hugepages(out.phi.data(), out.phi.size() * sizeof(T));
    out.overflow = compute_features_into(f, Q, xs, W, side, threads, out.phi.data(), out.log_scale.data(), rounding, shift);
    return out;
}

namespace {
// map.block on `rows` rows at X into phi (ld F) and row_log: queries, and keys of a map with a
// blockwise key shift, finished with their own per-row shift (docs/design.md section 2.3).
// Wt: W^T laid out once by the caller for many blocks, or null (project_block lays it out).
template <class T>
void block_rows_of(const FeatureMap& f, const T* X, std::size_t rows, std::size_t d, double xs, const Mat<T>& W,
                   Side side, T* phi, std::size_t F, double* row_log, Rounding rounding, const T* Wt = nullptr) {
    const bool per_row = side == Side::query || f.blockwise_key_shift();
    f.block(FeatureBlock<T>{X, rows, d, xs, W, side, phi, F, row_log, per_row, rounding, Wt});
}

// compute_features' steps after map.block, for `rows` rows of phi (ld F): keys of a map
// without a blockwise key shift finished with the common shift *common (null: the rows are
// finished); without `shift` the log scales multiplied in; the rounding. Each step is per
// entry or per row, so a block finished alone gives the bits of all rows finished together.
// Returns the +-Inf entries.
template <class T>
std::size_t finish_rows(const FeatureMap& f, T* phi, std::size_t F, std::size_t rows, double* row_log,
                        const double* common, Rounding rounding, bool shift) {
    if (common) {
        f.finish_key_block(phi, F, rows, row_log, *common);
        std::fill(row_log, row_log + rows, *common);
    }
    if (!shift)   // exp(log_scale) phi~ in double, then stored: Inf or 0 where the plain exp is
        for (std::size_t i = 0; i < rows; ++i) {
            if (row_log[i] == 0.0) continue;
            const double c = std::exp(row_log[i]);
            for (T* p = phi + i * F; p != phi + (i + 1) * F; ++p) *p = *p == T(0) ? T(0) : T(double(*p) * c);
            row_log[i] = 0.0;
        }
    return round_to(rounding, phi, rows * F);
}
}  // namespace

template <class T>
std::size_t compute_features_into(const FeatureMap& f, MatView<T> Q, double xs, const Mat<T>& W, Side side,
                                  int threads, T* phi, double* row_log, Rounding rounding, bool shift) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), m = W.shape(0);
    const std::size_t F = f.num_features(m, d);
    const std::size_t rb = feature_block_rows();
    const std::size_t nblocks = (L + rb - 1) / rb;

    // Keys are shifted per row, like queries (a block of one row: docs/design.md section 2.3),
    // wherever the map allows a blockwise key shift; a map that does not (epsilon added after
    // a shifted exp) is defined by one shift over all keys, which pass 2 applies.
    const bool per_row = side == Side::query || f.blockwise_key_shift();
    std::vector<std::size_t> overflow(nblocks, 0);
    const std::vector<T> Wt = transposed(W);   // once for every block's product
    // Pass 1 per block (rows shifted per row finish here).
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        block_rows_of(f, Q.data() + r0 * d, rows, d, xs, W, side, phi + r0 * F, F, row_log + r0, rounding, Wt.data());
        if (per_row) overflow[blk] = finish_rows(f, phi + r0 * F, F, rows, row_log + r0, nullptr, rounding, shift);
    });
    if (!per_row && L > 0) {
        const double s = max_of(row_log, L);
        parallel_for(nblocks, threads, [&](std::size_t blk) {
            const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
            overflow[blk] = finish_rows(f, phi + r0 * F, F, rows, row_log + r0, &s, rounding, shift);
        });
    }
    std::size_t total = 0;
    for (std::size_t o : overflow) total += o;
    return total;
}

template <class T>
double common_key_shift(const FeatureMap& f, MatView<T> K, double xs, const Mat<T>& W, int threads,
                        Rounding rounding) {
    const std::size_t L = K.shape(0), d = K.shape(1), F = f.num_features(W.shape(0), d);
    if (f.blockwise_key_shift() || L == 0) return 0.0;
    const std::size_t rb = feature_block_rows(), nblocks = (L + rb - 1) / rb;
    std::vector<double> row_log(L);
    parallel_for(nblocks, threads, [&](std::size_t blk) {   // compute_features' pass 1, features dropped
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        std::vector<T> phi(rows * F);
        block_rows_of(f, K.data() + r0 * d, rows, d, xs, W, Side::key, phi.data(), F, row_log.data() + r0, rounding);
    });
    return max_of(row_log.data(), L);
}

template <class T>
std::size_t feature_rows(const FeatureMap& f, MatView<T> Q, std::size_t r0, std::size_t rows, double xs,
                         const Mat<T>& W, Side side, T* phi, double* row_log, Rounding rounding, bool shift,
                         double key_shift, const T* Wt) {
    const std::size_t d = Q.shape(1), F = f.num_features(W.shape(0), d), rb = feature_block_rows();
    assert(r0 % rb == 0);
    const bool per_row = side == Side::query || f.blockwise_key_shift();
    std::size_t overflow = 0;
    for (std::size_t b0 = 0; b0 < rows; b0 += rb) {   // the blocks compute_features makes
        const std::size_t n = std::min(rb, rows - b0);
        block_rows_of(f, Q.data() + (r0 + b0) * d, n, d, xs, W, side, phi + b0 * F, F, row_log + b0, rounding, Wt);
        overflow += finish_rows(f, phi + b0 * F, F, n, row_log + b0, per_row ? nullptr : &key_shift, rounding, shift);
    }
    return overflow;
}

double mean_pair_sum_norm2(const Mat<double>& X, const Mat<double>& Y) {
    const std::size_t d = X.shape(1);
    std::vector<double> mx(d, 0.0), my(d, 0.0);
    for (std::size_t i = 0; i < X.shape(0); ++i)
        for (std::size_t c = 0; c < d; ++c) mx[c] += X(i, c) / double(X.shape(0));
    for (std::size_t j = 0; j < Y.shape(0); ++j)
        for (std::size_t c = 0; c < d; ++c) my[c] += Y(j, c) / double(Y.shape(0));
    double mean_z2 = 0.0;
    for (double v : row_norms2(X)) mean_z2 += v / double(X.shape(0));
    for (double v : row_norms2(Y)) mean_z2 += v / double(Y.shape(0));
    for (std::size_t c = 0; c < d; ++c) mean_z2 += 2.0 * mx[c] * my[c];
    return mean_z2;
}

double kernel_estimate(const FeatureMap& f, const Mat<double>& W, const Mat<double>& x, const Mat<double>& y) {
    const FeatureMapPtr map = f.resolve(x, y);
    // Per-row shifts on both sides, undone exactly: phi = exp(log_scale) * phi~.
    const Features<double> fx = compute_features(*map, x, 1.0, W, Side::query);
    const Features<double> fy = compute_features(*map, y, 1.0, W, Side::key);
    double dot = 0.0;
    for (std::size_t j = 0; j < fx.phi.shape(1); ++j) dot += fx.phi(0, j) * fy.phi(0, j);
    return dot * std::exp(fx.log_scale[0] + fy.log_scale[0]);
}

FeatureMap::PairMse FeatureMap::pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const {
    const std::size_t d = X.shape(1);
    if (!pair_mse(1.0, 1.0, 0.0, m, d)) return {};
    return [self = shared_from_this(), x2 = row_norms2(X), y2 = row_norms2(Y), m, d](std::size_t i, std::size_t j,
                                                                                      double xy) {
        return *self->pair_mse(x2[i], y2[j], xy, m, d);
    };
}

std::optional<double> pair_mse_at(const FeatureMap& f, const Mat<double>& x, const Mat<double>& y, std::size_t m) {
    const FeatureMap::PairMse mse = f.pair_mse_rows(x, y, m);
    if (!mse) return std::nullopt;
    double xy = 0.0;
    for (std::size_t c = 0; c < x.shape(1); ++c) xy += x(0, c) * y(0, c);
    return mse(0, 0, xy);
}

#define FAVOR_INSTANTIATE(T)                                                                     \
    template void project_block<T>(const FeatureBlock<T>&);                                       \
    template std::vector<T> transposed<T>(const Mat<T>&);                                          \
    template std::vector<double> row_norms2<T>(const Mat<T>&);                                    \
    template Features<T> compute_features<T>(const FeatureMap&, MatView<T>, double, const Mat<T>&, Side, int, \
                                             Rounding, bool);                                      \
    template std::size_t compute_features_into<T>(const FeatureMap&, MatView<T>, double, const Mat<T>&, Side, int, \
                                                  T*, double*, Rounding, bool);                       \
    template double common_key_shift<T>(const FeatureMap&, MatView<T>, double, const Mat<T>&, int, Rounding); \
    template std::size_t feature_rows<T>(const FeatureMap&, MatView<T>, std::size_t, std::size_t, double,      \
                                         const Mat<T>&, Side, T*, double*, Rounding, bool, double, const T*);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
