// The fused non-causal backward of the FAVOR estimator (docs/design.md section 2.7): the
// formulas of backward_linear.cpp's header with the features made per block of rows in a
// buffer the running thread keeps (fused_features.hpp), as the fused forward makes them, and
// every product in favor's tile kernels (tile_kernels.hpp). Given the forward's state
// (KV1 = Psi^T [V, 1] relative to the key shift M, the denominators D_i and Out), with
// Psi_j = exp(lk_j - M) phiK_j:
//   query block:  phiQ;  a_i = [G_i / D_i, -(G_i . Out_i) / D_i];  dphiQ = a KV1^T;
//                 partial_b = phiQ^T a;  dQ = the map's vjp of dphiQ          (4 products)
//   dKV1 = sum_b partial_b, in block order
//   key block:    phiK, lk;  dphiK_j = exp(lk_j - M) (dKV1[:, :dv] v_j + dKV1[:, dv]);
//                 dV_j = exp(lk_j - M) dKV1[:, :dv]^T phiK_j;  dK = the vjp of dphiK   (4 products)
// Eight products of L F d or L F dv flops against the forward's four. The shifts are held
// fixed (the gradient is exact: backward_linear.cpp). Blocks of fused_backward_rows rows,
// each on one thread; dKV1's partials are added in block order: the numbers do not depend on
// `threads`.
#include "attention/backward_fused.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "favor/attention/attention_blocks.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "attention/fused_features.hpp"
#include "core/tile_kernels.hpp"

namespace favor {

namespace {
// (rows x cols, ld cols) -> its transpose (cols x rows): the tiny KV1 and dKV1, laid out once
// for the products that read them transposed.
template <class T>
std::vector<T> transpose(const T* A, std::size_t rows, std::size_t cols) {
    std::vector<T> t(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = A[r * cols + c];
    return t;
}

// Query rows [r0, r0 + rows): dQ's rows and the block's partial phiQ^T a (F x (dv + 1)).
template <class T>
void query_block(const FusedFeatures<T>& f, MatView<T> Q, MatView<T> G, const ForwardState<T>& s,
                 const std::vector<T>& KV1t, std::size_t r0, std::size_t rows, T* part, Mat<T>& dQ) {
    const std::size_t F = f.F, d = f.d, dv = G.shape(1), e = dv + 1;
    const T* phi = f.block(Q, r0, rows, Side::query).first;
    thread_local std::vector<T> a_kept, dphi_kept;
    T* const a = grown(a_kept, rows * e);
    T* const dphi = grown(dphi_kept, rows * F);
    for (std::size_t i = 0; i < rows; ++i) {   // a_i = [G_i, -(G_i . Out_i)] / D_i
        const T* g = G.data() + (r0 + i) * dv;
        const T inv = T(1) / s.den[r0 + i];
        for (std::size_t c = 0; c < dv; ++c) a[i * e + c] = g[c] * inv;
        a[i * e + dv] = -dot_lanes(g, s.out.data() + (r0 + i) * dv, dv) * inv;
    }
    tiles::times_transposed(a, rows, e, KV1t.data(), F, F, T(1), dphi, F);   // a KV1^T
    tiles::times(phi, F, 1, F, rows, a, e, dv, part, e, false);               // phiQ^T a[:, :dv]
    std::vector<T> z(F, T(0));   // phiQ^T a[:, dv], row by row (in a fixed order, vectorised over F)
    for (std::size_t i = 0; i < rows; ++i) {
        const T ai = a[i * e + dv];
        const T* p = phi + i * F;
        for (std::size_t k = 0; k < F; ++k) z[k] += ai * p[k];
    }
    for (std::size_t k = 0; k < F; ++k) part[k * e + dv] = z[k];
    f.map.vjp(FeatureGrad<T>{Q.data() + r0 * d, rows, d, f.xs, f.W, Side::query, phi, dphi, F, dQ.data() + r0 * d});
}

// Key rows [r0, r0 + rows): dK's and dV's rows from dKV1 (F x (dv + 1)) and its transpose.
template <class T>
void key_block(const FusedFeatures<T>& f, MatView<T> K, MatView<T> V, double M, const std::vector<T>& dKV1,
               const std::vector<T>& dKV1t, std::size_t r0, std::size_t rows, Gradients<T>& g) {
    const std::size_t F = f.F, d = f.d, dv = V.shape(1), e = dv + 1;
    const auto [phi, lk] = f.block(K, r0, rows, Side::key);
    thread_local std::vector<T> dphi_kept;
    T* const dphi = grown(dphi_kept, rows * F);
    T* const dV = g.dV.data() + r0 * dv;
    tiles::times_transposed(V.data() + r0 * dv, rows, dv, dKV1t.data(), F, F, T(1), dphi, F);   // V_b dKV1[:, :dv]^T
    tiles::times(phi, rows, F, 1, F, dKV1.data(), e, dv, dV, dv, false);                          // phiK_b dKV1[:, :dv]
    const T* z = dKV1t.data() + dv * F;   // dKV1[:, dv]
    for (std::size_t j = 0; j < rows; ++j) {   // the factors exp(lk_j - M) <= 1
        const T c = T(std::exp(lk[j] - M));
        T* row = dphi + j * F;
        for (std::size_t k = 0; k < F; ++k) row[k] = c * (row[k] + z[k]);
        scale_in_place(dV + j * dv, dv, c);
    }
    f.map.vjp(FeatureGrad<T>{K.data() + r0 * d, rows, d, f.xs, f.W, Side::key, phi, dphi, F, g.dK.data() + r0 * d});
}
}  // namespace

template <class T>
Gradients<T> fused_backward(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, MatView<T> G,
                            const ForwardState<T>& s, int threads) {
    const std::size_t L = Q.shape(0), Lk = K.shape(0), d = Q.shape(1), dv = V.shape(1), e = dv + 1;
    const FusedFeatures<T> f(est.ready_map(), est.W, d);
    const std::size_t F = f.F;
    Gradients<T> g{Mat<T>::from_shape({L, d}), Mat<T>::from_shape({Lk, d}), Mat<T>::from_shape({Lk, dv})};
    for (Mat<T>* x : {&g.dQ, &g.dK, &g.dV}) advise_hugepages(x->data(), x->size() * sizeof(T));
    // Query blocks: the partials of dKV1 in storage the calling thread keeps, one slot per block.
    const std::vector<T> KV1t = transpose(s.KV1.data(), F, e);
    const std::size_t qb = fused_backward_rows(L, F, d, sizeof(T)), nq = (L + qb - 1) / qb;
    thread_local std::vector<T> kept;
    T* const parts = grown(kept, nq * F * e);
    parallel_for(nq, threads, [&](std::size_t b) {
        query_block(f, Q, G, s, KV1t, b * qb, std::min(qb, L - b * qb), parts + b * F * e, g.dQ);
    });
    std::vector<T> dKV1(F * e, T(0));
    for (std::size_t b = 0; b < nq; ++b)
        for (std::size_t k = 0; k < F * e; ++k) dKV1[k] += parts[b * F * e + k];
    const std::vector<T> dKV1t = transpose(dKV1.data(), F, e);
    const std::size_t kb = fused_backward_rows(Lk, F, d, sizeof(T)), nk = (Lk + kb - 1) / kb;
    parallel_for(nk, threads, [&](std::size_t b) {
        key_block(f, K, V, s.key_shift, dKV1, dKV1t, b * kb, std::min(kb, Lk - b * kb), g);
    });
    return g;
}

template Gradients<float> fused_backward(const Estimator<float>&, MatView<float>, MatView<float>, MatView<float>,
                                         MatView<float>, const ForwardState<float>&, int);
template Gradients<double> fused_backward(const Estimator<double>&, MatView<double>, MatView<double>, MatView<double>,
                                          MatView<double>, const ForwardState<double>&, int);

}  // namespace favor
