// Exact attention as a half-precision model computes it (docs/design.md section 2.6): the
// reference a float16 / bfloat16 user compares against, whose own error against float64
// exact attention is the floor of any estimator at that precision.
#include <algorithm>
#include <cmath>
#include <vector>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/blas.hpp"
#include "favor/core/half.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"

namespace favor {

Mat<float> exact_attention_rounded(const Mat<float>& Q, const Mat<float>& K, const Mat<float>& V, Rounding rounding,
                                   bool causal, int threads) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1);
    Mat<float> out = Mat<float>::from_shape({L, dv});
    const std::size_t rb = block_rows(Lk), nblocks = (L + rb - 1) / rb;
    const float alpha = float(1.0 / std::sqrt(double(d)));
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        const std::size_t cols = causal ? std::min(Lk, r0 + rows) : Lk;   // keys any row of the block sees
        float* o = out.data() + r0 * dv;
        if (cols == 0) {
            std::fill(o, o + rows * dv, 0.0f);
            return;
        }
        std::vector<float> S(rows * cols);
        // Scores accumulated in float32, stored in half.
        gemm<float>(false, true, rows, cols, d, alpha, Q.data() + r0 * d, d, K.data(), d, 0.0f, S.data(), cols);
        round_to(rounding, S.data(), S.size());
        for (std::size_t i = 0; i < rows; ++i) {
            float* s = S.data() + i * cols;
            const std::size_t n = causal ? std::min(cols, r0 + i + 1) : cols;
            // Softmax in float32, max subtracted; the probabilities stored in half.
            const double sum = exp_shifted_sum(s, n, max_of(s, n));
            scale_in_place(s, n, float(1.0 / sum));
            std::fill(s + n, s + cols, 0.0f);
            round_to(rounding, s, n);
        }
        gemm<float>(false, false, rows, dv, cols, 1.0f, S.data(), cols, V.data(), dv, 0.0f, o, dv);
    });
    round_to(rounding, out.data(), out.size());
    return out;
}

}  // namespace favor
