#pragma once
// What the fused passes (favor_forward.cpp, backward_fused.cpp) share: a map's features made
// block by block into buffers the running thread keeps, each row finished with its own shift
// (docs/design.md sections 2.2 and 2.7).
#include <cmath>
#include <utility>
#include <vector>

#include "favor/core/memory.hpp"
#include "favor/estimators/feature_map.hpp"
#include "favor/estimators/features.hpp"

namespace favor {

// The map, W and W^T (laid out once for every block's product), the input scale
// x = q / d^{1/4}, d and F. Every row is finished with its own shift, keys as queries
// (FeatureBlock::per_row; the fused passes use it only for maps with a blockwise key shift),
// so a row's features do not depend on the block it is made in: the backward remakes the
// forward's features bit for bit.
template <class T>
struct FusedFeatures {
    const FeatureMap& map;
    const Mat<T>& W;
    std::vector<T> Wt;
    double xs;
    std::size_t d, F;
    FusedFeatures(const FeatureMap& m, const Mat<T>& w, std::size_t dim)
        : map(m), W(w), Wt(transposed(w)), xs(1.0 / std::pow(double(dim), 0.25)), d(dim),
          F(m.num_features(w.shape(0), dim)) {}
    // The features of rows [r0, r0 + rows) of X into phi (rows x F) and their log scales.
    void into(MatView<T> X, std::size_t r0, std::size_t rows, Side side, T* phi, double* rlog) const {
        map.block(FeatureBlock<T>{X.data() + r0 * d, rows, d, xs, W, side, phi, F, rlog, /*per_row=*/true,
                                  Rounding::none, Wt.data()});
    }
    // The same into a buffer this thread keeps: a thread that runs many blocks or cells (pool
    // workers, the approximation runner's workers) reuses the same pages instead of mapping
    // and zeroing fresh ones (docs/speed.md, page faults). Valid until the thread's next call.
    std::pair<T*, double*> block(MatView<T> X, std::size_t r0, std::size_t rows, Side side) const {
        thread_local std::vector<T> buf;
        thread_local std::vector<double> rlog;
        T* phi = grown(buf, rows * F);
        double* rl = grown(rlog, rows);
        into(X, r0, rows, side, phi, rl);
        return {phi, rl};
    }
};

}  // namespace favor
