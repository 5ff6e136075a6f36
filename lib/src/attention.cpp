#include "favor/attention.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "favor/blas.hpp"
#include "favor/error.hpp"
#include "favor/estimator.hpp"
#include "favor/memory.hpp"
#include "favor/parallel.hpp"
#include "favor/vmath.hpp"
#include "tile_kernels.hpp"

namespace favor {

std::size_t block_rows(std::size_t L) {
    return std::clamp<std::size_t>((std::size_t(1) << 21) / std::max<std::size_t>(L, 1), 16, 512);
}

namespace {
// Exact attention: query rows per block and keys per tile. A tile of scores (rows x keys)
// stays in the per-core L2 cache (512 KB), so the max / exp / sum pass never goes to memory.
constexpr std::size_t kExactRows = 256;
template <class T>
constexpr std::size_t exact_tile_keys() { return (std::size_t(1) << 19) / (kExactRows * sizeof(T)); }
static_assert(exact_tile_keys<float>() % tiles::panel_keys<float>() == 0 &&
              exact_tile_keys<double>() % tiles::panel_keys<double>() == 0);

constexpr std::size_t round_up(std::size_t n, std::size_t k) { return (n + k - 1) / k * k; }

// The operands in the layouts the tile kernels read (tile_kernels.hpp): K^T (d x Lkp) with the
// keys padded by zeros to whole score panels, V with its columns padded to whole vectors
// (V itself when dv already is), and the output accumulators as wide.
template <class T>
struct ExactOperands {
    std::size_t Lkp, dvp;
    std::vector<T> Kt, Vpad;
    const T* Vp;
    ExactOperands(const Mat<T>& K, const Mat<T>& V)
        : Lkp(round_up(K.shape(0), tiles::panel_keys<T>())), dvp(round_up(V.shape(1), tiles::lanes<T>())) {
        const std::size_t Lk = K.shape(0), d = K.shape(1), dv = V.shape(1);
        Kt.assign(d * Lkp, T(0));
        for (std::size_t j = 0; j < Lk; ++j)
            for (std::size_t k = 0; k < d; ++k) Kt[k * Lkp + j] = K(j, k);
        Vp = V.data();
        if (dvp != dv) {
            Vpad.assign(Lk * dvp, T(0));
            for (std::size_t j = 0; j < Lk; ++j) std::copy(V.data() + j * dv, V.data() + (j + 1) * dv, Vpad.data() + j * dvp);
            Vp = Vpad.data();
        }
    }
};

}  // namespace

// Row blocks of kExactRows over key tiles with a running row max (online softmax: the
// rescaling is exact up to rounding). Both products run in the register-blocked tile kernels
// on operands laid out once per call (no BLAS: it packs K, V and every score tile anew per
// call; docs/speed.md).
template <class T>
Mat<T> exact_attention(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal, int threads) {
    const std::size_t L = Q.shape(0), d = Q.shape(1), Lk = K.shape(0), dv = V.shape(1);
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const ExactOperands<T> op(K, V);
    const std::size_t rb = kExactRows, kt = exact_tile_keys<T>(), dvp = op.dvp;
    const std::size_t nblocks = (L + rb - 1) / rb;
    const T alpha = T(1.0 / std::sqrt(double(d)));
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        // Causal rows r0..r0+rows-1 only see keys < r0 + rows.
        const std::size_t cols = causal ? std::min(Lk, r0 + rows) : Lk;
        std::vector<T> S(rows * kt), acc(rows * dvp, T(0)), row_max(rows, neg_inf);
        std::vector<double> row_sum(rows, 0.0);
        for (std::size_t c0 = 0; c0 < cols; c0 += kt) {
            const std::size_t nc = std::min(kt, cols - c0);
            tiles::times_transposed(Q.data() + r0 * d, rows, d, op.Kt.data() + c0, op.Lkp, round_up(nc, tiles::panel_keys<T>()),
                                    alpha, S.data(), kt);
            for (std::size_t i = 0; i < rows; ++i) {
                T* s = S.data() + i * kt;
                const std::size_t gi = r0 + i;
                // Keys c0 .. c0+n-1 of this tile are visible to row gi.
                const std::size_t n = !causal ? nc : (gi + 1 <= c0 ? 0 : std::min(nc, gi + 1 - c0));
                if (n > 0) {
                    const T mt = max_of(s, n);
                    if (mt > row_max[i]) {   // new running max: rescale what came before
                        if (row_max[i] != neg_inf) {
                            const T f = std::exp(row_max[i] - mt);
                            row_sum[i] *= double(f);
                            scale_in_place(acc.data() + i * dvp, dvp, f);
                        }
                        row_max[i] = mt;
                    }
                    row_sum[i] += exp_shifted_sum(s, n, row_max[i]);
                }
                std::fill(s + n, s + nc, T(0));
            }
            tiles::times(S.data(), rows, kt, 1, nc, op.Vp + c0 * dvp, dvp, dvp, acc.data(), dvp, true);
        }
        for (std::size_t i = 0; i < rows; ++i) {
            const T inv = T(1.0 / row_sum[i]);
            for (std::size_t c = 0; c < dv; ++c) out(r0 + i, c) = acc[i * dvp + c] * inv;
        }
    });
    return out;
}

// Rows per block of favor_forward's key and query passes: a function of the sizes only (never
// of the thread count). Two pulls: a block's features should stay in the per-core L2 cache
// through the passes over them (product, exponent, exp, the product with V), which matters
// most when d is small and those passes dominate; and every block has a fixed cost (laying out
// and reading W^T, the partials), which matters most when d is large and the products
// dominate. Budget 256 KB x clamp(d / 16, 1, 4): measured best for the float64 Fig. 4 sweep
// at d = 16 (1 MB: 1.12x its time) and for float32 at d = 64, F = 256 (256 KB: 1.04x the time
// of 1 MB; 2 MB within noise of 1 MB); docs/speed.md. At most L / 8 rows (and at least 64), so
// that short sequences still give every core blocks (L = 1024 in one 1024-row block ran on
// one thread: results/timing_vs_L).
std::size_t fused_rows(std::size_t L, std::size_t F, std::size_t d, std::size_t elem) {
    const std::size_t bytes = (std::size_t(1) << 18) * std::clamp<std::size_t>(d / 16, 1, 4);
    const std::size_t budget = std::clamp<std::size_t>(bytes / std::max<std::size_t>(F * elem, 1), 16, 1024);
    return std::min(budget, std::max<std::size_t>(64, (L / 8 + 15) / 16 * 16));
}

namespace {
// Rows per block of the products of linear attention (fixed: results never depend on threads).
constexpr std::size_t kLinearRows = 1024;
// Rows per step of the causal prefix sums: the lower triangle of each step costs 2 c (F + dv)
// flops per row on top of the non-causal work, so small steps; 16 measured fastest (at
// L = 16384, d = 64, m = 256 float32: 12 the same, 8: 1.04x, 24: 1.02x, 32: 1.05x the time;
// with BLAS before the tile kernels 32: 1.16x, 64: 1.35x; docs/speed.md).
constexpr std::size_t kCausalStep = 16;

// What favor_forward's passes share: the map, W and W^T (laid out once for every block's
// product), the input scale x = q / d^{1/4}, d and F. Every row is finished with its own
// shift, keys as queries (FeatureBlock::per_row; favor_forward uses it only for maps with a
// blockwise key shift), so a row's features do not depend on the block it is made in.
template <class T>
struct FusedFeatures {
    const FeatureMap& map;
    const Mat<T>& W;
    std::vector<T> Wt;
    double xs;
    std::size_t d, F;
    FusedFeatures(const FeatureMap& m, const Mat<T>& w, std::size_t dim)
        : map(m), W(w), Wt(transposed(w)), xs(1.0 / std::pow(double(dim), 0.25)), d(dim),
          F(m.num_features(w.shape(0), dim)) {}
    // The features of rows [r0, r0 + rows) of X into phi (rows x F) and their log scales.
    void into(const Mat<T>& X, std::size_t r0, std::size_t rows, Side side, T* phi, double* rlog) const {
        map.block(FeatureBlock<T>{X.data() + r0 * d, rows, d, xs, W, side, phi, F, rlog, /*per_row=*/true,
                                  Rounding::none, Wt.data()});
    }
    // The same into a buffer this thread keeps: a thread that runs many blocks or cells (pool
    // workers, the approximation runner's workers) reuses the same pages instead of mapping
    // and zeroing fresh ones (docs/speed.md, page faults). Valid until the thread's next call.
    std::pair<T*, double*> block(const Mat<T>& X, std::size_t r0, std::size_t rows, Side side) const {
        thread_local std::vector<T> buf;
        thread_local std::vector<double> rlog;
        T* phi = grown(buf, rows * F);
        double* rl = grown(rlog, rows);
        into(X, r0, rows, side, phi, rl);
        return {phi, rl};
    }
};

// acc (F x (dv+1)) = phiK_b^T [V_b, 1] for the `rows` rows at phiK (ld F) and V (ld dv),
// ld of acc: dv + 1. With `c` (one factor per row, or null for all 1), row j counts c[j] times:
// phiK_b^T diag(c) [V_b, 1], the factors folded into a scaled copy of V_b.
template <class T>
void kv_block(const T* phiK, const T* V, std::size_t rows, std::size_t F, std::size_t dv, T* acc,
              const T* c = nullptr) {
    const std::size_t e = dv + 1;
    if (c) {
        thread_local std::vector<T> kept;
        T* const Vc = grown(kept, rows * dv);
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t k = 0; k < dv; ++k) Vc[i * dv + k] = c[i] * V[i * dv + k];
        V = Vc;
    }
    // phiK_b^T V_b in the value tile kernel reading phiK_b transposed in place (no packing).
    tiles::times(phiK, F, 1, F, rows, V, dv, dv, acc, e, false);
    // Column dv: the column sums of phiK_b (row by row, so in a fixed order, vectorised over F).
    std::vector<T> z(F, T(0));
    for (std::size_t i = 0; i < rows; ++i) {
        const T* p = phiK + i * F;
        const T ci = c ? c[i] : T(1);
        if (c)
            for (std::size_t f = 0; f < F; ++f) z[f] += ci * p[f];
        else
            for (std::size_t f = 0; f < F; ++f) z[f] += p[f];
    }
    for (std::size_t f = 0; f < F; ++f) acc[f * e + dv] = z[f];   // acc is written, never read
}

// The factors exp(lk[j] - shift) of rows [r0, r0 + rows) into c, or false (c unused) when
// every one is 1 (no key log scales, or all equal to the shift).
template <class T>
bool row_factors(const double* lk, std::size_t r0, std::size_t rows, double shift, std::vector<T>& c) {
    if (!lk) return false;
    bool any = false;
    for (std::size_t j = 0; j < rows; ++j) any |= lk[r0 + j] != shift;
    if (!any) return false;
    c.resize(rows);
    for (std::size_t j = 0; j < rows; ++j) c[j] = T(std::exp(lk[r0 + j] - shift));
    return true;
}

// Largest of lk[0 .. rows), 0 without log scales.
double max_log(const double* lk, std::size_t rows) {
    return lk && rows ? max_of(lk, rows) : 0.0;
}

// acc (F x (dv+1)) = phiK_b^T diag(exp(lk_j - M_b)) [V_b, 1] for `rows` rows of keys with
// log scales lk (row 0 first; null: all 0) relative to their largest, M_b, which it returns
// (0 without log scales): a block's own sum, every factor <= 1.
template <class T>
double own_kv(const T* phiK, const double* lk, const T* V, std::size_t rows, std::size_t F, std::size_t dv, T* acc) {
    const double shift = max_log(lk, rows);
    thread_local std::vector<T> c;
    const bool scaled = row_factors(lk, 0, rows, shift, c);
    kv_block(phiK, V, rows, F, dv, acc, scaled ? c.data() : nullptr);
    return shift;
}

// out rows = num[:, :dv] / num[:, dv] for `rows` rows of num (ld dv + 1); without
// `normalise`, num[:, :dv] as it is (maps that are not row-normalised).
template <class T>
void normalise_rows(const T* num, std::size_t rows, std::size_t dv, T* out, bool normalise) {
    const std::size_t e = dv + 1;
    for (std::size_t i = 0; i < rows; ++i) {
        const T inv = normalise ? T(1) / num[i * e + dv] : T(1);
        for (std::size_t c = 0; c < dv; ++c) out[i * dv + c] = num[i * e + c] * inv;
    }
}

const double* log_or_null(const std::vector<double>& lk, std::size_t rows) {
    return lk.empty() ? nullptr : (assert(lk.size() == rows), lk.data());
}
}  // namespace

template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, const std::vector<double>& key_log_scale, const Mat<T>& V, int threads) {
    const std::size_t Lk = phiK.shape(0), F = phiK.shape(1), dv = V.shape(1), e = dv + 1;
    const double* lk = log_or_null(key_log_scale, Lk);
    const std::size_t nblocks = std::max<std::size_t>((Lk + kLinearRows - 1) / kLinearRows, 1);
    // Block b with its own shift M_b (the largest key log scale in it; rows scaled by
    // exp(lk_j - M_b) <= 1), then the blocks rescaled by exp(M_b - M) <= 1 to the largest.
    std::vector<std::vector<T>> part(nblocks);
    std::vector<double> shift(nblocks, 0.0);
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * kLinearRows, rows = std::min(kLinearRows, Lk - std::min(Lk, r0));
        part[blk].assign(F * e, T(0));
        shift[blk] = own_kv(phiK.data() + r0 * F, lk ? lk + r0 : nullptr, V.data() + r0 * dv, rows, F, dv, part[blk].data());
    });
    const double smax = max_of(shift.data(), nblocks);
    Mat<T> KV = Mat<T>::from_shape({F, e});
    std::copy(part[0].begin(), part[0].end(), KV.data());
    if (shift[0] != smax) scale_in_place(KV.data(), F * e, T(std::exp(shift[0] - smax)));
    for (std::size_t b = 1; b < nblocks; ++b) {   // in block order
        if (shift[b] == smax) {
            for (std::size_t k = 0; k < F * e; ++k) KV.data()[k] += part[b][k];
        } else {
            const T cb = T(std::exp(shift[b] - smax));
            for (std::size_t k = 0; k < F * e; ++k) KV.data()[k] += cb * part[b][k];
        }
    }
    return KV;
}

template <class T>
Mat<T> linear_attention_kv(const Mat<T>& phiK, const Mat<T>& V, int threads) {
    return linear_attention_kv(phiK, {}, V, threads);
}

template <class T>
Mat<T> linear_attention_apply(const Mat<T>& phiQ, const Mat<T>& KV1, int threads, bool normalise) {
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), e = KV1.shape(1), dv = e - 1;
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const std::size_t rb = 256, nblocks = (L + rb - 1) / rb;
    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        std::vector<T> num(rows * e);
        gemm<T>(false, false, rows, e, F, T(1), phiQ.data() + r0 * F, F, KV1.data(), e, T(0), num.data(), e);
        normalise_rows(num.data(), rows, dv, out.data() + r0 * dv, normalise);
    });
    return out;
}

namespace {
constexpr double kNoShift = -std::numeric_limits<double>::infinity();   // a sum that is still 0

// The starting sums of causal_linear's chunks, built as the chunks' own sums arrive:
// own sum of chunk ch = sum of phiK_j [v_j, 1]^T over its rows, relative to exp(its largest
// lk); start(ch) = the sum over the chunks before ch, relative to exp(before(ch)) (kNoShift:
// 0), ready once every chunk before ch has sent its own. The starts are always added up in
// chunk order (rescaling the running sum when the largest shift grows), whichever chunk
// arrives first: the numbers never depend on the thread count.
template <class T>
class ChunkStarts {
public:
    ChunkStarts(std::size_t nchunks, std::size_t size)
        : own_(nchunks), own_shift_(nchunks, 0.0), arrived_(nchunks, false), start_(nchunks),
          before_(nchunks, kNoShift) {
        start_[0].assign(size, T(0));
    }
    // Chunk ch's own sum, relative to exp(shift) (every chunk but the last sends one).
    void put(std::size_t ch, std::vector<T>&& own, double shift) {
        std::lock_guard<std::mutex> lock(mu_);
        own_[ch] = std::move(own);
        own_shift_[ch] = shift;
        arrived_[ch] = true;
        for (; ready_ < start_.size() && arrived_[ready_ - 1]; ++ready_) extend(ready_ - 1);
        cv_.notify_all();
    }
    // A chunk failed before sending its sum: the chunks that wait for it stop too.
    void fail() {
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = true;
        cv_.notify_all();
    }
    // Waits for start(ch) and moves it into g (the chunk's running sum), before(ch) into gs;
    // false if a chunk before ch failed (its exception is the one the call reports).
    bool take(std::size_t ch, std::vector<T>& g, double& gs) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return ready_ > ch || failed_; });
        if (ready_ <= ch) return false;
        g = std::move(start_[ch]);
        gs = before_[ch];
        return true;
    }

private:
    // start(k + 1) from start(k) and chunk k's own sum (start(k) is copied: chunk k may be
    // taking it at the same time, and takes it only once).
    void extend(std::size_t k) {
        std::vector<T> run = start_[k];
        const double s = std::max(before_[k], own_shift_[k]);
        if (before_[k] != kNoShift && before_[k] != s) scale_in_place(run.data(), run.size(), T(std::exp(before_[k] - s)));
        const T co = own_shift_[k] == s ? T(1) : T(std::exp(own_shift_[k] - s));
        for (std::size_t i = 0; i < run.size(); ++i) run[i] += co * own_[k][i];
        std::vector<T>().swap(own_[k]);
        start_[k + 1] = std::move(run);
        before_[k + 1] = s;
    }
    std::vector<std::vector<T>> own_;
    std::vector<double> own_shift_;
    std::vector<bool> arrived_;
    std::vector<std::vector<T>> start_;
    std::vector<double> before_;
    std::size_t ready_ = 1;   // start(ch) is ready for ch < ready_
    bool failed_ = false;
    std::mutex mu_;
    std::condition_variable cv_;
};

// One chunk of causal_linear, its n rows in steps of kCausalStep rows from its starting sum
// g0 (F x (dv + 1), relative to exp(gs)): q, phiK, lk, V and out point at the chunk's first
// row. A step's rows see the running sum and, inside the step, the lower triangle of q_s k_s^T.
// The running sum is kept as G (F x dv, rows aligned to the vector width) and z (its last
// column) apart, so that every product runs in the vector tile kernels on dv columns.
// (Running both products of a step per block of G's rows, so that a block is read from L2
// once per step, measured the same: 18.1-18.3 ms against 18.3-18.4 at L = 16384, d = 64,
// m = 256, float32; not done.)
template <class T>
void causal_chunk(const T* q, const T* phiK, const double* lk, const T* V, std::size_t n, std::size_t F,
                  std::size_t dv, const std::vector<T>& g0, double gs, T* out, bool normalise) {
    const std::size_t e = dv + 1, c = kCausalStep;
    thread_local std::vector<T, xsimd::aligned_allocator<T>> kept;
    T* const G = grown(kept, F * dv);
    std::vector<T> z(F), S(c * c), num(c * dv), den(c), Vs(c * dv), cf;
    for (std::size_t f = 0; f < F; ++f) {
        std::copy(g0.data() + f * e, g0.data() + f * e + dv, G + f * dv);
        z[f] = g0[f * e + dv];
    }
    std::vector<double> P(c);
    for (std::size_t r0 = 0; r0 < n; r0 += c) {
        const std::size_t rows = std::min(c, n - r0);
        const T *qs = q + r0 * F, *ks = phiK + r0 * F, *Vr = V + r0 * dv;
        // P[i]: the running max of the key log scales through row r0 + i.
        double p = lk ? gs : 0.0;
        for (std::size_t i = 0; i < rows; ++i) P[i] = p = lk ? std::max(p, lk[r0 + i]) : 0.0;
        const bool more = r0 + rows < n;   // a step after this one
        const double last = P[rows - 1];
        const T rescale = more && lk && gs != kNoShift && gs != last ? T(std::exp(gs - last)) : T(1);
        // cf_j = exp(lk_j - P_last): the weights of the update, and of the triangle's rows
        // whose running max is P_last already (below).
        const bool scaled = row_factors(lk, r0, rows, last, cf);
        if (scaled)
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t k = 0; k < dv; ++k) Vs[i * dv + k] = cf[i] * Vr[i * dv + k];
        const T* Vu = scaled ? Vs.data() : Vr;
        // The rows before the step: num_i = q_i G, den_i = q_i z.
        tiles::times(qs, rows, F, 1, F, G, dv, dv, num.data(), dv, false);
        for (std::size_t i = 0; i < rows; ++i) den[i] = dot_lanes(qs + i * F, z.data(), F);
        // After the step (not after the chunk's last): [G, z] += phiK_s^T diag(exp(lk_j -
        // P_last)) [V_s, 1], after rescaling from gs to P_last.
        if (more) {
            if (rescale != T(1)) {
                scale_in_place(G, F * dv, rescale);
                scale_in_place(z.data(), F, rescale);
            }
            tiles::times(ks, F, 1, F, rows, Vu, dv, dv, G, dv, true);
            for (std::size_t j = 0; j < rows; ++j) {
                const T cj = scaled ? cf[j] : T(1);
                for (std::size_t f = 0; f < F; ++f) z[f] += cj * ks[j * F + f];
            }
        }
        // ... rescaled from gs to P_i.
        if (lk && gs != kNoShift)
            for (std::size_t i = 0; i < rows; ++i)
                if (P[i] != gs) {
                    const T s = T(std::exp(gs - P[i]));
                    scale_in_place(num.data() + i * dv, dv, s);
                    den[i] *= s;
                }
        // The step's own rows: the lower triangle of q_s k_s^T, key j weighted exp(lk_j - P_i).
        // From the first row i0 whose running max is P_last (every row but a few at the start of
        // a sequence, where the max of lk_j still grows) the weights are cf_j, already in V_s;
        // the rows before take one exp per pair.
        std::size_t i0 = 0;
        while (lk && i0 < rows && P[i0] != last) ++i0;
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < rows; ++j) {
                T sij = j <= i ? dot_lanes(qs + i * F, ks + j * F, F) : T(0);
                if (i < i0 && j <= i && lk[r0 + j] != P[i]) sij *= T(std::exp(lk[r0 + j] - P[i]));
                S[i * rows + j] = sij;
            }
        if (i0 > 0) tiles::times(S.data(), i0, rows, 1, rows, Vr, dv, dv, num.data(), dv, true);
        tiles::times(S.data() + i0 * rows, rows - i0, rows, 1, rows, Vu, dv, dv, num.data() + i0 * dv, dv, true);
        for (std::size_t i = 0; i < rows; ++i) {
            double t = 0.0;   // the row's own denominator terms, in double
            for (std::size_t j = 0; j <= i; ++j) t += double(S[i * rows + j]) * (i >= i0 && scaled ? cf[j] : 1.0);
            den[i] += T(t);
            const T inv = normalise ? T(1) / den[i] : T(1);
            for (std::size_t k = 0; k < dv; ++k) out[(r0 + i) * dv + k] = num[i * dv + k] * inv;
        }
        if (more) gs = last;
    }
}

// Causal linear attention: out (L x dv) from V (L x dv) and the features of chunks of
// kLinearRows rows: key_rows(r0, rows) gives the key features of rows [r0, r0 + rows) (rows x
// F, row-major) and their log scales (or null), query_rows(r0, rows) the query features; the
// caller can keep them all (linear_attention) or make them per chunk (favor_forward). A chunk's
// pointers are used until the same thread asks for the next chunk's.
// Prefix sums G_i = sum_{j <= i} phiK_j [v_j, 1]^T, per chunk, in parallel: (1) the chunk's
// own sum (ChunkStarts::put); (2) its query features; (3) its starting sum, the own sums of the
// chunks before it added in chunk order (ChunkStarts::take, waiting for them if need be);
// (4) its rows in steps of c rows from there (causal_chunk): inside a step the lower triangle
// of phiQ_b phiK_b^T, before it the running G. Chunks are claimed in order, so the sums a
// chunk waits for are being made already. The chunk's features stay in cache through (1)-(4)
// (a pass over every chunk's sums first, then one over the steps, read all L x F key features
// back from memory: 1.14x the time at L = 16384, d = 64, m = 256, float32).
// With key log scales, every sum carries the shift it is relative to, as online softmax
// does: a chunk's own sum its largest lk; the running sums the running max P_i of lk_j,
// j <= i, rescaling what was accumulated by exp(P_old - P_new) <= 1 when the max grows.
// Row i thus sees each key j <= i with the factor exp(lk_j - P_i) <= 1 and the largest of
// them exactly 1, however much larger a later key's scale is.
template <class T, class KeyRows, class QueryRows>
void causal_linear(const T* V, std::size_t L, std::size_t F, std::size_t dv, T* out, int threads, bool normalise,
                   KeyRows&& key_rows, QueryRows&& query_rows) {
    const std::size_t nchunks = (L + kLinearRows - 1) / kLinearRows, e = dv + 1;
    if (nchunks == 0) return;
    ChunkStarts<T> starts(nchunks, F * e);
    parallel_for(nchunks, threads, [&](std::size_t ch) {
        const std::size_t c0 = ch * kLinearRows, rows = std::min(kLinearRows, L - c0);
        try {
            const auto [phiK, lk] = key_rows(c0, rows);
            if (ch + 1 < nchunks) {   // the last chunk's own sum is never used
                std::vector<T> own(F * e);
                const double shift = own_kv(phiK, lk, V + c0 * dv, rows, F, dv, own.data());
                starts.put(ch, std::move(own), shift);
            }
            const T* phiQ = query_rows(c0, rows);
            std::vector<T> g;
            double gs = kNoShift;
            if (!starts.take(ch, g, gs)) return;
            causal_chunk(phiQ, phiK, lk, V + c0 * dv, rows, F, dv, g, gs, out + c0 * dv, normalise);
        } catch (...) {
            starts.fail();
            throw;
        }
    });
}
}  // namespace


template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, const std::vector<double>& key_log_scale,
                        const Mat<T>& V, bool causal, int threads, bool normalise) {
    if (!causal)
        return linear_attention_apply(phiQ, linear_attention_kv(phiK, key_log_scale, V, threads), threads, normalise);
    const std::size_t L = phiQ.shape(0), F = phiQ.shape(1), dv = V.shape(1);
    Mat<T> out = Mat<T>::from_shape({L, dv});
    const double* lk = log_or_null(key_log_scale, L);
    causal_linear(
        V.data(), L, F, dv, out.data(), threads, normalise,
        [&](std::size_t r0, std::size_t) { return std::make_pair(phiK.data() + r0 * F, lk ? lk + r0 : nullptr); },
        [&](std::size_t r0, std::size_t) { return phiQ.data() + r0 * F; });
    return out;
}

template <class T>
Mat<T> linear_attention(const Mat<T>& phiQ, const Mat<T>& phiK, const Mat<T>& V, bool causal, int threads,
                        bool normalise) {
    return linear_attention(phiQ, phiK, {}, V, causal, threads, normalise);
}

template <class T>
Approximation<T> favor_attention(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
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
Mat<T> favor_forward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, bool causal,
                     int threads) {
    Mat<T> out;
    favor_forward_into(est, Q, K, V, out, causal, threads);
    return out;
}

namespace {
// favor_forward, causal: each chunk's key and query features into buffers the thread that
// runs the chunk keeps (the same per-row shifts as favor_attention): no (L, F) matrix.
template <class T>
void fused_causal(const FusedFeatures<T>& f, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, Mat<T>& out,
                  int threads) {
    const std::size_t L = Q.shape(0), F = f.F;
    if (K.shape(0) != L)
        throw Error("causal attention needs as many keys as queries, got " + std::to_string(K.shape(0)) +
                    " keys for " + std::to_string(L) + " queries");
    causal_linear(
        V.data(), L, F, V.shape(1), out.data(), threads, true,
        [&](std::size_t r0, std::size_t rows) {
            thread_local std::vector<T> keys;   // apart from f.block's, which holds the queries
            thread_local std::vector<double> key_log;
            T* const phi = grown(keys, rows * F);
            double* const lk = grown(key_log, rows);
            f.into(K, r0, rows, Side::key, phi, lk);
            return std::make_pair(static_cast<const T*>(phi), static_cast<const double*>(lk));
        },
        [&](std::size_t r0, std::size_t rows) { return static_cast<const T*>(f.block(Q, r0, rows, Side::query).first); });
}

// favor_forward, non-causal keys: KV1 = phiK^T [V, 1] (F x (dv + 1)) per block of fused_rows
// rows: features into a cache-resident buffer, each row finished with its own shift lk_j
// while it is in L1 (as compute_features does), then part_b = phiK_b^T diag(exp(lk_j - M_b))
// [V_b, 1] at once, M_b the block's largest lk_j (the factors <= 1 go into a scaled copy of
// V_b, as in linear_attention_kv); KV1 = sum_b exp(M_b - M) part_b, M = max_b M_b, in block
// order (the common factor exp(M) cancels in the normalisation).
template <class T>
std::vector<T> fused_kv1(const FusedFeatures<T>& f, const Mat<T>& K, const Mat<T>& V, int threads) {
    const std::size_t Lk = K.shape(0), F = f.F, dv = V.shape(1), e = dv + 1;
    const std::size_t kb = fused_rows(Lk, F, f.d, sizeof(T)), nk = (Lk + kb - 1) / kb;
    // The partials, one F x (dv + 1) slot per block, in storage the calling thread keeps
    // (a fresh multi-MB buffer per call costs a page fault per 4 kB).
    thread_local std::vector<T> kept;
    T* const parts = grown(kept, nk * F * e);   // the workers use the caller's storage, not their own
    std::vector<double> shift(nk, 0.0);
    parallel_for(nk, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * kb, rows = std::min(kb, Lk - r0);
        const auto [phi, lk] = f.block(K, r0, rows, Side::key);
        shift[blk] = own_kv(phi, lk, V.data() + r0 * dv, rows, F, dv, parts + blk * F * e);
    });
    const double smax = max_of(shift.data(), nk);
    std::vector<T> KV1(F * e, T(0));
    for (std::size_t b = 0; b < nk; ++b) {
        const T c = T(std::exp(shift[b] - smax));
        const T* p = parts + b * F * e;
        for (std::size_t k = 0; k < F * e; ++k) KV1[k] += c * p[k];
    }
    return KV1;
}

// favor_forward, non-causal queries, per block: features (per-row shift) -> times KV1 ->
// normalise, the numerators straight into the output rows, then each row's denominator
// phiQ_i . z (z: KV1's last column) while the features are in cache.
template <class T>
void fused_queries(const FusedFeatures<T>& f, const Mat<T>& Q, const std::vector<T>& KV1, std::size_t dv, Mat<T>& out,
                   int threads) {
    const std::size_t L = Q.shape(0), F = f.F, e = dv + 1;
    std::vector<T> z(F);
    for (std::size_t k = 0; k < F; ++k) z[k] = KV1[k * e + dv];
    const std::size_t rb = fused_rows(L, F, f.d, sizeof(T)), nq = (L + rb - 1) / rb;
    parallel_for(nq, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * rb, rows = std::min(rb, L - r0);
        const T* phi = f.block(Q, r0, rows, Side::query).first;
        T* o = out.data() + r0 * dv;
        tiles::times(phi, rows, F, 1, F, KV1.data(), e, dv, o, dv, false);
        for (std::size_t i = 0; i < rows; ++i) scale_in_place(o + i * dv, dv, T(1) / dot_lanes(phi + i * F, z.data(), F));
    });
}
}  // namespace

// Half emulation and unshifted features: the unfused path only (docs/design.md 2.6).
bool forward_fused(const FeatureMap& map, Rounding rounding, bool shift, bool causal) {
    return rounding == Rounding::none && shift && map.blockwise_key_shift() && map.row_normalised() &&
           (!causal || map.supports_causal());
}

template <class T>
void favor_forward_into(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, Mat<T>& out,
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

#define FAVOR_INSTANTIATE(T)                                                                        \
    template Mat<T> exact_attention<T>(const Mat<T>&, const Mat<T>&, const Mat<T>&, bool, int);      \
    template Mat<T> linear_attention<T>(const Mat<T>&, const Mat<T>&, const Mat<T>&, bool, int, bool); \
    template Mat<T> linear_attention<T>(const Mat<T>&, const Mat<T>&, const std::vector<double>&,    \
                                        const Mat<T>&, bool, int, bool);                             \
    template Mat<T> linear_attention_kv<T>(const Mat<T>&, const Mat<T>&, int);                       \
    template Mat<T> linear_attention_kv<T>(const Mat<T>&, const std::vector<double>&, const Mat<T>&, int); \
    template Mat<T> linear_attention_apply<T>(const Mat<T>&, const Mat<T>&, int, bool);              \
    template Approximation<T> favor_attention<T>(const Estimator<T>&, const Mat<T>&, const Mat<T>&,  \
                                                 const Mat<T>&, bool, int);                          \
    template Mat<T> favor_forward<T>(const Estimator<T>&, const Mat<T>&, const Mat<T>&, const Mat<T>&, bool, int); \
    template void favor_forward_into<T>(const Estimator<T>&, const Mat<T>&, const Mat<T>&, const Mat<T>&, Mat<T>&, \
                                        bool, int);
FAVOR_INSTANTIATE(float)
FAVOR_INSTANTIATE(double)
#undef FAVOR_INSTANTIATE

}  // namespace favor
