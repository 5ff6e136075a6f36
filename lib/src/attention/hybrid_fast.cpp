// Hybrid attention, the fast path (docs/design.md section 2.8): window / sinks supports in
// O(L (w + s + F) d) time. Query rows in blocks of kRows rows; for block [r0, r1):
//  - explicit keys: the sink blocks [0, first B) and the band [kp B, kq B) around the window,
//    every pair there made as the reference makes it: the exact score s_ij = q_i.k_j / sqrt(d)
//    on E(i), the feature product phi~(x_i).phi~(y_j) with its log scales lq_i + lk_j on the
//    other visible keys (tile-kernel products of the block against the range);
//  - the remainder keys in whole key blocks farther away: causal, the prefix sum over the key
//    blocks [first, kp) of Psi_j [v_j, 1] (Psi_j = exp(lk_j - g) phi~(y_j), g the largest lk_j
//    summed); non-causal, that prefix plus the suffix sum over [kq, nkb) (summed outside the
//    band directly, never the total minus the band: every term added is a remainder term,
//    so no cancellation, and each sum is relative to the largest lk_j it holds, so no key
//    with a large log scale elsewhere in the sequence underflows what a row sees);
//  - one shift per row over both parts, c_i = max(max_{j in E(i)} s_ij, lq_i + max_{j not in
//    E(i)} lk_j) (the reference's: lq_i + g for the block sums, g their largest lk_j), so no
//    weight overflows and the largest exact one is 1;
//  - Out_i = (sum_j w_ij v_j + f_i phi~(x_i) G) / (sum_j w_ij + f_i phi~(x_i) z),
//    f_i = exp(lq_i + g - c_i), [G, z] the block sums.
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

// Fixed sizes (the numbers depend on them, never on the threads): query rows per block, keys
// per key block. A query block's explicit keys are about w + B_q + B_k causal, 2w + B_q + B_k
// non-causal (the band's hull rounded out to key blocks), so B_q = 32 wastes less of them than 64;
// B_k = 64 keeps the prefix sums at (L / 64) F (dv + 1).
constexpr std::size_t kRows = 32, kBlock = 64, kBandChunk = 32;
constexpr double kEmpty = -std::numeric_limits<double>::infinity();   // the shift of an empty sum

// Sums of Psi_j [v_j, 1] over key blocks k = keys [k B, min((k + 1) B, Lk)), blocks from
// `first` (the first wholly past the sinks): pre[k] over blocks [first, k), suf[k] over
// [max(k, first), nkb), each F x (dv + 1) relative to its shift (kEmpty: the sum is empty).
template <class T>
struct KeySums {
    std::size_t B = 0, first = 0, nkb = 0, size = 0;   // B: keys per block
    T *pre = nullptr, *suf = nullptr;   // (nkb + 1) x size each, in storage the calling thread keeps
    std::vector<double> pre_shift, suf_shift;
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
    // Both sides' features (L x F, Lk x F) and log scales, as compute_features makes them, in
    // storage the calling thread keeps (a fresh 4 MB matrix per call costs a page fault per 4 kB).
    const T *phiq = nullptr, *phik = nullptr;
    const double *lq = nullptr, *lk = nullptr;
    // K^T and phi~(Y)^T by key blocks: block b's keys [b B, (b + 1) B) as a d x B tile (and an
    // F x B one) whose rows are ldt apart (B plus one SIMD vector, so that a tile's rows do not
    // all map to the same L1 sets), tiles one after another: a product over a block's keys reads
    // one contiguous tile, and the transpose writes one, instead of d rows Lk apart (a page per
    // row: the layout of one K^T matrix cost 5-15% more time whenever the host made page
    // walks dear). Laid out once per call.
    const T *Kt = nullptr, *phiKt = nullptr;
    std::size_t ldt = 0;
    KeySums<T> sums;
};

// The running sums of the blocks' own sums `own` (each relative to shift[b]) in block order,
// in double: the prefix sums s.pre (and, non-causal, from the last block backward, the suffix
// sums s.suf) as KeySums says, each slot relative to its running shift. The entries are
// independent: both directions split in fixed column chunks over the threads (a chunk of 128
// entries keeps both threads busy to the end), each entry summed in block order.
template <class T>
void running_sums(const T* own, const std::vector<double>& shift, KeySums<T>& s, bool both, int threads) {
    thread_local std::vector<T> pre_kept, suf_kept;
    const std::size_t size = s.size, n = s.nkb - s.first, chunk = 128, dirs = both ? 2 : 1;
    T* out[2] = {grown(pre_kept, (s.nkb + 1) * size), both ? grown(suf_kept, (s.nkb + 1) * size) : nullptr};
    std::vector<double>* out_shift[2] = {&s.pre_shift, &s.suf_shift};
    // Per direction and step t: the factor on the running sum (rescale) and on block b's own (f).
    std::vector<double> rescale(dirs * n, 1.0), f(dirs * n, 1.0);
    for (std::size_t dir = 0; dir < dirs; ++dir) {
        const bool backward = dir == 1;
        out_shift[dir]->assign(s.nkb + 1, kEmpty);   // slots never written stay kEmpty: never read
        double rs = kEmpty;                          // the running shift before step t
        for (std::size_t t = 0; t < n; ++t) {
            const std::size_t b = backward ? n - 1 - t : t;
            const double m = std::max(rs, shift[b]);
            if (rs != kEmpty && rs != m) rescale[dir * n + t] = std::exp(rs - m);
            f[dir * n + t] = std::exp(shift[b] - m);
            rs = m;
            (*out_shift[dir])[s.first + b + (backward ? 0 : 1)] = m;
        }
    }
    const std::size_t chunks = (size + chunk - 1) / chunk;
    parallel_for(dirs * chunks, threads_for(4.0 * double(dirs * n * size), threads), [&](std::size_t item) {
        const std::size_t dir = item / chunks, k0 = item % chunks * chunk, k1 = std::min(size, k0 + chunk);
        const bool backward = dir == 1;
        const double *rsc = rescale.data() + dir * n, *fs = f.data() + dir * n;
        double acc[chunk] = {};
        for (std::size_t t = 0; t < n; ++t) {
            const std::size_t b = backward ? n - 1 - t : t, slot = s.first + b + (backward ? 0 : 1);
            const T* o = own + b * size;
            T* dst = out[dir] + slot * size;
            for (std::size_t k = k0; k < k1; ++k) {
                acc[k - k0] = acc[k - k0] * rsc[t] + fs[t] * double(o[k]);
                dst[k] = T(acc[k - k0]);
            }
        }
    });
    s.pre = out[0], s.suf = out[1];
}

// The key blocks' own sums (own_kv: Psi relative to the block's largest lk_j), each block on
// one thread, then their prefix and (non-causal) suffix sums in block order.
template <class T>
KeySums<T> key_sums(const Fast<T>& p, int threads) {
    KeySums<T> s;
    const std::size_t Lk = p.K.shape(0), F = p.F, dv = p.dv;
    s.B = p.causal ? kBlock : kBandChunk;
    s.nkb = (Lk + s.B - 1) / s.B;
    s.first = std::min(s.nkb, (p.h.sinks + s.B - 1) / s.B);
    s.size = F * (dv + 1);
    const std::size_t n = s.nkb - s.first;
    if (F == 0) return s;   // no remainder: no sums (the block bounds above still plan the blocks)
    thread_local std::vector<T> own_kept;
    T* own = grown(own_kept, n * s.size);
    std::vector<double> shift(n);
    parallel_for(n, threads_for(2.0 * double(Lk * s.size), threads), [&](std::size_t b) {
        const std::size_t k0 = (s.first + b) * s.B, rows = std::min(s.B, Lk - k0);
        shift[b] = own_kv(p.phik + k0 * F, p.lk + k0, p.V.data() + k0 * dv, rows, F, dv,
                          own + b * s.size);
    });
    running_sums(own, shift, s, !p.causal, threads);
    return s;
}

// Row i's visible keys [0, vis) in four intervals: the sinks [0, se), remainder [se, wl),
// the window [wl, wh) (causal (i - w, i], else (i - w, i + w), past the sinks), remainder [wh, vis).
struct RowSplit {
    std::size_t se, wl, wh, vis;
};
RowSplit split(const HybridSupport& h, bool causal, std::size_t i, std::size_t Lk) {
    const std::size_t vis = causal ? std::min(i + 1, Lk) : Lk, w = h.window, se = std::min(h.sinks, vis);
    std::size_t lo = i + 1 >= w ? i + 1 - w : 0, hi = causal ? i + 1 : i + w;
    if (w == 0) lo = hi = se;
    const std::size_t wl = std::clamp(lo, se, vis);
    return {se, wl, std::clamp(hi, wl, vis), vis};
}

// f(exact, lo, hi) for row i's four intervals cut to the keys [a, b), the empty ones skipped.
template <class Fn>
void intervals(const RowSplit& s, std::size_t a, std::size_t b, Fn&& f) {
    const std::size_t edge[5] = {0, s.se, s.wl, s.wh, s.vis};
    for (int k = 0; k < 4; ++k) {
        const std::size_t lo = std::max(edge[k], a), hi = std::min(edge[k + 1], b);
        if (lo < hi) f(k % 2 == 0, lo, hi);
    }
}

// A query block's explicit key ranges (side by side in its score matrices, range r at
// column off[r]) and its block sums: prefix blocks [first, kp), suffix blocks [kq, nkb).
struct Plan {
    std::size_t kp = 0, kq = 0, n = 0, count = 0;
    std::size_t a[2] = {0, 0}, b[2] = {0, 0}, off[2] = {0, 0};
};

// Prefix blocks: every key j < k1 <= r0 - w + 1 has j <= i - w for every row i >= r0;
// suffix blocks: every key j >= k0 >= r1 - 1 + w has j >= i + w for every row i < r1.
template <class T>
Plan plan(const Fast<T>& p, std::size_t r0, std::size_t r1) {
    const std::size_t Lk = p.K.shape(0), w = p.h.window, nkb = p.sums.nkb, first = p.sums.first, B = p.sums.B;
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

// Scratch of one thread (O(B_q (w + s + B_q + B_k) + F dv)).
template <class T>
struct Scratch {
    std::vector<T> S, Kf, num, U, G, z;   // S: the scores, then the weights in their place
    std::vector<double> c, den;
    std::vector<T> Qt, Pt, E;             // the non-causal band's (run_band)
};

// The rows j < n of src (n x k) transposed by key blocks: block b's rows into the k x ld tile
// at dst + b k ld (dst[b k ld + c ld + (j - b B)] = src[j k + c]), a block per parallel item.
template <class T>
void transpose_into(const T* src, std::size_t n, std::size_t k, T* dst, std::size_t ld, int threads) {
    const std::size_t blocks = (n + kBlock - 1) / kBlock;
    parallel_for(blocks, threads_for(double(n * k) * 8.0, threads), [&](std::size_t b) {
        const std::size_t j0 = b * kBlock;
        tiles::transpose(src + j0 * k, std::min(n, j0 + kBlock) - j0, k, k, dst + b * k * ld, ld);
    });
}

// C[:, 0, hi - lo) (ld ldc) = alpha A B^T[:, lo, hi) for A (R x k, ld k) and the k x Lk matrix
// B^T in key-block tiles (k x ldt each, Fast::Kt): one product per tile the keys cross. lo is
// a multiple of the SIMD width, so every tile's part starts on a whole vector and each entry
// is the same FMA chain as from one k x Lk matrix (the same bits).
template <class T>
void product(const T* A, std::size_t R, std::size_t k, const T* Bt, std::size_t ldt, std::size_t lo, std::size_t hi,
             T alpha, T* C, std::size_t ldc) {
    for (std::size_t j = lo; j < hi;) {
        const std::size_t b = j / kBlock, e = std::min(hi, (b + 1) * kBlock);
        tiles::times_transposed(A, R, k, Bt + b * k * ldt + (j - b * kBlock), ldt, e - j, alpha, C + (j - lo), ldc);
        j = e;
    }
}

// The keys some row of [r0, r1) sees exactly (the sinks, the window hull) and in its
// remainder (causal [s, r1 - w); non-causal also [r0 + w, Lk)): only those columns of S and
// Kf are made, and a row reads only its own intervals (split), which lie inside them.
template <class T>
void key_hulls(const Fast<T>& p, std::size_t r0, std::size_t r1, std::size_t ex[2][2], std::size_t rm[2][2]) {
    const std::size_t w = p.h.window, s = p.h.sinks, Lk = p.K.shape(0);
    ex[0][0] = 0, ex[0][1] = s;
    ex[1][0] = r0 + 1 > w ? r0 + 1 - w : 0, ex[1][1] = w == 0 ? 0 : (p.causal ? r1 : r1 - 1 + w);
    rm[0][0] = s, rm[0][1] = r1 > w ? r1 - w : 0;
    rm[1][0] = p.causal ? Lk : std::max(r0 + w, s), rm[1][1] = Lk;
}

// Column bounds of a hull inside a range [a, b) moved out to whole SIMD vectors from a (the
// tile kernels make the last n % W columns as scalar chains): extra columns are never read.
template <class T>
std::size_t aligned_down(std::size_t a, std::size_t lo) {
    return a + (lo - a) / tiles::lanes<T>() * tiles::lanes<T>();
}
template <class T>
std::size_t aligned_up(std::size_t a, std::size_t b, std::size_t hi) {
    const std::size_t W = tiles::lanes<T>();
    return std::min(b, a + (hi - a + W - 1) / W * W);
}

// S (R x n, ld pl.n) = Q_b K_r^T / sqrt(d) and Kf = phi~(X_b) phi~(Y_r)^T for every range r,
// on the columns key_hulls names.
template <class T>
void products(const Fast<T>& p, std::size_t r0, std::size_t R, const Plan& pl, Scratch<T>& x) {
    T* S = grown(x.S, R * pl.n);
    T* Kf = p.F ? grown(x.Kf, R * pl.n) : nullptr;
    const T alpha = T(1.0 / std::sqrt(double(p.d)));
    std::size_t ex[2][2], rm[2][2];
    key_hulls(p, r0, r0 + R, ex, rm);
    for (std::size_t r = 0; r < pl.count; ++r)
        for (int h = 0; h < 2; ++h) {
            const std::size_t a = pl.a[r], b = pl.b[r], off = pl.off[r];
            std::size_t lo = std::max(a, ex[h][0]), hi = std::min(b, ex[h][1]);
            if (lo < hi) {
                lo = aligned_down<T>(a, lo), hi = aligned_up<T>(a, b, hi);
                product(p.Q.data() + r0 * p.d, R, p.d, p.Kt, p.ldt, lo, hi, alpha, S + (off + lo - a), pl.n);
            }
            lo = std::max(a, rm[h][0]), hi = std::min(b, rm[h][1]);
            if (Kf && lo < hi) {
                lo = aligned_down<T>(a, lo), hi = aligned_up<T>(a, b, hi);
                product(p.phiq + r0 * p.F, R, p.F, p.phiKt, p.ldt, lo, hi, T(1), Kf + (off + lo - a), pl.n);
            }
        }
}

// The block sums a block adds ([G, z] relative to *g; null: none): causal the prefix, else
// the prefix and the suffix rescaled to the larger shift and added.
template <class T>
const T* block_sums(const Fast<T>& p, const Plan& pl, Scratch<T>& x, double* g) {
    const KeySums<T>& s = p.sums;
    if (!p.F) return nullptr;
    const double ps = s.pre_shift[pl.kp], ss = p.causal ? kEmpty : s.suf_shift[pl.kq];
    *g = std::max(ps, ss);
    if (*g == kEmpty) return nullptr;
    const T* pre = s.pre + pl.kp * s.size;
    if (ss == kEmpty) return pre;
    const T* suf = s.suf + pl.kq * s.size;
    if (ps == kEmpty) return suf;
    T* G = grown(x.G, s.size);
    const T fp = T(std::exp(ps - *g)), fs = T(std::exp(ss - *g));
    for (std::size_t k = 0; k < s.size; ++k) G[k] = fp * pre[k] + fs * suf[k];
    return G;
}

// q[j] = exp(q[j] - shift) for j < n, whole vectors and the tail as one padded vector (no
// scalar exp: a row's intervals are rarely whole vectors).
template <class T>
void exp_in_place(T* q, std::size_t n, T shift) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B sh(shift);
    std::size_t j = 0;
    for (; j + W <= n; j += W) vexp(B::load_unaligned(q + j) - sh).store_unaligned(q + j);
    if (j == n) return;
    alignas(64) T t[W] = {};
    std::copy(q + j, q + n, t);
    vexp(B::load_aligned(t) - sh).store_aligned(t);
    std::copy(t, t + (n - j), q + j);
}

// c_i = max(max_{j in E(i)} s_ij, lq_i + max(g, max of the explicit remainder keys' lk_j))
// (g = kEmpty: no block sums), as the reference's row shift.
template <class T>
double row_shift(const Fast<T>& p, std::size_t i, std::size_t r, const Plan& pl, const Scratch<T>& x, double g) {
    const RowSplit sp = split(p.h, p.causal, i, p.K.shape(0));
    const T* S = x.S.data() + r * pl.n;
    const double* lk = p.F ? p.lk : nullptr;
    double c = kEmpty, top = g;
    for (std::size_t k = 0; k < pl.count; ++k)
        intervals(sp, pl.a[k], pl.b[k], [&](bool exact, std::size_t lo, std::size_t hi) {
            if (exact) c = std::max(c, double(max_of(S + pl.off[k] + lo - pl.a[k], hi - lo)));
            else if (lk) top = std::max(top, max_of(lk + lo, hi - lo));
        });
    return top == kEmpty ? c : std::max(c, p.lq[i] + top);
}

// Row r's weights over the explicit keys, in place of its scores in S (exp(s_ij - c_i) on E(i),
// phi~(x_i).phi~(y_j) exp(lq_i + lk_j - c_i) on the other visible keys, 0 elsewhere: the gaps
// between a range's intervals are zeroed as they are passed); returns their sum.
template <class T>
double row_weights(const Fast<T>& p, std::size_t i, std::size_t r, const Plan& pl, Scratch<T>& x, double c) {
    const RowSplit sp = split(p.h, p.causal, i, p.K.shape(0));
    T* P = x.S.data() + r * pl.n;
    const T* Kf = p.F ? x.Kf.data() + r * pl.n : nullptr;
    const double sh = p.F ? p.lq[i] - c : 0.0;
    double den = 0.0;
    for (std::size_t k = 0; k < pl.count; ++k) {
        std::size_t done = pl.off[k];   // columns of range k before it are final
        intervals(sp, pl.a[k], pl.b[k], [&](bool exact, std::size_t lo, std::size_t hi) {
            const std::size_t at = pl.off[k] + lo - pl.a[k], n = hi - lo;
            T* q = P + at;
            if (exact || Kf) std::fill(P + done, q, T(0)), done = at + n;
            if (exact) {
                exp_in_place(q, n, T(c));
                den += sum_lanes(q, n);
            } else if (Kf) {
                const double* lk = p.lk + lo;
                for (std::size_t j = 0; j < n; ++j) q[j] = T(lk[j] + sh);
                exp_in_place(q, n, T(0));
                for (std::size_t j = 0; j < n; ++j) q[j] *= Kf[at + j];
                den += sum_lanes(q, n);
            }
        });
        std::fill(P + done, P + pl.off[k] + (pl.b[k] - pl.a[k]), T(0));
    }
    return den;
}

// With block sums [G, z] relative to g: num_i += f_i phi~(x_i) G and den_i += f_i phi~(x_i).z,
// f_i = exp(lq_i + g - c_i), for the R rows from r0 (num: x.num, R x dv).
template <class T>
void remainder_values(const Fast<T>& p, std::size_t r0, std::size_t R, Scratch<T>& x, const T* G, double g) {
    const std::size_t dv = p.dv, F = p.F, e = dv + 1;
    const T* phi = p.phiq + r0 * F;
    T* num = x.num.data();
    T* U = grown(x.U, R * dv);
    T* z = grown(x.z, F);
    tiles::times(phi, R, F, 1, F, G, e, dv, U, dv, false);
    for (std::size_t f = 0; f < F; ++f) z[f] = G[f * e + dv];
    for (std::size_t r = 0; r < R; ++r) {
        const double fi = std::exp(p.lq[r0 + r] + g - x.c[r]);
        if (fi == 0.0) continue;
        const T t = T(fi);
        for (std::size_t k = 0; k < dv; ++k) num[r * dv + k] += t * U[r * dv + k];
        x.den[r] += fi * double(dot_lanes(phi + r * F, z, F));
    }
}

// num (R x dv) = sum over the ranges of P_r V_r (P: the weights in S), then the block sums'.
template <class T>
void block_values(const Fast<T>& p, std::size_t r0, std::size_t R, const Plan& pl, Scratch<T>& x, const T* G,
                  double g) {
    const std::size_t dv = p.dv;
    T* num = grown(x.num, R * dv);
    if (pl.count == 0) std::fill(num, num + R * dv, T(0));
    for (std::size_t k = 0; k < pl.count; ++k)
        tiles::times(x.S.data() + pl.off[k], R, pl.n, 1, pl.b[k] - pl.a[k], p.V.data() + pl.a[k] * dv, dv, dv, num, dv,
                     k > 0);
    if (G) remainder_values(p, r0, R, x, G, g);
}

// Query rows [blk B_q, min((blk + 1) B_q, L)) of the output.
template <class T>
void run_block(const Fast<T>& p, std::size_t blk, Mat<T>& out) {
    thread_local Scratch<T> x;
    const std::size_t r0 = blk * kRows, R = std::min(kRows, p.Q.shape(0) - r0), dv = p.dv;
    const Plan pl = plan(p, r0, r0 + R);
    products(p, r0, R, pl, x);
    double g = kEmpty;
    const T* G = block_sums(p, pl, x, &g);
    x.c.resize(R), x.den.resize(R);
    for (std::size_t r = 0; r < R; ++r) {
        x.c[r] = row_shift(p, r0 + r, r, pl, x, G ? g : kEmpty);
        x.den[r] = row_weights(p, r0 + r, r, pl, x, x.c[r]);
    }
    block_values(p, r0, R, pl, x, G, g);
    for (std::size_t r = 0; r < R; ++r) {
        const T inv = T(1.0 / x.den[r]);
        for (std::size_t k = 0; k < dv; ++k) out.data()[(r0 + r) * dv + k] = x.num[r * dv + k] * inv;
    }
}

// ---- Non-causal: the band in transposed tiles ----
// A block's explicit keys (the sinks' blocks and the band [kp B, kq B), B = kBandChunk: the
// rows' windows' hull rounded out to 32 keys) are the rows of St (n x 32), column i query r0 + i:
// the value kernel's product of K's rows with Q_b^T (no K^T), and likewise the feature products
// (phi~(Y)'s rows against phi~(X_b)^T) on the 32-key chunks that hold a remainder pair. A key
// row's support test (exact: j < s or |i - j| < w) is a compare over the lanes, the shift, the
// exps and the weights vector passes over the rows, and the values read St as P^T.

// Whether every key of [c0, c1) is exact for every row of [r0, r1) (non-causal): a sink, or
// |i - j| < w at the rectangle's farthest corner.
bool all_exact(const HybridSupport& h, std::size_t c0, std::size_t c1, std::size_t r0, std::size_t r1) {
    const std::size_t lo = std::max(c0, h.sinks);
    if (lo >= c1) return true;
    const auto dist = [](std::size_t a, std::size_t b) { return a > b ? a - b : b - a; };
    return std::max(dist(r1 - 1, lo), dist(r0, c1 - 1)) < h.window;
}

// The lanes of key j (one bit per lane, lane i: query r0 + i) in row i's window or sinks.
template <class T>
void exact_lanes(const HybridSupport& h, std::size_t j, std::size_t r0, const tiles::Vec<T>* lane,
                 typename tiles::Vec<T>::batch_bool_type* ex, std::size_t nv) {
    using Bv = tiles::Vec<T>;
    const double dj = double(j) - double(r0), w = double(h.window);
    if (j < h.sinks || dj + w <= 0.0 || dj - double(kRows) >= w) {   // all or none of the lanes
        for (std::size_t v = 0; v < nv; ++v) ex[v] = Bv(T(0)) == Bv(T(j < h.sinks ? 0 : 1));
        return;
    }
    for (std::size_t v = 0; v < nv; ++v) ex[v] = xsimd::abs(lane[v] - Bv(T(dj))) < Bv(T(w));
}

// Query rows [blk B_q, min((blk + 1) B_q, L)) of the non-causal output.
template <class T>
void run_band(const Fast<T>& p, std::size_t blk, Mat<T>& out) {
    using Bv = tiles::Vec<T>;
    using Bb = typename Bv::batch_bool_type;
    constexpr std::size_t W = Bv::size, NV = kRows / W, C = kBandChunk;
    static_assert(kRows % W == 0 && C % W == 0);
    thread_local Scratch<T> x;
    thread_local std::vector<unsigned char> mixed;
    const std::size_t r0 = blk * kRows, R = std::min(kRows, p.Q.shape(0) - r0), d = p.d, F = p.F, dv = p.dv;
    const Plan pl = plan(p, r0, r0 + R);
    const std::size_t n = pl.n;
    // Q_b^T / sqrt(d) (d x 32) and phi~(X_b)^T (F x 32), the lanes past R zero.
    T* Qt = grown(x.Qt, d * kRows);
    T* Pt = F ? grown(x.Pt, F * kRows) : nullptr;
    if (R < kRows) {
        std::fill(Qt, Qt + d * kRows, T(0));
        if (Pt) std::fill(Pt, Pt + F * kRows, T(0));
    }
    tiles::transpose(p.Q.data() + r0 * d, R, d, d, Qt, kRows);
    const Bv alpha(T(1.0 / std::sqrt(double(d))));
    for (std::size_t k = 0; k < d * kRows; k += W) (Bv::load_unaligned(Qt + k) * alpha).store_unaligned(Qt + k);
    if (Pt) tiles::transpose(p.phiq + r0 * F, R, F, F, Pt, kRows);

    // St = K_range Qt; Kft = phi~(Y_range) phi~(X_b)^T and E_j = exp(lk_j - Mk) on the chunks
    // holding a remainder pair (Mk: their largest lk_j).
    T* St = grown(x.S, std::max<std::size_t>(n, 1) * kRows);
    T* Kft = F ? grown(x.Kf, std::max<std::size_t>(n, 1) * kRows) : nullptr;
    T* E = F ? grown(x.E, std::max<std::size_t>(n, 1)) : nullptr;
    mixed.assign((n + C - 1) / C, 0);
    double Mk = kEmpty;
    for (std::size_t r = 0; r < pl.count; ++r) {
        const std::size_t a = pl.a[r], b = pl.b[r], off = pl.off[r];
        tiles::times(p.K.data() + a * d, b - a, d, 1, d, Qt, kRows, kRows, St + off * kRows, kRows, false);
        for (std::size_t c0 = a; c0 < b; c0 += C) {
            const std::size_t c1 = std::min(b, c0 + C), at = off + c0 - a;
            if (!F || all_exact(p.h, c0, c1, r0, r0 + R)) continue;
            mixed[at / C] = 1;
            tiles::times(p.phik + c0 * F, c1 - c0, F, 1, F, Pt, kRows, kRows, Kft + at * kRows, kRows, false);
            Mk = std::max(Mk, max_of(p.lk + c0, c1 - c0));
        }
    }
    double g = kEmpty;
    const T* G = block_sums(p, pl, x, &g);

    // Pass 1: per lane the largest exact score and remainder lk_j - Mk.
    alignas(64) T idx[kRows];
    for (std::size_t i = 0; i < kRows; ++i) idx[i] = T(i);
    Bv lane[NV];
    Bb valid[NV];
    for (std::size_t v = 0; v < NV; ++v) lane[v] = Bv::load_aligned(idx + v * W), valid[v] = lane[v] < Bv(T(R));
    const Bv neg(-std::numeric_limits<T>::infinity());
    Bv smax[NV], rmax[NV];
    for (std::size_t v = 0; v < NV; ++v) smax[v] = neg, rmax[v] = neg;
    Bb ex[NV];
    for (std::size_t r = 0; r < pl.count; ++r)
        for (std::size_t j = pl.a[r]; j < pl.b[r]; ++j) {
            const std::size_t row = pl.off[r] + j - pl.a[r];
            const T* srow = St + row * kRows;
            exact_lanes<T>(p.h, j, r0, lane, ex, NV);
            const bool m = mixed[row / C];
            if (m) E[row] = T(std::exp(p.lk[j] - Mk));
            const Bv lrel(T(m ? p.lk[j] - Mk : 0.0));
            for (std::size_t v = 0; v < NV; ++v) {
                smax[v] = xsimd::max(smax[v], xsimd::select(ex[v] && valid[v], Bv::load_unaligned(srow + v * W), neg));
                if (m) rmax[v] = xsimd::max(rmax[v], xsimd::select(!ex[v] && valid[v], lrel, neg));
            }
        }
    // The row shifts c_i (the reference's, up to the rounding of lk_j - Mk to T) and the
    // remainder factors exp(lq_i + Mk - c_i): above e^30 (a key far larger than the row's
    // remainder keys that another row sees exactly) the weights are made one by one instead.
    alignas(64) T sm[kRows], rm[kRows], cT[kRows], fT[kRows];
    for (std::size_t v = 0; v < NV; ++v) smax[v].store_aligned(sm + v * W), rmax[v].store_aligned(rm + v * W);
    x.c.assign(R, 0.0), x.den.assign(R, 0.0);
    bool one_by_one = false;
    for (std::size_t i = 0; i < kRows; ++i) {
        cT[i] = T(0), fT[i] = T(0);
        if (i >= R) continue;
        double c = std::isinf(sm[i]) ? kEmpty : double(sm[i]), top = G ? g : kEmpty;
        if (!std::isinf(rm[i])) top = std::max(top, Mk + double(rm[i]));
        if (top != kEmpty) c = std::max(c, p.lq[r0 + i] + top);
        if (c == kEmpty) c = 0.0;   // no visible key: 0 / 0, as the reference
        x.c[i] = c, cT[i] = T(c);
        if (Mk != kEmpty) {
            const double e = p.lq[r0 + i] + Mk - c;
            one_by_one = one_by_one || e > 30.0;
            fT[i] = T(std::exp(std::min(e, 30.0)));
        }
    }

    // Pass 2: the weights in place of the scores, their sums per lane in T over a chunk, then in double.
    Bv cv[NV], fv[NV];
    for (std::size_t v = 0; v < NV; ++v) cv[v] = Bv::load_aligned(cT + v * W), fv[v] = Bv::load_aligned(fT + v * W);
    for (std::size_t r = 0; r < pl.count; ++r)
        for (std::size_t c0 = pl.a[r]; c0 < pl.b[r]; c0 += C) {
            const std::size_t c1 = std::min(pl.b[r], c0 + C), at = pl.off[r] + c0 - pl.a[r];
            const bool m = mixed[at / C];
            Bv acc[NV];
            for (std::size_t v = 0; v < NV; ++v) acc[v] = Bv(T(0));
            for (std::size_t j = c0; j < c1; ++j) {
                const std::size_t row = at + j - c0;
                T* srow = St + row * kRows;
                exact_lanes<T>(p.h, j, r0, lane, ex, NV);
                for (std::size_t v = 0; v < NV; ++v) {
                    Bv wv = xsimd::select(ex[v] && valid[v], vexp(Bv::load_unaligned(srow + v * W) - cv[v]), Bv(T(0)));
                    if (m) {
                        const Bv kf = Bv::load_unaligned(Kft + row * kRows + v * W);
                        wv = xsimd::select(!ex[v] && valid[v], kf * (Bv(E[row]) * fv[v]), wv);
                    }
                    wv.store_unaligned(srow + v * W);
                    acc[v] += wv;
                }
                if (m && one_by_one)
                    for (std::size_t i = 0; i < R; ++i)
                        if (!p.h.in_window_or_sinks(r0 + i, j))
                            srow[i] = Kft[row * kRows + i] * T(std::exp(p.lq[r0 + i] + p.lk[j] - x.c[i]));
            }
            if (m && one_by_one) {   // the chunk's sums again from the weights as stored
                for (std::size_t v = 0; v < NV; ++v) acc[v] = Bv(T(0));
                for (std::size_t row = at; row < at + (c1 - c0); ++row)
                    for (std::size_t v = 0; v < NV; ++v) acc[v] += Bv::load_unaligned(St + row * kRows + v * W);
            }
            alignas(64) T part[kRows];
            for (std::size_t v = 0; v < NV; ++v) acc[v].store_aligned(part + v * W);
            for (std::size_t i = 0; i < R; ++i) x.den[i] += double(part[i]);
        }

    // num = P V over the ranges (St read as P^T), then the block sums'.
    T* num = grown(x.num, R * dv);
    if (pl.count == 0) std::fill(num, num + R * dv, T(0));
    for (std::size_t r = 0; r < pl.count; ++r)
        tiles::times(St + pl.off[r] * kRows, R, 1, kRows, pl.b[r] - pl.a[r], p.V.data() + pl.a[r] * dv, dv, dv, num,
                     dv, r > 0);
    if (G) remainder_values(p, r0, R, x, G, g);
    for (std::size_t r = 0; r < R; ++r) {
        const T inv = T(1.0 / x.den[r]);
        for (std::size_t k = 0; k < dv; ++k) out.data()[(r0 + r) * dv + k] = num[r * dv + k] * inv;
    }
}

// p.Kt, p.phiKt: the keys and their features transposed in key-block tiles, in storage the
// calling thread keeps.
template <class T>
void transposed_keys(Fast<T>& p, int threads) {
    thread_local std::vector<T> kept;
    const std::size_t Lk = p.K.shape(0), nkb = (Lk + kBlock - 1) / kBlock;
    p.ldt = kBlock + tiles::lanes<T>();
    T* t = grown(kept, nkb * (p.d + p.F) * p.ldt);
    transpose_into(p.K.data(), Lk, p.d, t, p.ldt, threads);
    if (p.F) transpose_into(p.phik, Lk, p.F, t + nkb * p.d * p.ldt, p.ldt, threads);
    p.Kt = t, p.phiKt = t + nkb * p.d * p.ldt;
}

// hybrid_fast into `out` (reshaped only when its shape is not (L, dv); every entry written).
template <class T>
void fast_into(const Estimator<T>& est, MatView<T> Q, MatView<T> K, MatView<T> V, bool causal, int threads,
               Mat<T>& out) {
    const FeatureMap& map = est.ready_map();
    Fast<T> p{Q, K, V, est.hybrid, causal, Q.shape(1), V.shape(1), map.num_features(est.W.shape(0), Q.shape(1))};
    if (p.F) {
        const double xs = 1.0 / std::pow(double(p.d), 0.25);   // x = q / d^(1/4), as the reference
        thread_local std::vector<T> phi;
        thread_local std::vector<double> logs;
        const std::size_t L = Q.shape(0), Lk = K.shape(0);
        T* f = grown(phi, (L + Lk) * p.F);
        double* l = grown(logs, L + Lk);
        std::fill(l, l + L + Lk, 0.0);   // as compute_features starts them
        compute_features_into(map, Q, xs, est.W, Side::query, threads, f, l, est.rounding, est.shift);
        compute_features_into(map, K, xs, est.W, Side::key, threads, f + L * p.F, l + L, est.rounding, est.shift);
        p.phiq = f, p.lq = l, p.phik = f + L * p.F, p.lk = l + L;
    }
    if (causal) transposed_keys(p, threads);
    p.sums = key_sums(p, threads);
    const std::size_t L = Q.shape(0), nb = (L + kRows - 1) / kRows;
    if (out.shape(0) != L || out.shape(1) != p.dv) out = Mat<T>::from_shape({L, p.dv});
    const double work = 2.0 * double(L) * double(2 * p.h.window + p.h.sinks + 2 * kBlock) * double(p.d + p.F + p.dv);
    parallel_for(nb, threads_for(work, threads), [&](std::size_t b) {
        if (causal) run_block(p, b, out);
        else run_band(p, b, out);
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
