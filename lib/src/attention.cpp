#include "favor/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "favor/blas.hpp"
#include "favor/parallel.hpp"
#include "favor/vmath.hpp"

namespace favor {

std::size_t block_rows(std::size_t L) {
    return std::clamp<std::size_t>((std::size_t(1) << 21) / std::max<std::size_t>(L, 1), 16, 512);
}

template <class T>
Mat<T> scale_rows(const Mat<T>& X) {
    const T s = T(1.0 / std::pow(double(X.shape(1)), 0.25));
    Mat<T> out = X;
    for (auto& v : out) v *= s;
    return out;
}

template <class T>
Mat<T> exact_attention(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal, int threads) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1);
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const std::size_t b = block_rows(Lk);
    const std::size_t nblocks = (L + b - 1) / b;
    const T alpha = T(1.0 / std::sqrt(double(d)));
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * b, rows = std::min(b, L - r0);
        // Causal rows r0..r0+rows-1 only see keys < r0 + rows.
        const std::size_t cols = causal ? std::min(Lk, r0 + rows) : Lk;
        std::vector<T> S(rows * cols);
        gemm<T>(false, true, rows, cols, d, alpha, Q.data() + r0 * d, d, K.data(), d, T(0), S.data(), cols);
        for (std::size_t i = 0; i < rows; ++i) {
            T* s = S.data() + i * cols;
            const std::size_t n = causal ? std::min(cols, r0 + i + 1) : cols;
            exp_shifted(s, n, max_of(s, n));
            std::fill(s + n, s + cols, T(0));
        }
        gemm<T>(false, false, rows, dv, cols, T(1), S.data(), cols, V.data(), dv, T(0), out.data() + r0 * dv, dv);
        for (std::size_t i = 0; i < rows; ++i) {
            const T* s = S.data() + i * cols;
            const T inv = T(1.0 / sum_of(s, cols));
            for (std::size_t c = 0; c < dv; ++c) out(r0 + i, c) *= inv;
        }
    });
    return out;
}

namespace {
// [V, 1]: (L, dv + 1), so one product gives both phiK^T V and the normaliser phiK^T 1.
template <class T>
std::vector<T> with_ones_column(const Mat<T>& V) {
    const std::size_t L = V.shape(0), dv = V.shape(1);
    std::vector<T> out(L * (dv + 1));
    for (std::size_t i = 0; i < L; ++i) {
        std::copy(V.data() + i * dv, V.data() + (i + 1) * dv, out.data() + i * (dv + 1));
        out[i * (dv + 1) + dv] = T(1);
    }
    return out;
}
}  // namespace

template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, const Mat<T>& V, bool causal) {
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), Lk = phiK.shape(0), dv = V.shape(1);
    const std::size_t e = dv + 1;
    const std::vector<T> V1 = with_ones_column(V);
    std::vector<T> num(L * e);   // phiQ (phiK^T [V, 1]) = [numerator, D]
    if (!causal) {
        std::vector<T> KV(F * e);
        gemm<T>(true, false, F, e, Lk, T(1), phiK.data(), F, V1.data(), e, T(0), KV.data(), e);
        gemm<T>(false, false, L, e, F, T(1), phiQ.data(), F, KV.data(), e, T(0), num.data(), e);
    } else {
        // Prefix sums over blocks of c rows: inside a block the lower triangle of
        // phiQ_b phiK_b^T, before it the running G = sum_{j < r0} phiK_j [v_j, 1]^T.
        const std::size_t c = 64;
        std::vector<T> G(F * e, T(0)), S(c * c);
        for (std::size_t r0 = 0; r0 < L; r0 += c) {
            const std::size_t rows = std::min(c, L - r0);
            T* nb = num.data() + r0 * e;
            gemm<T>(false, false, rows, e, F, T(1), phiQ.data() + r0 * F, F, G.data(), e, T(0), nb, e);
            gemm<T>(false, true, rows, rows, F, T(1), phiQ.data() + r0 * F, F, phiK.data() + r0 * F, F, T(0), S.data(), rows);
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t j = i + 1; j < rows; ++j) S[i * rows + j] = T(0);
            gemm<T>(false, false, rows, e, rows, T(1), S.data(), rows, V1.data() + r0 * e, e, T(1), nb, e);
            gemm<T>(true, false, F, e, rows, T(1), phiK.data() + r0 * F, F, V1.data() + r0 * e, e, T(1), G.data(), e);
        }
    }
    Mat<T> out = Mat<T>::from_shape({L, dv});
    for (std::size_t i = 0; i < L; ++i) {
        const T inv = T(1) / num[i * e + dv];
        for (std::size_t c = 0; c < dv; ++c) out(i, c) = num[i * e + c] * inv;
    }
    return out;
}

template <class T>
Approximation<T> favor_attention(const FeatureMap& f, const Mat<T>& W, const Mat<T>& Q,
                                 const Mat<T>& K, const Mat<T>& V, bool causal) {
    const Mat<T> X = scale_rows(Q), Y = scale_rows(K);
    const FeatureMap map = resolve_for_inputs(f, X, Y);
    Features<T> fq = compute_features(map, X, W, Side::query);
    Features<T> fk = compute_features(map, Y, W, Side::key);
    Mat<T> out = linear_attention(fq.phi, fk.phi, V, causal);
    return {std::move(out), std::move(fq), std::move(fk), map};
}

#define FAVOR_INSTANTIATE(T)                                                                        \
    template Mat<T> scale_rows<T>(const Mat<T>&);                                                    \
    template Mat<T> exact_attention<T>(const Mat<T>&, const Mat<T>&, const Mat<T>&, bool, int);      \
    template Mat<T> linear_attention<T>(const Mat<T>&, const Mat<T>&, const Mat<T>&, bool);          \
    template Approximation<T> favor_attention<T>(const FeatureMap&, const Mat<T>&, const Mat<T>&,    \
                                                 const Mat<T>&, const Mat<T>&, bool);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
