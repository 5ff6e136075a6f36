// The gradient of exact softmax attention (docs/design.md section 2.7):
//   S = Q K^T / sqrt d, A = softmax(S) row-wise, Out = A V, G = dLoss/dOut,
//   dV = A^T G, dP = G V^T, dS = A o (dP - delta 1^T) with delta_i = G_i . Out_i,
//   dQ = dS K / sqrt d, dK = dS^T Q / sqrt d
// (the softmax Jacobian diag(a) - a a^T applied to each row of dP). Pass 1 runs over query
// blocks: each row's log-sum-exp lse_i, delta_i and dQ; pass 2 over key blocks recomputes
// A^T for its keys as exp(S^T - lse) and makes dK and dV. Each block is one thread's, every
// entry is written by one block, so the numbers do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "favor/attention_blocks.hpp"
#include "favor/exact_attention.hpp"
#include "favor/favor_forward.hpp"
#include "favor/linear_attention.hpp"
#include "favor/backward_exact.hpp"
#include "favor/blas.hpp"
#include "favor/error.hpp"
#include "favor/parallel.hpp"
#include "favor/vmath.hpp"
#include "tile_kernels.hpp"

namespace favor {

namespace {
template <class T>
struct ExactInputs {
    const Mat<T>&Q, &K, &V, &G;
    bool causal;
    std::size_t L, Lk, d, dv;
    T inv_sqrt_d;
    std::vector<T> Qt, Kt, Vt, Gt;   // transposed copies (feature_map.hpp's transposed) (d x L, d x Lk, dv x Lk, dv x L) for the tile kernels
};

template <class T>
void scale_rows_of(T* p, std::size_t n, T c) {
    for (std::size_t k = 0; k < n; ++k) p[k] *= c;
}

// Rows [i0, i0 + rows) of the queries: lse and delta of those rows, and their dQ.
// Keys visible to the block: all, or (causal) the first i0 + rows.
template <class T>
void query_block(const ExactInputs<T>& in, std::size_t i0, std::size_t rows, double* lse, double* delta, Mat<T>& dQ) {
    const std::size_t nk = in.causal ? i0 + rows : in.Lk, d = in.d, dv = in.dv;
    std::vector<T> A(rows * nk), dP(rows * nk), out(rows * dv);
    // The products with favor's tile kernels (tile_kernels.hpp, as exact_attention), K^T, V^T laid out once.
    tiles::times_transposed(&in.Q(i0, 0), rows, d, in.Kt.data(), in.Lk, nk, in.inv_sqrt_d, A.data(), nk);
    for (std::size_t r = 0; r < rows; ++r) {
        T* a = &A[r * nk];
        const std::size_t visible = in.causal ? i0 + r + 1 : nk;
        const T mx = *std::max_element(a, a + visible);
        const T sum = T(exp_shifted_sum(a, visible, mx));   // vectorised (vmath.hpp)
        scale_in_place(a, visible, T(1) / sum);
        std::fill(a + visible, a + nk, T(0));
        lse[r] = double(mx) + std::log(double(sum));
    }
    tiles::times(A.data(), rows, nk, 1, nk, in.V.data(), dv, dv, out.data(), dv, false);
    tiles::times_transposed(&in.G(i0, 0), rows, dv, in.Vt.data(), in.Lk, nk, T(1), dP.data(), nk);
    for (std::size_t r = 0; r < rows; ++r) {
        T dl = 0;
        for (std::size_t c = 0; c < dv; ++c) dl += in.G(i0 + r, c) * out[r * dv + c];
        delta[r] = double(dl);
        for (std::size_t j = 0; j < nk; ++j) A[r * nk + j] *= dP[r * nk + j] - dl;   // A becomes dS
    }
    tiles::times(A.data(), rows, nk, 1, nk, in.K.data(), d, d, &dQ(i0, 0), d, false);
    scale_rows_of(&dQ(i0, 0), rows * d, in.inv_sqrt_d);
}

// Keys [j0, j0 + rows): their dK and dV from A^T = exp(S^T - lse) over the queries that see
// them (all, or (causal) queries i >= j0).
template <class T>
void key_block(const ExactInputs<T>& in, std::size_t j0, std::size_t rows, const std::vector<double>& lse,
               const std::vector<double>& delta, Mat<T>& dK, Mat<T>& dV) {
    const std::size_t i0 = in.causal ? j0 : 0, nq = in.L - i0, d = in.d, dv = in.dv;
    std::vector<T> At(rows * nq), dPt(rows * nq);
    tiles::times_transposed(&in.K(j0, 0), rows, d, in.Qt.data() + i0, in.L, nq, in.inv_sqrt_d, At.data(), nq);
    for (std::size_t r = 0; r < rows; ++r) {   // A^T = exp(S^T - lse), the exp vectorised (vmath.hpp)
        T* a = &At[r * nq];
        for (std::size_t i = 0; i < nq; ++i) a[i] = T(double(a[i]) - lse[i0 + i]);
        exp_shifted(a, nq, T(0));
        if (in.causal) std::fill(a, a + std::min(nq, j0 + r - i0), T(0));
    }
    tiles::times(At.data(), rows, nq, 1, nq, &in.G(i0, 0), dv, dv, &dV(j0, 0), dv, false);
    tiles::times_transposed(&in.V(j0, 0), rows, dv, in.Gt.data() + i0, in.L, nq, T(1), dPt.data(), nq);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t i = 0; i < nq; ++i) At[r * nq + i] *= dPt[r * nq + i] - T(delta[i0 + i]);   // dS^T
    tiles::times(At.data(), rows, nq, 1, nq, &in.Q(i0, 0), d, d, &dK(j0, 0), d, false);
    scale_rows_of(&dK(j0, 0), rows * d, in.inv_sqrt_d);
}

}  // namespace

template <class T>
void check_backward_shapes(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G, bool causal) {
    if (K.shape(1) != Q.shape(1) || V.shape(0) != K.shape(0) || G.shape(0) != Q.shape(0) || G.shape(1) != V.shape(1))
        throw Error("backward: shapes do not fit: Q (L, d), K (Lk, d), V (Lk, dv), G (L, dv)");
    if (causal && K.shape(0) != Q.shape(0)) throw Error("backward: causal attention needs as many keys as queries");
}
template void check_backward_shapes(const Mat<float>&, const Mat<float>&, const Mat<float>&, const Mat<float>&, bool);
template void check_backward_shapes(const Mat<double>&, const Mat<double>&, const Mat<double>&, const Mat<double>&,
                                    bool);

template <class T>
Gradients<T> exact_attention_backward(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G, bool causal,
                                      int threads) {
    check_backward_shapes(Q, K, V, G, causal);
    const std::size_t L = Q.shape(0), Lk = K.shape(0), d = Q.shape(1), dv = V.shape(1);
    const ExactInputs<T> in{Q, K, V, G, causal, L, Lk, d, dv, T(1.0 / std::sqrt(double(d))),
                            transposed(Q), transposed(K), transposed(V), transposed(G)};
    Gradients<T> g{Mat<T>::from_shape({L, d}), Mat<T>::from_shape({Lk, d}), Mat<T>::from_shape({Lk, dv})};
    if (L == 0 || Lk == 0) {
        g.dQ.fill(T(0)), g.dK.fill(T(0)), g.dV.fill(T(0));
        return g;
    }
    std::vector<double> lse(L), delta(L);
    const std::size_t bq = block_rows(Lk), nbq = (L + bq - 1) / bq;
    parallel_for(nbq, threads, [&](std::size_t b) {
        const std::size_t i0 = b * bq;
        query_block(in, i0, std::min(bq, L - i0), &lse[i0], &delta[i0], g.dQ);
    });
    const std::size_t bk = block_rows(L), nbk = (Lk + bk - 1) / bk;
    parallel_for(nbk, threads, [&](std::size_t b) {
        const std::size_t j0 = b * bk;
        key_block(in, j0, std::min(bk, Lk - j0), lse, delta, g.dK, g.dV);
    });
    return g;
}

template Gradients<float> exact_attention_backward(const Mat<float>&, const Mat<float>&, const Mat<float>&,
                                                   const Mat<float>&, bool, int);
template Gradients<double> exact_attention_backward(const Mat<double>&, const Mat<double>&, const Mat<double>&,
                                                    const Mat<double>&, bool, int);

}  // namespace favor
