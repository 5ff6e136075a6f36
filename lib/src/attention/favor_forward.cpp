// The whole FAVOR estimator from Q, K, V (docs/design.md section 2.2): favor_attention makes
// both (L, F) feature matrices and runs linear attention on them; favor_forward makes the
// features block by block inside the linear-attention passes (keys and queries in blocks of
// fused_rows rows, causal chunks of kLinearBlockRows rows), where the map allows it.
#include "favor/attention/favor_forward.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "favor/attention/linear_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "favor/estimators/estimator.hpp"
#include "attention/fused_features.hpp"
#include "attention/linear_sums.hpp"
#include "core/tile_kernels.hpp"

namespace favor {

template <class T>
Approximation<T> favor_attention(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V,
                                 bool causal, int threads) {
    // x = q / d^{1/4}: the scaling is folded into the feature maps' product (no copies).
    const double xs = 1.0 / std::pow(double(Q.shape(1)), 0.25);
    const FeatureMap& map = est.ready_map();
    if (causal && !map.supports_causal()) throw Error("'" + map.name() + "' has no causal form");
    Features<T> fq = compute_features(map, Q, xs, est.W, Side::query, threads, est.rounding, est.shift);
    Features<T> fk = compute_features(map, K, xs, est.W, Side::key, threads, est.rounding, est.shift);
    std::size_t overflow = fq.overflow + fk.overflow, entries = fq.phi.size() + fk.phi.size();
    Mat<T> out;
    if (causal) {
        out = linear_attention(fq.phi, fk.phi, fk.log_scale, V, causal, threads, map.row_normalised());
    } else {   // linear_attention's two halves, with the stored phiK^T [V, 1] rounded and counted
        Mat<T> KV1 = linear_attention_kv(fk.phi, fk.log_scale, V, threads);
        overflow += round_to(est.rounding, KV1.data(), KV1.size());
        entries += KV1.size();
        out = linear_attention_apply(fq.phi, KV1, threads, map.row_normalised());
    }
    // Without D^{-1} the shifts do not cancel: undo them. The keys were summed relative to the
    // largest key log scale (causal is refused above for such maps, so it is one constant).
    if (!map.row_normalised() && K.shape(0) > 0) {
        const double lk = fk.log_scale.empty() ? 0.0 : max_of(fk.log_scale.data(), fk.log_scale.size());
        for (std::size_t i = 0; i < out.shape(0); ++i) {
            const double ls = fq.log_scale[i] + lk;
            if (ls != 0.0) scale_in_place(out.data() + i * out.shape(1), out.shape(1), T(std::exp(ls)));
        }
    }
    round_to(est.rounding, out.data(), out.size());
    return {std::move(out), std::move(fq), std::move(fk), overflow, entries};
}

template <class T>
Mat<T> favor_forward(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal,
                     int threads) {
    Mat<T> out;
    favor_forward_into(est, Q, K, V, out, causal, threads);
    return out;
}

namespace {
// favor_forward, causal: each chunk's key and query features into buffers the thread that
// runs the chunk keeps (the same per-row shifts as favor_attention): no (L, F) matrix.
template <class T>
void fused_causal(const FusedFeatures<T>& f, MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out,
                  int threads) {
    const std::size_t L = Q.shape(0), F = f.F;
    if (K.shape(0) != L)
        throw Error("causal attention needs as many keys as queries, got " + std::to_string(K.shape(0)) +
                    " keys for " + std::to_string(L) + " queries");
    ChunkFeatures<T> features;
    features.keys = [&](std::size_t r0, std::size_t rows) {
        thread_local std::vector<T> keys;   // apart from f.block's, which holds the queries
        thread_local std::vector<double> key_log;
        T* const phi = grown(keys, rows * F);
        double* const lk = grown(key_log, rows);
        f.into(K, r0, rows, Side::key, phi, lk);
        return std::make_pair(static_cast<const T*>(phi), static_cast<const double*>(lk));
    };
    features.queries = [&](std::size_t r0, std::size_t rows) {
        return static_cast<const T*>(f.block(Q, r0, rows, Side::query).first);
    };
    causal_linear(V.data(), L, F, V.shape(1), out.data(), threads, true, features);
}

// favor_forward, non-causal keys: KV1 = phiK^T [V, 1] (F x (dv + 1)) per block of fused_rows
// rows: features into a cache-resident buffer, each row finished with its own shift lk_j
// while it is in L1 (as compute_features does), then part_b = phiK_b^T diag(exp(lk_j - M_b))
// [V_b, 1] at once, M_b the block's largest lk_j (the factors <= 1 go into a scaled copy of
// V_b, as in linear_attention_kv); KV1 = sum_b exp(M_b - M) part_b, M = max_b M_b, in block
// order (the common factor exp(M) cancels in the normalisation). M into *common when given.
template <class T>
std::vector<T> fused_kv1(const FusedFeatures<T>& f, MatView<T> K, MatView<T> V, int threads,
                         double* common = nullptr) {
    const std::size_t Lk = K.shape(0), F = f.F, dv = V.shape(1), e = dv + 1;
    const std::size_t kb = fused_rows(Lk, F, f.d, sizeof(T)), nk = (Lk + kb - 1) / kb;
    // The partials, one F x (dv + 1) slot per block, in storage the calling thread keeps
    // (a fresh multi-MB buffer per call costs a page fault per 4 kB).
    thread_local std::vector<T> kept;
    T* const parts = grown(kept, nk * F * e);   // the workers use the caller's storage, not their own
    std::vector<double> shift(nk, 0.0);
    const double work = f.map.feature_flops(0, Lk, f.W.shape(0), f.d) + 2.0 * double(Lk * F * e);
    parallel_for(nk, threads_for(work, threads), [&](std::size_t blk) {   // small L: no pool wake-up
        const std::size_t r0 = blk * kb, rows = std::min(kb, Lk - r0);
        const auto [phi, lk] = f.block(K, r0, rows, Side::key);
        shift[blk] = own_kv(phi, lk, V.data() + r0 * dv, rows, F, dv, parts + blk * F * e);
    });
    std::vector<T> KV1(F * e);
    const double smax = add_parts(parts, shift, F * e, KV1.data(), threads);
    if (common) *common = smax;
    return KV1;
}

// favor_forward, non-causal queries, per block: features (per-row shift) -> times KV1 ->
// normalise, the numerators straight into the output rows, then each row's denominator
// phiQ_i . KV1[:, dv] while the features are in cache (query_rows), kept in den (L) when given.
template <class T>
void fused_queries(const FusedFeatures<T>& f, MatView<T> Q, const std::vector<T>& KV1, std::size_t dv, Mat<T>& out,
                   int threads, T* den = nullptr) {
    const std::size_t L = Q.shape(0), F = f.F, e = dv + 1;
    const std::size_t rb = fused_rows(L, F, f.d, sizeof(T)), nq = (L + rb - 1) / rb;
    const double work = f.map.feature_flops(L, 0, f.W.shape(0), f.d) + 2.0 * double(L * F * e);
    parallel_for(nq, threads_for(work, threads), [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        query_rows(f.block(Q, r0, rows, Side::query).first, rows, F, KV1.data(), dv, out.data() + r0 * dv, true,
                   den ? den + r0 : nullptr);
    });
}
}  // namespace

// Half emulation and unshifted features: the unfused path only (docs/design.md 2.6).
bool forward_fused(const FeatureMap& map, Rounding rounding, bool shift, bool causal) {
    return rounding == Rounding::none && shift && map.blockwise_key_shift() && map.row_normalised() &&
           (!causal || map.supports_causal());
}

template <class T>
void favor_forward_into(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out,
                        bool causal, int threads) {
    const FeatureMap& map = est.ready_map();
    const std::size_t L = Q.shape(0), dv = V.shape(1);
    if (K.shape(0) == 0 || !forward_fused(map, est.rounding, est.shift, causal)) {
        out = favor_attention(est, Q, K, V, causal, threads).out;
        return;
    }
    const FusedFeatures<T> f(map, est.W, Q.shape(1));
    if (out.shape(0) != L || out.shape(1) != dv) out = Mat<T>::from_shape({L, dv});   // else reused as it is
    if (causal) fused_causal(f, Q, K, V, out, threads);
    else fused_queries(f, Q, fused_kv1(f, K, V, threads), dv, out, threads);
}

template <class T>
void favor_feature_pass(const Estimator<T>& est, MatView<T> Q, MatView<T> K, int threads) {
    const FeatureMap& map = est.ready_map();
    if (!forward_fused(map, est.rounding, est.shift, false))
        throw std::logic_error("favor_feature_pass: '" + map.name() + "' does not run fused");
    const FusedFeatures<T> f(map, est.W, Q.shape(1));
    const std::size_t L = Q.shape(0), Lk = K.shape(0);
    const std::size_t qb = fused_rows(L, f.F, f.d, sizeof(T)), kb = fused_rows(Lk, f.F, f.d, sizeof(T));
    const std::size_t nq = (L + qb - 1) / qb, nk = (Lk + kb - 1) / kb;
    const double work = map.feature_flops(L, Lk, est.W.shape(0), f.d);
    parallel_for(nq + nk, threads_for(work, threads), [&](std::size_t blk) {   // as fused_kv1 and fused_queries
        if (blk < nq) f.block(Q, blk * qb, std::min(qb, L - blk * qb), Side::query);
        else f.block(K, (blk - nq) * kb, std::min(kb, Lk - (blk - nq) * kb), Side::key);
    });
}

bool backward_saves(const FeatureMap& map, Rounding rounding, bool causal, std::size_t keys) {
    return keys > 0 && !causal && forward_fused(map, rounding, true, causal) && map.gradient_refusal().empty();
}

template <class T>
ForwardState<T> favor_forward_saved(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V,
                                    bool causal, int threads) {
    const FeatureMap& map = est.ready_map();
    ForwardState<T> s;
    if (!backward_saves(map, est.rounding, causal, K.shape(0))) {
        s.out = favor_forward(est, Q, K, V, causal, threads);
        return s;
    }
    const std::size_t L = Q.shape(0), dv = V.shape(1);
    const FusedFeatures<T> f(map, est.W, Q.shape(1));
    s.out = Mat<T>::from_shape({L, dv});
    s.den.resize(L);
    s.KV1 = fused_kv1(f, K, V, threads, &s.key_shift);
    fused_queries(f, Q, s.KV1, dv, s.out, threads, s.den.data());
    return s;
}

#define FAVOR_INSTANTIATE(T)                                                                        \
    template Approximation<T> favor_attention<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, bool, int); \
    template Mat<T> favor_forward<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, bool, int); \
    template void favor_feature_pass<T>(const Estimator<T>&, MatView<T>, MatView<T>, int); \
    template void favor_forward_into<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, Mat<T>&, bool, int); \
    template ForwardState<T> favor_forward_saved<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, bool, int);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
