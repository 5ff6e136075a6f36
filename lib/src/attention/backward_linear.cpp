// The gradient of linear (random-feature) attention, docs/design.md section 2.7.
//
// Forward (section 2.2) on the stabilised features: Psi_j = exp(lk_j - M) phiK_j,
//   KV1 = Psi^T [V, 1],  [N_i, D_i] = phiQ_i KV1,  Out_i = N_i / D_i.
// Backward for G = dLoss/dOut: a_i = [G_i / D_i, -(G_i . Out_i) / D_i] (dv + 1), then
//   dphiQ = a KV1^T,  dKV1 = phiQ^T a,  dPsi_j = dKV1 [v_j, 1],  dV = Psi dKV1[:, :dv],
//   dphiK_j = exp(lk_j - M) dPsi_j.
// Why the shifts may be held fixed: Out is invariant to a per-row factor of phi(x_i) (it
// cancels in N_i / D_i) and to a factor common to all keys, so the query shift S_i and the
// common key factor exp(M) change nothing; a key's own log scale lk_j is carried exactly by
// the factor exp(lk_j - M), and for the exp-type maps phi(y_j) = exp(S_j) exp(e_j(y) - S_j)
// holds for any constant S_j, so the derivative taken with S_j fixed is the derivative of
// phi itself (FeatureGrad). The gradient is therefore exact, not an approximation of it.
//
// Causal: [N_i, D_i] = phiQ_i S_i with the prefix sums S_i = sum_{j<=i} exp(lk_j - P_i)
// phiK_j [v_j, 1]^T relative to the running max P_i (as the forward). The gradient of S_i is
// phiQ_i^T a_i, reaching key j from every i >= j: the reverse prefix sums
//   R_j = sum_{i>=j} exp(P_j - P_i) phiQ_i^T a_i = phiQ_j^T a_j + exp(P_j - P_{j+1}) R_{j+1},
// every factor <= 1; then dphiK_j = exp(lk_j - P_j) R_j [v_j, 1], dv_j = exp(lk_j - P_j)
// R_j[:, :dv]^T phiK_j. One pass each way, O(L F dv), made in chunks of rows with one shift
// per chunk (causal_backward below: the same sums, the pairs inside a chunk as GEMMs).
#include <algorithm>
#include <cmath>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_linear.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/blas.hpp"
#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"
#include "attention/backward_fused.hpp"

namespace favor {

namespace {
// a (L x (dv + 1)) from the numerators and denominators num (L x (dv + 1)) and G (L x dv).
template <class T>
void output_gradient(const T* num, const T* G, std::size_t L, std::size_t dv, T* a) {
    const std::size_t w = dv + 1;
    for (std::size_t i = 0; i < L; ++i) {
        const T D = num[i * w + dv];
        T go = 0;
        for (std::size_t c = 0; c < dv; ++c) {
            go += G[i * dv + c] * (num[i * w + c] / D);
            a[i * w + c] = G[i * dv + c] / D;
        }
        a[i * w + dv] = -go / D;
    }
}

// Rows [r0, r0 + n) of the keys as psi (exp(lk_j - M) phiK_j, into psi) and [V, 1] (into V1).
template <class T>
void key_rows(const Mat<T>& phiK, const std::vector<double>& lk, double M, MatView<T> V, std::size_t r0,
              std::size_t n, std::vector<T>& psi, std::vector<T>& V1) {
    const std::size_t F = phiK.shape(1), dv = V.shape(1), w = dv + 1;
    psi.resize(n * F), V1.resize(n * w);
    for (std::size_t r = 0; r < n; ++r) {
        const T s = T(std::exp(lk[r0 + r] - M));
        for (std::size_t f = 0; f < F; ++f) psi[r * F + f] = s * phiK(r0 + r, f);
        for (std::size_t c = 0; c < dv; ++c) V1[r * w + c] = V(r0 + r, c);
        V1[r * w + dv] = T(1);
    }
}

// Sum over row blocks of F x w partials made in parallel, added in block order.
template <class T, class Part>
std::vector<T> block_sum(std::size_t rows, std::size_t size, int threads, Part part) {
    const std::size_t R = kLinearBlockRows, nb = (rows + R - 1) / R;
    std::vector<std::vector<T>> parts(nb, std::vector<T>(size));
    parallel_for(nb, threads, [&](std::size_t b) { part(b * R, std::min(R, rows - b * R), parts[b].data()); });
    std::vector<T> total(size, T(0));
    for (const auto& p : parts)
        for (std::size_t k = 0; k < size; ++k) total[k] += p[k];
    return total;
}

// Row blocks of kLinearBlockRows on up to `threads` threads; the two sums over rows (KV1 over
// the keys, dKV1 over the queries) are per-block partials added in block order, so the
// numbers do not depend on `threads`.
template <class T>
FeatureGradients<T> noncausal_backward(const Mat<T>& phiQ, const Mat<T>& phiK, const std::vector<double>& lk,
                                       MatView<T> V, MatView<T> G, int threads) {
    const std::size_t L = phiQ.shape(0), Lk = phiK.shape(0), F = phiQ.shape(1), dv = V.shape(1), w = dv + 1;
    const std::size_t R = kLinearBlockRows;
    const double M = lk.empty() ? 0.0 : *std::max_element(lk.begin(), lk.end());
    const std::vector<T> kv1 = block_sum<T>(Lk, F * w, threads, [&](std::size_t r0, std::size_t n, T* out) {
        std::vector<T> psi, V1;
        key_rows(phiK, lk, M, V, r0, n, psi, V1);
        gemm<T>(true, false, F, w, n, T(1), psi.data(), F, V1.data(), w, T(0), out, w);
    });
    FeatureGradients<T> g{Mat<T>::from_shape({L, F}), Mat<T>::from_shape({Lk, F}), Mat<T>::from_shape({Lk, dv})};
    const std::vector<T> dkv1 = block_sum<T>(L, F * w, threads, [&](std::size_t r0, std::size_t n, T* out) {
        std::vector<T> num(n * w), a(n * w);
        gemm<T>(false, false, n, w, F, T(1), &phiQ(r0, 0), F, kv1.data(), w, T(0), num.data(), w);
        output_gradient(num.data(), &G(r0, 0), n, dv, a.data());
        gemm<T>(false, true, n, F, w, T(1), a.data(), w, kv1.data(), w, T(0), &g.dphiQ(r0, 0), F);
        gemm<T>(true, false, F, w, n, T(1), &phiQ(r0, 0), F, a.data(), w, T(0), out, w);
    });
    parallel_for((Lk + R - 1) / R, threads, [&](std::size_t b) {
        const std::size_t r0 = b * R, n = std::min(R, Lk - r0);
        std::vector<T> psi, V1;
        key_rows(phiK, lk, M, V, r0, n, psi, V1);
        gemm<T>(false, true, n, F, w, T(1), V1.data(), w, dkv1.data(), w, T(0), &g.dphiK(r0, 0), F);
        gemm<T>(false, false, n, dv, F, T(1), psi.data(), F, dkv1.data(), w, T(0), &g.dV(r0, 0), dv);
        for (std::size_t r = 0; r < n; ++r) {
            const T s = T(std::exp(lk[r0 + r] - M));
            for (std::size_t f = 0; f < F; ++f) g.dphiK(r0 + r, f) *= s;
        }
    });
    return g;
}

// Rows per chunk of the causal pass: each chunk's products are GEMMs of C rows (the pairs
// inside a chunk through its C x C lower triangle), the state between chunks F x (dv + 1).
constexpr std::size_t kCausalChunk = 64;

// x[i * ld + j] = 0 above (upper: below) the diagonal of an n x n block: j > i (j < i).
template <class T>
void mask_triangle(T* x, std::size_t n, std::size_t ld, bool upper) {
    for (std::size_t i = 0; i < n; ++i) {
        if (upper) std::fill(x + i * ld, x + i * ld + i, T(0));
        else std::fill(x + i * ld + i + 1, x + i * ld + n, T(0));
    }
}

// Causal, in chunks of C rows t = [t0, t0 + n) with one shift P_t per chunk (the running max of
// lk through its end; the prefix sums S relative to it, every rescale factor <= 1):
//   forward:  psi_j = exp(lk_j - P_t) phiK_j, [N, D]_t = phiQ_t S + tril(phiQ_t psi_t^T) [V, 1]_t,
//             a_t from them and G_t, dphiQ_t = a_t S^T + tril(a_t [V, 1]_t^T) psi_t,
//             then S += psi_t^T [V, 1]_t;
//   backward (chunks from the last; R the suffix sum of phiQ_i^T a_i over the later chunks,
//             rescaled to P_t): dphiK_t = diag(exp(lk - P_t)) ([V, 1]_t R^T + triu([V, 1]_t a_t^T) phiQ_t),
//             dV_t = psi_t R[:, :dv] + triu(psi_t phiQ_t^T) a_t[:, :dv], then R += phiQ_t^T a_t
// (triu: key j <= query i). The row-by-row recurrences of the header, C rows at a time.
template <class T>
FeatureGradients<T> causal_backward(const Mat<T>& phiQ, const Mat<T>& phiK, const std::vector<double>& lk,
                                    MatView<T> V, MatView<T> G) {
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), dv = V.shape(1), w = dv + 1, C = kCausalChunk;
    const std::size_t nc = (L + C - 1) / C;
    FeatureGradients<T> g{Mat<T>::from_shape({L, F}), Mat<T>::from_shape({L, F}), Mat<T>::from_shape({L, dv})};
    std::vector<T> a(L * w), psi, V1, S(F * w, T(0)), num(C * w), B(C * C);
    std::vector<T> psi_all(L * F), V1_all(L * w);
    std::vector<double> shift(nc);
    double p = -INFINITY;
    for (std::size_t t = 0; t < nc; ++t) {
        const std::size_t t0 = t * C, n = std::min(C, L - t0);
        const double pc = std::max(p, *std::max_element(lk.begin() + std::ptrdiff_t(t0), lk.begin() + std::ptrdiff_t(t0 + n)));
        if (p != -INFINITY && pc != p)
            for (T& x : S) x *= T(std::exp(p - pc));
        shift[t] = p = pc;
        key_rows(phiK, lk, pc, V, t0, n, psi, V1);
        T *ps = psi_all.data() + t0 * F, *v1 = V1_all.data() + t0 * w, *at = a.data() + t0 * w;
        std::copy(psi.begin(), psi.end(), ps);
        std::copy(V1.begin(), V1.end(), v1);
        const T* q = &phiQ(t0, 0);
        gemm<T>(false, false, n, w, F, T(1), q, F, S.data(), w, T(0), num.data(), w);
        gemm<T>(false, true, n, n, F, T(1), q, F, ps, F, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, false);
        gemm<T>(false, false, n, w, n, T(1), B.data(), n, v1, w, T(1), num.data(), w);
        output_gradient(num.data(), &G(t0, 0), n, dv, at);
        gemm<T>(false, true, n, F, w, T(1), at, w, S.data(), w, T(0), &g.dphiQ(t0, 0), F);
        gemm<T>(false, true, n, n, w, T(1), at, w, v1, w, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, false);
        gemm<T>(false, false, n, F, n, T(1), B.data(), n, ps, F, T(1), &g.dphiQ(t0, 0), F);
        gemm<T>(true, false, F, w, n, T(1), ps, F, v1, w, T(1), S.data(), w);
    }
    std::vector<T>& R = S;   // the suffix sums, from zero
    std::fill(R.begin(), R.end(), T(0));
    for (std::size_t t = nc; t-- > 0;) {
        const std::size_t t0 = t * C, n = std::min(C, L - t0);
        if (t + 1 < nc && shift[t] != shift[t + 1])
            for (T& x : R) x *= T(std::exp(shift[t] - shift[t + 1]));
        const T *q = &phiQ(t0, 0), *ps = psi_all.data() + t0 * F, *v1 = V1_all.data() + t0 * w, *at = a.data() + t0 * w;
        T* dk = &g.dphiK(t0, 0);
        gemm<T>(false, true, n, F, w, T(1), v1, w, R.data(), w, T(0), dk, F);
        gemm<T>(false, true, n, n, w, T(1), v1, w, at, w, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, true);
        gemm<T>(false, false, n, F, n, T(1), B.data(), n, q, F, T(1), dk, F);
        for (std::size_t r = 0; r < n; ++r) {
            const T sc = T(std::exp(lk[t0 + r] - shift[t]));
            for (std::size_t f = 0; f < F; ++f) dk[r * F + f] *= sc;
        }
        gemm<T>(false, false, n, dv, F, T(1), ps, F, R.data(), w, T(0), &g.dV(t0, 0), dv);
        gemm<T>(false, true, n, n, F, T(1), ps, F, q, F, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, true);
        gemm<T>(false, false, n, dv, n, T(1), B.data(), n, at, w, T(1), &g.dV(t0, 0), dv);
        gemm<T>(true, false, F, w, n, T(1), q, F, at, w, T(1), R.data(), w);
    }
    return g;
}
}  // namespace

template <class T>
FeatureGradients<T> linear_attention_backward(const Mat<T>& phiQ, const Mat<T>& phiK,
                                              const std::vector<double>& key_log_scale, MatView<T> V, MatView<T> G,
                                              bool causal, int threads) {
    const std::size_t Lk = phiK.shape(0);
    if (phiK.shape(1) != phiQ.shape(1) || V.shape(0) != Lk || G.shape(0) != phiQ.shape(0) || G.shape(1) != V.shape(1))
        throw Error("backward: shapes do not fit: phiQ (L, F), phiK (Lk, F), V (Lk, dv), G (L, dv)");
    if (causal && Lk != phiQ.shape(0)) throw Error("backward: causal attention needs as many keys as queries");
    const std::vector<double> lk = key_log_scale.empty() ? std::vector<double>(Lk, 0.0) : key_log_scale;
    return causal ? causal_backward(phiQ, phiK, lk, V, G) : noncausal_backward(phiQ, phiK, lk, V, G, threads);
}

namespace {
// favor_backward from both (L, F) feature matrices: the causal pass and every case without a
// saved state (backward_saves).
template <class T>
Gradients<T> unfused_backward(const FeatureMap& f, const Estimator<T>& est, MatView<T> Q, MatView<T> K,
                              MatView<T> V, MatView<T> G, bool causal, int threads) {
    const double xs = 1.0 / std::pow(double(Q.shape(1)), 0.25);
    const Features<T> q = compute_features(f, Q, xs, est.W, Side::query, threads);
    const Features<T> k = compute_features(f, K, xs, est.W, Side::key, threads);
    FeatureGradients<T> fg = linear_attention_backward(q.phi, k.phi, k.log_scale, V, G, causal, threads);
    return {feature_vjp(f, Q, xs, est.W, Side::query, q.phi, fg.dphiQ, threads),
            feature_vjp(f, K, xs, est.W, Side::key, k.phi, fg.dphiK, threads), std::move(fg.dV)};
}

}  // namespace

template <class T>
Gradients<T> favor_backward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                            const Mat<T>& G, bool causal, int threads) {
    check_backward_shapes<T>(Q, K, V, G, causal);
    const FeatureMap& f = gradient_map(est.ready_map(), est.rounding);
    if (!backward_saves(f, est.rounding, causal, K.shape(0)))
        return unfused_backward(f, est, Q, K, V, G, causal, threads);
    return fused_backward(est, Q, K, V, G, favor_forward_saved(est, Q, K, V, causal, threads), threads);
}

template <class T>
Gradients<T> favor_backward_saved(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, MatView<T> G,
                                  const ForwardState<T>& state, bool causal, int threads) {
    check_backward_shapes<T>(Q, K, V, G, causal);
    const FeatureMap& f = gradient_map(est.ready_map(), est.rounding);
    if (!state.saved()) return unfused_backward(f, est, Q, K, V, G, causal, threads);
    const std::size_t L = Q.shape(0), F = f.num_features(est.W.shape(0), Q.shape(1)), e = V.shape(1) + 1;
    if (causal || state.out.shape(0) != L || state.out.shape(1) != V.shape(1) || state.den.size() != L ||
        state.KV1.size() != F * e)
        throw Error("backward: the saved state is not the non-causal forward's of these inputs");
    return fused_backward(est, Q, K, V, G, state, threads);
}

template FeatureGradients<float> linear_attention_backward(const Mat<float>&, const Mat<float>&,
                                                          const std::vector<double>&, MatView<float>, MatView<float>,
                                                          bool, int);
template FeatureGradients<double> linear_attention_backward(const Mat<double>&, const Mat<double>&,
                                                           const std::vector<double>&, MatView<double>,
                                                           MatView<double>, bool, int);
template Gradients<float> favor_backward(const Estimator<float>&, const Mat<float>&, const Mat<float>&,
                                         const Mat<float>&, const Mat<float>&, bool, int);
template Gradients<double> favor_backward(const Estimator<double>&, const Mat<double>&, const Mat<double>&,
                                          const Mat<double>&, const Mat<double>&, bool, int);
template Gradients<float> favor_backward_saved(const Estimator<float>&, MatView<float>, MatView<float>,
                                               MatView<float>, MatView<float>, const ForwardState<float>&, bool, int);
template Gradients<double> favor_backward_saved(const Estimator<double>&, MatView<double>, MatView<double>,
                                                MatView<double>, MatView<double>, const ForwardState<double>&, bool,
                                                int);

}  // namespace favor
