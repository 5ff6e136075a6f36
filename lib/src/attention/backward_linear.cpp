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

// Rows [r0, r0 + n) of the keys as psi (exp(lk_j - M) phiK_j, n x F) and [V, 1] (n x (dv + 1)).
template <class T>
void key_rows(const Mat<T>& phiK, const std::vector<double>& lk, double M, MatView<T> V, std::size_t r0,
              std::size_t n, T* psi, T* V1) {
    const std::size_t F = phiK.shape(1), dv = V.shape(1), w = dv + 1;
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
        std::vector<T> psi(n * F), V1(n * w);
        key_rows(phiK, lk, M, V, r0, n, psi.data(), V1.data());
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
        std::vector<T> psi(n * F), V1(n * w);
        key_rows(phiK, lk, M, V, r0, n, psi.data(), V1.data());
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
// lk through its end; every rescale factor <= 1):
//   forward:  psi_j = exp(lk_j - P_t) phiK_j; S_t = the sum of psi_j^T [v_j, 1] over the chunks
//             before t, relative to P_t; [N, D]_t = phiQ_t S_t + tril(phiQ_t psi_t^T) [V, 1]_t,
//             a_t from them and G_t, dphiQ_t = a_t S_t^T + tril(a_t [V, 1]_t^T) psi_t;
//   backward: R_t = the sum of phiQ_i^T a_i over the chunks after t, relative to P_t;
//             dphiK_t = diag(exp(lk - P_t)) ([V, 1]_t R_t^T + triu([V, 1]_t a_t^T) phiQ_t),
//             dV_t = psi_t R_t[:, :dv] + triu(psi_t phiQ_t^T) a_t[:, :dv]
// (tril / triu: key j <= query i). Each chunk's own sums and products are independent of the
// others (parallel over chunks, each on one thread); S_t and R_t are running sums of the
// chunks' own sums in chunk order (serial, F (dv + 1) per chunk): the numbers do not depend on
// the threads. The row-by-row recurrences of the header, C rows at a time.
template <class T>
FeatureGradients<T> causal_backward(const Mat<T>& phiQ, const Mat<T>& phiK, const std::vector<double>& lk,
                                    MatView<T> V, MatView<T> G, int threads) {
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), dv = V.shape(1), w = dv + 1, C = kCausalChunk;
    const std::size_t nc = (L + C - 1) / C, size = F * w;
    FeatureGradients<T> g{Mat<T>::from_shape({L, F}), Mat<T>::from_shape({L, F}), Mat<T>::from_shape({L, dv})};
    std::vector<double> shift(nc);
    double p = -INFINITY;
    for (std::size_t t = 0; t < nc; ++t)
        shift[t] = p = std::max(p, *std::max_element(lk.begin() + std::ptrdiff_t(t * C),
                                                     lk.begin() + std::ptrdiff_t(std::min(L, (t + 1) * C))));
    std::vector<T> a(L * w), psi(L * F), V1(L * w), sums(nc * size);
    const int th = threads_for(8.0 * double(L) * double(F) * double(w + C), threads);
    auto chunk = [&](std::size_t t) { return std::make_pair(t * C, std::min(C, L - t * C)); };
    // Running sums in place: slot t holds the chunk sum to be added (own[t - 1] forward, own[t + 1]
    // backward), and becomes the sum of every earlier (later) chunk, rescaled to P_t.
    auto running = [&](bool forward) {
        T* s = sums.data();
        std::fill(s + (forward ? 0 : nc - 1) * size, s + (forward ? 1 : nc) * size, T(0));
        for (std::size_t k = 1; k < nc; ++k) {
            const std::size_t t = forward ? k : nc - 1 - k, u = forward ? t - 1 : t + 1;
            const T f = T(std::exp(forward ? shift[u] - shift[t] : shift[t] - shift[u]));
            for (std::size_t e = 0; e < size; ++e) s[t * size + e] = (s[u * size + e] + s[t * size + e]) * f;
        }
    };
    parallel_for(nc, th, [&](std::size_t t) {   // psi, [V, 1] and each chunk's psi^T [V, 1] (into slot t + 1)
        const auto [t0, n] = chunk(t);
        key_rows(phiK, lk, shift[t], V, t0, n, &psi[t0 * F], &V1[t0 * w]);
        if (t + 1 < nc)
            gemm<T>(true, false, F, w, n, T(1), &psi[t0 * F], F, &V1[t0 * w], w, T(0), &sums[(t + 1) * size], w);
    });
    running(true);
    parallel_for(nc, th, [&](std::size_t t) {   // a and dphiQ from S_t
        const auto [t0, n] = chunk(t);
        std::vector<T> num(n * w), B(n * n);
        const T *q = &phiQ(t0, 0), *ps = &psi[t0 * F], *v1 = &V1[t0 * w], *S = &sums[t * size];
        T* at = &a[t0 * w];
        gemm<T>(false, false, n, w, F, T(1), q, F, S, w, T(0), num.data(), w);
        gemm<T>(false, true, n, n, F, T(1), q, F, ps, F, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, false);
        gemm<T>(false, false, n, w, n, T(1), B.data(), n, v1, w, T(1), num.data(), w);
        output_gradient(num.data(), &G(t0, 0), n, dv, at);
        gemm<T>(false, true, n, F, w, T(1), at, w, S, w, T(0), &g.dphiQ(t0, 0), F);
        gemm<T>(false, true, n, n, w, T(1), at, w, v1, w, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, false);
        gemm<T>(false, false, n, F, n, T(1), B.data(), n, ps, F, T(1), &g.dphiQ(t0, 0), F);
    });
    parallel_for(nc, th, [&](std::size_t t) {   // each chunk's phiQ^T a (into slot t - 1)
        const auto [t0, n] = chunk(t);
        if (t > 0) gemm<T>(true, false, F, w, n, T(1), &phiQ(t0, 0), F, &a[t0 * w], w, T(0), &sums[(t - 1) * size], w);
    });
    running(false);
    parallel_for(nc, th, [&](std::size_t t) {   // dphiK and dV from R_t
        const auto [t0, n] = chunk(t);
        std::vector<T> B(n * n);
        const T *q = &phiQ(t0, 0), *ps = &psi[t0 * F], *v1 = &V1[t0 * w], *at = &a[t0 * w], *R = &sums[t * size];
        T* dk = &g.dphiK(t0, 0);
        gemm<T>(false, true, n, F, w, T(1), v1, w, R, w, T(0), dk, F);
        gemm<T>(false, true, n, n, w, T(1), v1, w, at, w, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, true);
        gemm<T>(false, false, n, F, n, T(1), B.data(), n, q, F, T(1), dk, F);
        for (std::size_t r = 0; r < n; ++r) {
            const T sc = T(std::exp(lk[t0 + r] - shift[t]));
            for (std::size_t f = 0; f < F; ++f) dk[r * F + f] *= sc;
        }
        gemm<T>(false, false, n, dv, F, T(1), ps, F, R, w, T(0), &g.dV(t0, 0), dv);
        gemm<T>(false, true, n, n, F, T(1), ps, F, q, F, T(0), B.data(), n);
        mask_triangle(B.data(), n, n, true);
        gemm<T>(false, false, n, dv, n, T(1), B.data(), n, at, w, T(1), &g.dV(t0, 0), dv);
    });
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
    return causal ? causal_backward(phiQ, phiK, lk, V, G, threads) : noncausal_backward(phiQ, phiK, lk, V, G, threads);
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
