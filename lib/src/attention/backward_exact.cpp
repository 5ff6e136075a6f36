// The gradient of exact softmax attention (docs/design.md section 2.7):
//   S = Q K^T / sqrt d, A = softmax(S) row-wise, Out = A V, G = dLoss/dOut,
//   dV = A^T G, dP = G V^T, dS = A o (dP - delta 1^T) with delta_i = G_i . Out_i,
//   dQ = dS K / sqrt d, dK = dS^T Q / sqrt d
// (the softmax Jacobian diag(a) - a a^T applied to each row of dP). FlashAttention-2's
// schedule (Dao 2023, Alg. 2): from the forward's Out and row log-sum-exps lse, one pass over
// (key block, query tile) pairs recomputes P = exp(S - lse) = A on the tile and makes five
// products there (S, P^T G, G V^T, dS^T Q, dS K): dK and dV of a key block gather over its
// query tiles, dQ over the key blocks in a fixed number of chunks (attention_blocks.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_exact.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "core/tile_kernels.hpp"

namespace favor {

namespace {
static_assert(kExactBackwardKeys % tiles::panel_keys<float>() == 0 &&
              kExactBackwardKeys % tiles::panel_keys<double>() == 0);

// The operands in the tile kernels' layouts (tile_kernels.hpp): K^T and V^T of each key block
// apart (d x kExactBackwardKeys, zeros past the last key), so that a score panel's rows are
// kExactBackwardKeys entries apart rather than Lk (rows Lk apart map to few L1 sets); each
// row's lse and delta as T (exp's shift, dP's offset).
template <class T>
struct SavedInputs {
    const Mat<T>&Q, &K, &G;
    bool causal;
    std::size_t L, Lk, d, dv, nkb;
    T alpha;
    std::vector<T> Kt, Vt, lse, delta;
    SavedInputs(const Mat<T>& Q_, const Mat<T>& K_, const Mat<T>& V, const Mat<T>& G_, const Mat<T>& out,
                const std::vector<double>& lse_d, bool causal_)
        : Q(Q_), K(K_), G(G_), causal(causal_), L(Q_.shape(0)), Lk(K_.shape(0)), d(Q_.shape(1)), dv(V.shape(1)),
          nkb((Lk + kExactBackwardKeys - 1) / kExactBackwardKeys), alpha(T(1.0 / std::sqrt(double(d)))),
          Kt(nkb * d * kExactBackwardKeys, T(0)), Vt(nkb * dv * kExactBackwardKeys, T(0)), lse(L), delta(L) {
        constexpr std::size_t bk = kExactBackwardKeys;
        for (std::size_t j = 0; j < Lk; ++j) {
            const std::size_t b = j / bk, r = j % bk;
            for (std::size_t k = 0; k < d; ++k) Kt[(b * d + k) * bk + r] = K(j, k);
            for (std::size_t c = 0; c < dv; ++c) Vt[(b * dv + c) * bk + r] = V(j, c);
        }
        for (std::size_t i = 0; i < L; ++i) {
            double dl = 0;
            for (std::size_t c = 0; c < dv; ++c) dl += double(G(i, c)) * double(out(i, c));
            lse[i] = T(lse_d[i]);
            delta[i] = T(dl);
        }
    }
};

// P = exp(S - lse) and dS = P o (dP - delta) of one tile's rows, in place of S and dP (row
// stride ld): row r (query i0 + r) sees keys j0 .. j0 + n - 1 of the block's nk; the others 0.
template <class T>
void softmax_grad_tile(const SavedInputs<T>& in, std::size_t i0, std::size_t rows, std::size_t j0, std::size_t nk,
                       T* P, T* dP, std::size_t ld) {
    using B = tiles::Vec<T>;
    constexpr std::size_t W = B::size;
    for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = i0 + r;
        const std::size_t n = !in.causal ? nk : (i < j0 ? 0 : std::min(nk, i + 1 - j0));
        T *p = P + r * ld, *q = dP + r * ld;
        exp_shifted(p, n, in.lse[i]);   // vectorised (vmath.hpp)
        const B dl(in.delta[i]);
        std::size_t c = 0;
        for (; c + W <= n; c += W)
            (B::load_unaligned(p + c) * (B::load_unaligned(q + c) - dl)).store_unaligned(q + c);
        for (; c < n; ++c) q[c] = p[c] * (q[c] - in.delta[i]);
        std::fill(p + n, p + nk, T(0));
        std::fill(q + n, q + nk, T(0));
    }
}

// Keys [j0, j0 + nk) against the query tiles that see them (all; causal: from the tile of
// query j0 on): dV and dK of the block (rows of the outputs, owned by this block) and the
// block's dS K added into dQ (the chunk's partial). Five products per pair.
template <class T>
void key_block(const SavedInputs<T>& in, std::size_t j0, std::size_t nk, T* dK, T* dV, T* dQ, std::vector<T>& P,
               std::vector<T>& dP) {
    const std::size_t bq = kExactBackwardQueryRows, ld = kExactBackwardKeys, d = in.d, dv = in.dv;
    const std::size_t nkp = round_up(nk, tiles::panel_keys<T>());
    const T* Kt = in.Kt.data() + j0 * d;   // the block's K^T and V^T (j0 = b kExactBackwardKeys)
    const T* Vt = in.Vt.data() + j0 * dv;
    std::fill(dK, dK + nk * d, T(0));
    std::fill(dV, dV + nk * dv, T(0));
    for (std::size_t i0 = in.causal ? j0 / bq * bq : 0; i0 < in.L; i0 += bq) {
        const std::size_t rows = std::min(bq, in.L - i0);
        tiles::times_transposed(&in.Q(i0, 0), rows, d, Kt, ld, nkp, in.alpha, P.data(), ld);
        tiles::times_transposed(&in.G(i0, 0), rows, dv, Vt, ld, nkp, T(1), dP.data(), ld);
        softmax_grad_tile(in, i0, rows, j0, nk, P.data(), dP.data(), ld);
        tiles::times(P.data(), nk, 1, ld, rows, &in.G(i0, 0), dv, dv, dV, dv, true);     // dV += P^T G
        tiles::times(dP.data(), nk, 1, ld, rows, &in.Q(i0, 0), d, d, dK, d, true);       // dK += dS^T Q
        tiles::times(dP.data(), rows, ld, 1, nk, &in.K(j0, 0), d, d, dQ + i0 * d, d, true);   // dQ += dS K
    }
    scale_in_place(dK, nk * d, in.alpha);
}

}  // namespace

template <class T>
void check_backward_shapes(MatView<T> Q, MatView<T> K, MatView<T> V, MatView<T> G, bool causal) {
    if (K.shape(1) != Q.shape(1) || V.shape(0) != K.shape(0) || G.shape(0) != Q.shape(0) || G.shape(1) != V.shape(1))
        throw Error("backward: shapes do not fit: Q (L, d), K (Lk, d), V (Lk, dv), G (L, dv)");
    if (causal && K.shape(0) != Q.shape(0)) throw Error("backward: causal attention needs as many keys as queries");
}
template void check_backward_shapes<float>(MatView<float>, MatView<float>, MatView<float>, MatView<float>, bool);
template void check_backward_shapes<double>(MatView<double>, MatView<double>, MatView<double>, MatView<double>, bool);

template <class T>
Gradients<T> exact_attention_backward_saved(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G,
                                            const Mat<T>& out, const std::vector<double>& lse, bool causal,
                                            int threads) {
    check_backward_shapes<T>(Q, K, V, G, causal);
    const std::size_t L = Q.shape(0), Lk = K.shape(0), d = Q.shape(1), dv = V.shape(1);
    if (out.shape(0) != L || out.shape(1) != dv || lse.size() != L)
        throw Error("backward: the saved forward does not fit: Out (L, dv) and lse (L)");
    Gradients<T> g{Mat<T>::from_shape({L, d}), Mat<T>::from_shape({Lk, d}), Mat<T>::from_shape({Lk, dv})};
    g.dQ.fill(T(0));
    if (L == 0 || Lk == 0) {
        g.dK.fill(T(0)), g.dV.fill(T(0));
        return g;
    }
    const SavedInputs<T> in(Q, K, V, G, out, lse, causal);
    const std::size_t bk = kExactBackwardKeys, nkb = in.nkb;
    const std::size_t chunks = std::min(kExactBackwardChunks, nkb);
    // dQ partials of chunks 1.. (chunk 0 adds into dQ itself), added in chunk order below.
    std::vector<T> parts((chunks - 1) * L * d, T(0));
    parallel_for(chunks, threads, [&](std::size_t c) {
        T* dq = c == 0 ? g.dQ.data() : parts.data() + (c - 1) * L * d;
        std::vector<T> P(kExactBackwardQueryRows * bk), dP(kExactBackwardQueryRows * bk);
        for (std::size_t b = c; b < nkb; b += chunks) {
            const std::size_t j0 = b * bk;
            key_block(in, j0, std::min(bk, Lk - j0), &g.dK(j0, 0), &g.dV(j0, 0), dq, P, dP);
        }
    });
    const std::size_t rb = kExactBackwardQueryRows, nrb = (L + rb - 1) / rb;
    parallel_for(nrb, threads, [&](std::size_t b) {   // dQ = (partial 0 + partial 1 + ...) / sqrt d
        const std::size_t k0 = b * rb * d, k1 = std::min(L, (b + 1) * rb) * d;
        for (std::size_t c = 1; c < chunks; ++c) {
            const T* p = parts.data() + (c - 1) * L * d;
            for (std::size_t k = k0; k < k1; ++k) g.dQ.data()[k] += p[k];
        }
        scale_in_place(g.dQ.data() + k0, k1 - k0, in.alpha);
    });
    return g;
}

template <class T>
Gradients<T> exact_attention_backward(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G, bool causal,
                                      int threads) {
    check_backward_shapes<T>(Q, K, V, G, causal);
    const ExactForward<T> f = exact_attention_saved(Q, K, V, causal, threads);
    return exact_attention_backward_saved(Q, K, V, G, f.out, f.lse, causal, threads);
}

template Gradients<float> exact_attention_backward(const Mat<float>&, const Mat<float>&, const Mat<float>&,
                                                   const Mat<float>&, bool, int);
template Gradients<double> exact_attention_backward(const Mat<double>&, const Mat<double>&, const Mat<double>&,
                                                    const Mat<double>&, bool, int);

template Gradients<float> exact_attention_backward_saved(const Mat<float>&, const Mat<float>&, const Mat<float>&,
                                                         const Mat<float>&, const Mat<float>&, const std::vector<double>&,
                                                         bool, int);
template Gradients<double> exact_attention_backward_saved(const Mat<double>&, const Mat<double>&, const Mat<double>&,
                                                          const Mat<double>&, const Mat<double>&,
                                                          const std::vector<double>&, bool, int);

}  // namespace favor
