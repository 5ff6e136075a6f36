// Hybrid attention, the fast path (docs/design.md section 2.8): window / sinks supports in
// O(L (w + s + F) d) time. Query rows in blocks of kRows = 32 rows; for block [r0, r1):
//  - explicit keys: the sinks' chunks [0, first C) and the band [kp C, kq C) (the rows' windows'
//    hull rounded out to chunks of C = 32 keys), every pair there made as the reference makes
//    it: the exact score s_ij = q_i.k_j / sqrt(d) on E(i), the feature product
//    phi~(x_i).phi~(y_j) with its log scales lq_i + lk_j on the other visible keys;
//  - the remainder keys in whole chunks farther away: causal, the prefix sum over the chunks
//    [first, kp) of Psi_j [v_j, 1] (Psi_j = exp(lk_j - g) phi~(y_j), g the largest lk_j
//    summed); non-causal, that prefix plus the suffix sum over [kq, nkb) (summed outside the
//    band directly, never the total minus the band: every term added is a remainder term,
//    so no cancellation, and each sum is relative to the largest lk_j it holds, so no key
//    with a large log scale elsewhere in the sequence underflows what a row sees);
//  - one shift per row over both parts, c_i = max(max_{j in E(i)} s_ij, lq_i + max_{j not in
//    E(i)} lk_j) (the reference's: lq_i + g for the block sums, g their largest lk_j), so no
//    weight overflows and the largest exact one is 1;
//  - Out_i = (sum_j w_ij v_j + f_i phi~(x_i) G) / (sum_j w_ij + f_i phi~(x_i) z),
//    f_i = exp(lq_i + g - c_i), [G, z] the block sums.
// The explicit keys are the rows of a score tile St (n x 32) whose column i is query r0 + i
// (the "transposed band"): the value kernel's product of K's rows with Q_b^T (so no K^T), the
// feature products likewise (phi~(Y)'s rows against phi~(X_b)^T) on the chunks holding a
// remainder pair; a key's support test is a compare over the 32 lanes, the shift, the exps
// and the weights are vector passes over St's rows, and the values read St as P^T. The query
// rows run in groups of 256, each group's features made at once, then its blocks.
#include "favor/attention/hybrid_fast.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "favor/attention/hybrid_attention.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/features.hpp"
#include "attention/linear_sums.hpp"
#include "core/tile_kernels.hpp"
#include "core/transpose.hpp"

namespace favor {

namespace {

// Fixed sizes (the numbers depend on them, never on the threads): query rows per block (the
// lanes of the score tile) and keys per chunk (the remainder sums' blocks, the hull's unit).
// A block's explicit keys are the hull of w + 31 causal, 2w + 30 non-causal keys rounded out to
// 32: 96 and 160 for w = 64.
constexpr std::size_t kRows = 32, kChunk = 32;
constexpr double kEmpty = -std::numeric_limits<double>::infinity();   // the shift of an empty sum

// The remainder sums of the query blocks: block blk adds [G, z] at G + at[blk] size, relative
// to g[blk] (kEmpty: no sums, at[blk] unused). Causal G is the prefix sum over the chunks
// [first, kp) (slot kp - first - 1 of the chunks' own sums, overwritten by the prefix sums in
// place); non-causal it is that prefix plus the suffix sum over [kq, nkb), both rescaled to the
// larger shift and added (G + blk size, one slot per block). Each F x (dv + 1).
template <class T>
struct KeySums {
    std::size_t first = 0, nkb = 0, size = 0;
    const T* G = nullptr;          // in storage the calling thread keeps
    std::vector<std::size_t> at;   // per query block
    std::vector<double> g;         // per query block
};

// A query block's explicit key ranges (one after another as the score tile's rows, range r
// from row off[r]) and its chunk sums: prefix chunks [first, kp), suffix chunks [kq, nkb).
struct Plan {
    std::size_t kp = 0, kq = 0, n = 0, count = 0;
    std::size_t a[2] = {0, 0}, b[2] = {0, 0}, off[2] = {0, 0};
};

template <class T>
struct Fast {
    Fast(MatView<T> q, MatView<T> k, MatView<T> v, const HybridSupport& hs, bool c, std::size_t dq, std::size_t dvv,
         std::size_t f)
        : Q(q), K(k), V(v), h(hs), causal(c), d(dq), dv(dvv), F(f) {}
    MatView<T> Q, K, V;
    HybridSupport h;
    bool causal = false;
    std::size_t d = 0, dv = 0, F = 0;   // F = 0: no remainder ("none")
    // The keys' features (Lk x F) and log scales, as compute_features makes them, in storage
    // the calling thread keeps (a fresh 4 MB matrix per call costs a page fault per 4 kB); the
    // queries' are made per group of rows (fast_into) and read through Scratch::phiq, lq.
    const T* phik = nullptr;
    const double* lk = nullptr;
    KeySums<T> sums;
    std::vector<Plan> plans;   // per query block (key_sums makes them)
};

// Prefix chunks: every key j < k1 <= r0 - w + 1 has j <= i - w for every row i >= r0;
// suffix chunks: every key j >= k0 >= r1 - 1 + w has j >= i + w for every row i < r1.
template <class T>
Plan plan(const Fast<T>& p, std::size_t r0, std::size_t r1) {
    const std::size_t Lk = p.K.shape(0), w = p.h.window, nkb = p.sums.nkb, first = p.sums.first, B = kChunk;
    Plan pl;
    pl.kp = r0 + 1 < w ? 0 : (r0 + 1 - w >= Lk ? nkb : (r0 + 1 - w) / B);
    pl.kp = std::max(pl.kp, first);
    pl.kq = p.causal ? nkb : std::max(pl.kp, std::min(nkb, (r1 - 1 + w + B - 1) / B));
    const std::size_t end = p.causal ? std::min(r1, Lk) : Lk;
    const std::size_t sink_hi = std::min(first * B, end), lo = std::min(pl.kp * B, end), hi = std::min(pl.kq * B, end);
    auto add = [&](std::size_t a, std::size_t b) {
        if (a >= b) return;
        if (pl.count && pl.b[pl.count - 1] == a) {   // adjacent to the last: one range
            pl.b[pl.count - 1] = b;
            pl.n += b - a;
            return;
        }
        pl.a[pl.count] = a, pl.b[pl.count] = b, pl.off[pl.count] = pl.n;
        pl.n += b - a, ++pl.count;
    };
    add(0, sink_hi);
    add(lo, hi);
    return pl;
}

// The running sums of the chunks' own sums `own` (n = nkb - first slots, slot b relative to
// shift[b]) in chunk order, in double, each slot relative to its running shift: the prefix
// sums pre[k] over [first, k) and, non-causal, from the last chunk backward the suffix sums
// suf[k] over [k, nkb), and from them every block's sums as KeySums says. The entries are
// independent: split in fixed pieces of 128 over the threads, each entry summed in chunk order
// (the numbers do not depend on the threads). Causal: the prefix sums overwrite `own`
// (slot b holds pre[first + b + 1]). Non-causal: a piece's prefix sums stay in a buffer of its
// thread, and the blocks' sums are written as the backward pass reaches their suffix (no prefix
// or suffix array, no pass over them per block).
template <class T>
void running_sums(T* own, const std::vector<double>& shift, const std::vector<Plan>& plans, KeySums<T>& s,
                  bool causal, int threads) {
    const std::size_t size = s.size, first = s.first, n = s.nkb - first, piece = 128, dirs = causal ? 1 : 2;
    const std::size_t nb = plans.size(), none = std::size_t(-1);
    // Per direction and step t: the factor on the running sum (rescale) and on chunk b's own (f);
    // the shift of pre[k] (slot k, kEmpty: empty) and suf[k].
    std::vector<double> rescale(dirs * n, 1.0), f(dirs * n, 1.0);
    std::vector<double> shifts[2] = {std::vector<double>(s.nkb + 1, kEmpty), std::vector<double>(s.nkb + 1, kEmpty)};
    for (std::size_t dir = 0; dir < dirs; ++dir) {
        const bool backward = dir == 1;
        double rs = kEmpty;   // the running shift before step t
        for (std::size_t t = 0; t < n; ++t) {
            const std::size_t b = backward ? n - 1 - t : t;
            const double m = std::max(rs, shift[b]);
            if (rs != kEmpty && rs != m) rescale[dir * n + t] = std::exp(rs - m);
            f[dir * n + t] = std::exp(shift[b] - m);
            rs = m;
            shifts[dir][first + b + (backward ? 0 : 1)] = m;
        }
    }
    // Each block's shift and where its sums are; non-causal, the factors on its prefix and
    // suffix (a block's kq, the suffix slot that completes its sums, never decreases with the
    // block: the backward pass meets the blocks from the last one down).
    s.at.assign(nb, none);
    s.g.assign(nb, kEmpty);
    std::vector<T> fp(nb, T(0)), fs(nb, T(0));
    for (std::size_t blk = 0; blk < nb; ++blk) {
        const Plan& pl = plans[blk];
        const double ps = shifts[0][pl.kp], ss = causal ? kEmpty : shifts[1][pl.kq];
        const double g = std::max(ps, ss);
        if (g == kEmpty) continue;
        s.g[blk] = g;
        if (causal) {
            s.at[blk] = pl.kp - first - 1;
            continue;
        }
        s.at[blk] = blk;
        if (ps != kEmpty && ss != kEmpty) fp[blk] = T(std::exp(ps - g)), fs[blk] = T(std::exp(ss - g));
    }
    thread_local std::vector<T> G_kept;
    T* G = causal ? own : grown(G_kept, nb * size);
    s.G = G;
    const std::size_t pieces = (size + piece - 1) / piece;
    parallel_for(pieces, threads_for(4.0 * double(dirs * n * size), threads), [&](std::size_t item) {
        const std::size_t k0 = item * piece, k1 = std::min(size, k0 + piece), len = k1 - k0;
        thread_local std::vector<T> pre_kept;
        T* pre = causal ? nullptr : grown(pre_kept, (n + 1) * piece);   // slot k - first: pre[k]'s piece
        double acc[piece] = {};
        for (std::size_t b = 0; b < n; ++b) {   // forward: pre[first + b + 1]
            const double rsc = rescale[b], fb = f[b];
            const T* o = own + b * size + k0;
            T* dst = causal ? own + b * size + k0 : pre + (b + 1) * piece;
            for (std::size_t k = 0; k < len; ++k) {
                acc[k] = acc[k] * rsc + fb * double(o[k]);
                dst[k] = T(acc[k]);
            }
        }
        if (causal) return;
        // The blocks with no suffix (kq = nkb): their prefix. hi: the blocks below are still to do.
        std::size_t hi = nb;
        for (; hi > 0 && plans[hi - 1].kq == s.nkb; --hi)
            if (s.g[hi - 1] != kEmpty) std::copy_n(pre + (plans[hi - 1].kp - first) * piece, len, G + (hi - 1) * size + k0);
        std::fill(acc, acc + piece, 0.0);
        for (std::size_t t = 0; t < n; ++t) {   // backward: suf[first + b]
            const std::size_t b = n - 1 - t;
            const double rsc = rescale[n + t], fb = f[n + t];
            const T* o = own + b * size + k0;
            for (std::size_t k = 0; k < len; ++k) acc[k] = acc[k] * rsc + fb * double(o[k]);
            for (; hi > 0 && plans[hi - 1].kq == first + b; --hi) {
                const std::size_t blk = hi - 1;
                if (s.g[blk] == kEmpty) continue;
                T* dst = G + blk * size + k0;
                if (plans[blk].kp == first) {   // no prefix: the suffix
                    for (std::size_t k = 0; k < len; ++k) dst[k] = T(acc[k]);
                    continue;
                }
                const T* pk = pre + (plans[blk].kp - first) * piece;
                const T a = fp[blk], c = fs[blk];
                for (std::size_t k = 0; k < len; ++k) dst[k] = a * pk[k] + c * T(acc[k]);
            }
        }
    });
}

// Every query block's plan (p.plans), then the key chunks' own sums (own_kv: Psi relative to
// the chunk's largest lk_j), each chunk on one thread, then the running sums and every block's
// sums (running_sums) into p.sums.
template <class T>
void key_sums(Fast<T>& p, std::size_t nb, int threads) {
    KeySums<T>& s = p.sums;
    const std::size_t Lk = p.K.shape(0), F = p.F, dv = p.dv, L = p.Q.shape(0);
    s.nkb = (Lk + kChunk - 1) / kChunk;
    s.first = std::min(s.nkb, (p.h.sinks + kChunk - 1) / kChunk);
    s.size = F * (dv + 1);
    const std::size_t n = s.nkb - s.first;
    p.plans.resize(nb);
    for (std::size_t blk = 0; blk < nb; ++blk) p.plans[blk] = plan(p, blk * kRows, std::min(L, (blk + 1) * kRows));
    if (F == 0) return;   // no remainder: no sums (the plans above still bound the blocks)
    thread_local std::vector<T> own_kept;
    T* own = grown(own_kept, n * s.size);
    std::vector<double> shift(n);
    parallel_for(n, threads_for(2.0 * double(Lk * s.size), threads), [&](std::size_t b) {
        const std::size_t k0 = (s.first + b) * kChunk, rows = std::min(kChunk, Lk - k0);
        shift[b] = own_kv(p.phik + k0 * F, p.lk + k0, p.V.data() + k0 * dv, rows, F, dv, own + b * s.size);
    });
    running_sums(own, shift, p.plans, s, p.causal, threads);
}

// Scratch of one thread (O(kRows (w + s + kRows + kChunk + d + F) + F dv)).
template <class T>
struct Scratch {
    std::vector<T> S, Kf, E, Qt, Pt, num, U, z;   // S: the scores, then the weights in their place
    std::vector<double> c, den;
    // The explicit keys' chunks: keys [j0, j1) at rows [at, at + j1 - j0) of St; exact: every
    // pair visible and exact (no lane tests); kf: Kf and E made for it (a remainder pair).
    struct Chunk {
        std::size_t j0, j1, at;
        bool exact, kf;
    };
    std::vector<Chunk> chunks;
    const T* phiq = nullptr;        // the block's query features (R x F) and log scales, row r0 first
    const double* lq = nullptr;
    double Mk = kEmpty;       // the largest lk_j of the kf chunks (E_j = exp(lk_j - Mk))
    bool one_by_one = false;  // the remainder weights made one by one (band_shifts)
    alignas(64) T cT[kRows], fT[kRows];   // c_i and exp(lq_i + Mk - c_i) per lane, in T
};

// The block sums block blk adds ([G, z] relative to *g; null: none).
template <class T>
const T* block_sums(const Fast<T>& p, std::size_t blk, double* g) {
    if (!p.F || p.sums.g[blk] == kEmpty) return nullptr;
    *g = p.sums.g[blk];
    return p.sums.G + p.sums.at[blk] * p.sums.size;
}

// With block sums [G, z] relative to g: num_i += f_i phi~(x_i) G and den_i += f_i phi~(x_i).z,
// f_i = exp(lq_i + g - c_i), for the R rows from r0 (num: x.num, R x dv).
template <class T>
void remainder_values(const Fast<T>& p, std::size_t r0, std::size_t R, Scratch<T>& x, const T* G, double g) {
    const std::size_t dv = p.dv, F = p.F, e = dv + 1;
    const T* phi = x.phiq;
    T* num = x.num.data();
    T* U = grown(x.U, R * dv);
    T* z = grown(x.z, F);
    tiles::times(phi, R, F, 1, F, G, e, dv, U, dv, false);
    for (std::size_t f = 0; f < F; ++f) z[f] = G[f * e + dv];
    for (std::size_t r = 0; r < R; ++r) {
        const double fi = std::exp(x.lq[r] + g - x.c[r]);
        if (fi == 0.0) continue;
        const T t = T(fi);
        for (std::size_t k = 0; k < dv; ++k) num[r * dv + k] += t * U[r * dv + k];
        x.den[r] += fi * double(dot_lanes(phi + r * F, z, F));
    }
}

// Whether every pair of keys [c0, c1) and rows [r0, r1) is visible and exact (a sink, or in
// the window at the rectangle's farthest corner), and whether some pair is visible and not.
bool all_exact(const HybridSupport& h, bool causal, std::size_t c0, std::size_t c1, std::size_t r0, std::size_t r1) {
    if (causal && c1 - 1 > r0) return false;
    const std::size_t lo = std::max(c0, h.sinks);
    if (lo >= c1) return true;
    const auto dist = [](std::size_t a, std::size_t b) { return a > b ? a - b : b - a; };
    return (causal ? r1 - 1 - lo : std::max(dist(r1 - 1, lo), dist(r0, c1 - 1))) < h.window;
}
bool any_remainder(const HybridSupport& h, bool causal, std::size_t c0, std::size_t c1, std::size_t r0, std::size_t r1) {
    const std::size_t lo = std::max(c0, h.sinks);
    if (lo >= c1) return false;
    if (causal) return lo + h.window <= r1 - 1;
    return !all_exact(h, false, c0, c1, r0, r1);
}

// The lanes (lane i: query r0 + i) that see key j exactly (ex) and in the remainder (rem).
template <class T>
void support_lanes(const HybridSupport& h, bool causal, std::size_t j, std::size_t r0, const tiles::Vec<T>* lane,
                   typename tiles::Vec<T>::batch_bool_type* ex, typename tiles::Vec<T>::batch_bool_type* rem,
                   std::size_t nv) {
    using Bv = tiles::Vec<T>;
    const double dj = double(j) - double(r0), w = double(h.window);
    const Bv none(T(0)), one(T(1));
    const bool sink = j < h.sinks, far = dj + w <= 0.0 || (!causal && dj - double(kRows) >= w);
    for (std::size_t v = 0; v < nv; ++v) {
        const auto vis = causal ? lane[v] >= Bv(T(dj)) : none == none;   // i >= j, or every lane
        if (sink || far) {   // every visible lane exact, or none
            ex[v] = sink ? vis : none == one;
            rem[v] = sink ? none == one : vis;
            continue;
        }
        ex[v] = vis && xsimd::abs(lane[v] - Bv(T(dj))) < Bv(T(w));
        rem[v] = vis && !ex[v];
    }
}

// Q_b^T / sqrt(d) (d x 32) and phi~(X_b)^T (F x 32), the lanes past R zero; St = K_range Q_b^T;
// the chunks, and on those holding a remainder pair Kf = phi~(Y_chunk) phi~(X_b)^T and E.
template <class T>
void band_tiles(const Fast<T>& p, std::size_t r0, std::size_t R, const Plan& pl, Scratch<T>& x) {
    const std::size_t d = p.d, F = p.F, n = std::max<std::size_t>(pl.n, 1);
    T* Qt = grown(x.Qt, d * kRows);
    T* Pt = F ? grown(x.Pt, F * kRows) : nullptr;
    if (R < kRows) {
        std::fill(Qt, Qt + d * kRows, T(0));
        if (Pt) std::fill(Pt, Pt + F * kRows, T(0));
    }
    tiles::transpose(p.Q.data() + r0 * d, R, d, d, Qt, kRows);
    scale_in_place(Qt, d * kRows, T(1.0 / std::sqrt(double(d))));
    if (Pt) tiles::transpose(x.phiq, R, F, F, Pt, kRows);
    T* St = grown(x.S, n * kRows);
    T* Kft = F ? grown(x.Kf, n * kRows) : nullptr;
    T* E = F ? grown(x.E, n) : nullptr;
    x.chunks.clear();
    x.Mk = kEmpty;
    for (std::size_t r = 0; r < pl.count; ++r) {
        const std::size_t a = pl.a[r], b = pl.b[r], off = pl.off[r];
        tiles::times(p.K.data() + a * d, b - a, d, 1, d, Qt, kRows, kRows, St + off * kRows, kRows, false);
        for (std::size_t c0 = a; c0 < b; c0 += kChunk) {
            const std::size_t c1 = std::min(b, c0 + kChunk), at = off + c0 - a;
            const bool kf = F && any_remainder(p.h, p.causal, c0, c1, r0, r0 + R);
            x.chunks.push_back({c0, c1, at, all_exact(p.h, p.causal, c0, c1, r0, r0 + R), kf});
            if (!kf) continue;
            tiles::times(p.phik + c0 * F, c1 - c0, F, 1, F, Pt, kRows, kRows, Kft + at * kRows, kRows, false);
            x.Mk = std::max(x.Mk, max_of(p.lk + c0, c1 - c0));
        }
    }
    for (const auto& ch : x.chunks)
        if (ch.kf)
            for (std::size_t j = ch.j0; j < ch.j1; ++j) E[ch.at + j - ch.j0] = T(std::exp(p.lk[j] - x.Mk));
}

// The lane indices 0..31 as NV vectors.
template <class T>
void lane_indices(tiles::Vec<T>* lane) {
    using Bv = tiles::Vec<T>;
    alignas(64) T idx[kRows];
    for (std::size_t i = 0; i < kRows; ++i) idx[i] = T(i);
    for (std::size_t v = 0; v < kRows / Bv::size; ++v) lane[v] = Bv::load_aligned(idx + v * Bv::size);
}

// The row shifts c_i (the reference's, up to the rounding of lk_j - Mk to T; g: the block
// sums' shift or kEmpty) from each lane's largest exact score and remainder lk_j, and the
// remainder factors exp(lq_i + Mk - c_i): above e^30 (a key far larger than a row's remainder
// keys that the row sees exactly) the remainder weights are made one by one instead.
template <class T>
void band_shifts(const Fast<T>& p, std::size_t r0, std::size_t R, Scratch<T>& x, double g) {
    using Bv = tiles::Vec<T>;
    constexpr std::size_t W = Bv::size, NV = kRows / W;
    Bv lane[NV], smax[NV], rmax[NV];
    lane_indices<T>(lane);
    const Bv neg(-std::numeric_limits<T>::infinity());
    for (std::size_t v = 0; v < NV; ++v) smax[v] = neg, rmax[v] = neg;
    typename Bv::batch_bool_type ex[NV], rem[NV];
    for (const auto& ch : x.chunks) {
        const T* srow = x.S.data() + ch.at * kRows;
        if (ch.exact) {   // lanes past R hold scores of zero rows: never read
            for (std::size_t j = ch.j0; j < ch.j1; ++j, srow += kRows)
                for (std::size_t v = 0; v < NV; ++v) smax[v] = xsimd::max(smax[v], Bv::load_unaligned(srow + v * W));
            continue;
        }
        for (std::size_t j = ch.j0; j < ch.j1; ++j, srow += kRows) {
            support_lanes<T>(p.h, p.causal, j, r0, lane, ex, rem, NV);
            const Bv lrel(T(ch.kf ? p.lk[j] - x.Mk : 0.0));
            for (std::size_t v = 0; v < NV; ++v) {
                smax[v] = xsimd::max(smax[v], xsimd::select(ex[v], Bv::load_unaligned(srow + v * W), neg));
                if (ch.kf) rmax[v] = xsimd::max(rmax[v], xsimd::select(rem[v], lrel, neg));
            }
        }
    }
    alignas(64) T sm[kRows], rm[kRows];
    for (std::size_t v = 0; v < NV; ++v) smax[v].store_aligned(sm + v * W), rmax[v].store_aligned(rm + v * W);
    x.c.assign(R, 0.0);
    x.one_by_one = false;
    for (std::size_t i = 0; i < kRows; ++i) {
        x.cT[i] = T(0), x.fT[i] = T(0);
        if (i >= R) continue;
        double c = std::isinf(sm[i]) ? kEmpty : double(sm[i]), top = g;
        if (!std::isinf(rm[i])) top = std::max(top, x.Mk + double(rm[i]));
        if (top != kEmpty) c = std::max(c, x.lq[i] + top);
        if (c == kEmpty) c = 0.0;   // no visible key: 0 / 0, as the reference
        x.c[i] = c, x.cT[i] = T(c);
        if (x.Mk != kEmpty) {
            const double e = x.lq[i] + x.Mk - c;
            x.one_by_one = x.one_by_one || e > 30.0;
            x.fT[i] = T(std::exp(std::min(e, 30.0)));
        }
    }
}

// The weights in place of the scores (exact chunks: exp(s_ij - c_i) on every lane; else by the
// lane tests, the remainder's Kf_ij E_j f_i, 0 where j is not visible), and their sums x.den
// (per lane in T over a chunk, then in double).
template <class T>
void band_weights(const Fast<T>& p, std::size_t r0, std::size_t R, Scratch<T>& x) {
    using Bv = tiles::Vec<T>;
    constexpr std::size_t W = Bv::size, NV = kRows / W;
    Bv lane[NV], cv[NV], fv[NV];
    lane_indices<T>(lane);
    for (std::size_t v = 0; v < NV; ++v) cv[v] = Bv::load_aligned(x.cT + v * W), fv[v] = Bv::load_aligned(x.fT + v * W);
    const Bv zero(T(0));
    typename Bv::batch_bool_type ex[NV], rem[NV];
    x.den.assign(R, 0.0);
    for (const auto& ch : x.chunks) {
        Bv acc[NV];
        for (std::size_t v = 0; v < NV; ++v) acc[v] = zero;
        T* srow = x.S.data() + ch.at * kRows;
        if (ch.exact) {
            for (std::size_t j = ch.j0; j < ch.j1; ++j, srow += kRows)
                for (std::size_t v = 0; v < NV; ++v) {
                    const Bv wv = vexp(Bv::load_unaligned(srow + v * W) - cv[v]);
                    wv.store_unaligned(srow + v * W);
                    acc[v] += wv;
                }
        } else {
            const T* kf = ch.kf ? x.Kf.data() + ch.at * kRows : nullptr;
            const T* Ej = ch.kf ? x.E.data() + ch.at : nullptr;
            for (std::size_t j = ch.j0; j < ch.j1; ++j, srow += kRows) {
                support_lanes<T>(p.h, p.causal, j, r0, lane, ex, rem, NV);
                for (std::size_t v = 0; v < NV; ++v) {
                    const Bv r = kf ? xsimd::select(rem[v], Bv::load_unaligned(kf + v * W) * (Bv(*Ej) * fv[v]), zero)
                                    : zero;
                    const Bv wv = xsimd::select(ex[v], vexp(Bv::load_unaligned(srow + v * W) - cv[v]), r);
                    wv.store_unaligned(srow + v * W);
                    acc[v] += wv;
                }
                if (kf && x.one_by_one) {   // the remainder lanes (rem) again, each weight in double
                    alignas(64) T is_rem[kRows];
                    for (std::size_t v = 0; v < NV; ++v) xsimd::select(rem[v], Bv(T(1)), zero).store_aligned(is_rem + v * W);
                    for (std::size_t i = 0; i < R; ++i)
                        if (is_rem[i] != T(0)) srow[i] = kf[i] * T(std::exp(x.lq[i] + p.lk[j] - x.c[i]));
                }
                if (kf) kf += kRows, ++Ej;
            }
            if (ch.kf && x.one_by_one) {   // the chunk's sums again, from the weights as stored
                for (std::size_t v = 0; v < NV; ++v) acc[v] = zero;
                for (const T* q = x.S.data() + ch.at * kRows; q < srow; q += kRows)
                    for (std::size_t v = 0; v < NV; ++v) acc[v] += Bv::load_unaligned(q + v * W);
            }
        }
        alignas(64) T part[kRows];
        for (std::size_t v = 0; v < NV; ++v) acc[v].store_aligned(part + v * W);
        for (std::size_t i = 0; i < R; ++i) x.den[i] += double(part[i]);
    }
}

// Query rows [blk kRows, min((blk + 1) kRows, L)) of the output, their features phiq (R x F)
// and log scales lq given: the band's tiles, shifts and weights, num = P V over the ranges (St
// read as P^T) plus the block sums', num / den.
template <class T>
void run_block(const Fast<T>& p, std::size_t blk, const T* phiq, const double* lq, Mat<T>& out) {
    thread_local Scratch<T> x;
    const std::size_t r0 = blk * kRows, R = std::min(kRows, p.Q.shape(0) - r0), dv = p.dv;
    x.phiq = phiq, x.lq = lq;
    const Plan& pl = p.plans[blk];
    band_tiles(p, r0, R, pl, x);
    double g = kEmpty;
    const T* G = block_sums(p, blk, &g);
    band_shifts(p, r0, R, x, G ? g : kEmpty);
    band_weights(p, r0, R, x);
    T* num = grown(x.num, R * dv);
    if (pl.count == 0) std::fill(num, num + R * dv, T(0));
    for (std::size_t r = 0; r < pl.count; ++r)
        tiles::times(x.S.data() + pl.off[r] * kRows, R, 1, kRows, pl.b[r] - pl.a[r], p.V.data() + pl.a[r] * dv, dv, dv,
                     num, dv, r > 0);
    if (G) remainder_values(p, r0, R, x, G, g);
    for (std::size_t r = 0; r < R; ++r) {
        const T inv = T(1.0 / x.den[r]);
        for (std::size_t k = 0; k < dv; ++k) out.data()[(r0 + r) * dv + k] = num[r * dv + k] * inv;
    }
}

// hybrid_fast into `out` (reshaped only when its shape is not (L, dv); every entry written).
template <class T>
void fast_into(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads,
               Mat<T>& out) {
    const FeatureMap& map = est.ready_map();
    Fast<T> p{Q, K, V, est.hybrid, causal, Q.shape(1), V.shape(1), map.num_features(est.W.shape(0), Q.shape(1))};
    const double xs = 1.0 / std::pow(double(p.d), 0.25);   // x = q / d^(1/4), as the reference
    if (p.F) {
        thread_local std::vector<T> phi;
        thread_local std::vector<double> logs;
        const std::size_t Lk = K.shape(0);
        T* f = grown(phi, Lk * p.F);
        double* l = grown(logs, Lk);
        std::fill(l, l + Lk, 0.0);   // as compute_features starts them
        compute_features_into(map, K, xs, est.W, Side::key, threads, f, l, est.rounding, est.shift);
        p.phik = f, p.lk = l;
    }
    const std::size_t L = Q.shape(0), nb = (L + kRows - 1) / kRows;
    key_sums(p, nb, threads);
    if (out.shape(0) != L || out.shape(1) != p.dv) out = Mat<T>::from_shape({L, p.dv});
    // Query rows in groups of feature_block_rows(): a group's features made at once
    // (feature_rows: bitwise those rows of compute_features), then its blocks.
    const std::size_t gr = feature_block_rows(), ng = (L + gr - 1) / gr;
    static_assert(feature_block_rows() % kRows == 0);
    const std::vector<T> Wt = p.F ? transposed(est.W) : std::vector<T>();
    const double work = 2.0 * double(L) * double(2 * p.h.window + p.h.sinks + 2 * kChunk) * double(p.d + p.F + p.dv);
    parallel_for(ng, threads_for(work, threads), [&](std::size_t grp) {
        const std::size_t g0 = grp * gr, rows = std::min(gr, L - g0);
        thread_local std::vector<T> group_phi;
        thread_local std::vector<double> group_logs;
        T* const f = p.F ? grown(group_phi, rows * p.F) : nullptr;
        double* const l = grown(group_logs, rows);
        std::fill(l, l + rows, 0.0);   // as compute_features starts them
        if (p.F) feature_rows(map, Q, g0, rows, xs, est.W, Side::query, f, l, est.rounding, est.shift, 0.0, Wt.data());
        for (std::size_t b = g0 / kRows; b * kRows < g0 + rows; ++b)
            run_block(p, b, p.F ? f + (b * kRows - g0) * p.F : nullptr, l + (b * kRows - g0), out);
    });
}

}  // namespace

template <class T>
bool hybrid_fast_applies(const Estimator<T>& est) {
    return est.hybrid.active() && !est.hybrid.topk && est.rounding == Rounding::none;
}

template <class T>
Mat<T> hybrid_fast(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads) {
    Mat<T> out;
    fast_into(est, Q, K, V, causal, threads, out);
    return out;
}

template <class T>
void hybrid_forward_into(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, Mat<T>& out, bool causal,
                         int threads) {
    if (hybrid_fast_applies(est)) fast_into(est, Q, K, V, causal, threads, out);
    else out = hybrid_attention(est, Q, K, V, causal, threads);
}

template <class T>
Mat<T> hybrid_forward(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads) {
    Mat<T> out;
    hybrid_forward_into(est, Q, K, V, out, causal, threads);
    return out;
}

#define FAVOR_INSTANTIATE(T)                                                                                       \
    template bool hybrid_fast_applies<T>(const Estimator<T>&);                                                     \
    template Mat<T> hybrid_fast<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, bool, int);            \
    template Mat<T> hybrid_forward<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, bool, int);      \
    template void hybrid_forward_into<T>(const Estimator<T>&, MatView<T>, MatView<T>, MatView<T>, Mat<T>&, bool, int);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
