// Causal linear attention (docs/design.md section 2.2): prefix sums
// G_i = sum_{j <= i} exp(lk_j - P_i) phiK_j [v_j, 1]^T over chunks of kLinearBlockRows rows in
// parallel, each chunk's rows in steps of kCausalStepRows rows, the chunks' starting sums added
// up in chunk order as they arrive (ChunkStarts), so the numbers never depend on the threads.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/vmath.hpp"
#include "attention/linear_sums.hpp"
#include "core/tile_kernels.hpp"

namespace favor {

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

// One chunk of causal_linear, its rows in steps of kCausalStepRows rows from its starting sum
// g0 (F x (dv + 1), relative to exp(gs)): q, phiK, lk, V point at the chunk's first row. A
// step's rows see the running sum and, inside the step, the lower triangle of q_s k_s^T.
// The running sum is kept as G (F x dv, rows aligned to the vector width) and z (its last
// column) apart, so that every product runs in the vector tile kernels on dv columns.
// (Running both products of a step per block of G's rows, so that a block is read from L2
// once per step, measured the same: 18.1-18.3 ms against 18.3-18.4 at L = 16384, d = 64,
// m = 256, float32; not done.)
template <class T>
class ChunkRun {
public:
    ChunkRun(const T* q, const T* phiK, const double* lk, const T* V, std::size_t F, std::size_t dv,
             const std::vector<T>& g0, double gs, bool normalise)
        : q_(q), k_(phiK), lk_(lk), V_(V), F_(F), dv_(dv), normalise_(normalise), gs_(gs), z_(F), S_(c * c),
          num_(c * dv), den_(c), Vs_(c * dv), P_(c) {
        thread_local std::vector<T, xsimd::aligned_allocator<T>> kept;
        G_ = grown(kept, F * dv);
        const std::size_t e = dv + 1;
        for (std::size_t f = 0; f < F; ++f) {
            std::copy(g0.data() + f * e, g0.data() + f * e + dv, G_ + f * dv);
            z_[f] = g0[f * e + dv];
        }
    }

    // The chunk's rows [r0, r0 + rows) into out (which points at the chunk's first row);
    // `more`: a step follows this one.
    void step(std::size_t r0, std::size_t rows, bool more, T* out) {
        const T* qs = q_ + r0 * F_;
        weigh(r0, rows);
        // The rows before the step: num_i = q_i G, den_i = q_i z.
        tiles::times(qs, rows, F_, 1, F_, G_, dv_, dv_, num_.data(), dv_, false);
        for (std::size_t i = 0; i < rows; ++i) den_[i] = dot_lanes(qs + i * F_, z_.data(), F_);
        if (more) advance(r0, rows);
        to_running_max(rows);
        triangle(r0, rows, out);
        if (more) gs_ = last_;
    }

private:
    static constexpr std::size_t c = kCausalStepRows;

    // P[i]: the running max of the key log scales through row r0 + i (0 without them); cf_j =
    // exp(lk_j - P_last): the weights of the update, and of the triangle's rows whose running
    // max is P_last already; Vu: V_s scaled by them (V_s itself when all are 1).
    void weigh(std::size_t r0, std::size_t rows) {
        double p = lk_ ? gs_ : 0.0;
        for (std::size_t i = 0; i < rows; ++i) P_[i] = p = lk_ ? std::max(p, lk_[r0 + i]) : 0.0;
        last_ = P_[rows - 1];
        const T* Vr = V_ + r0 * dv_;
        scaled_ = row_factors(lk_, r0, rows, last_, cf_);
        if (scaled_)
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t k = 0; k < dv_; ++k) Vs_[i * dv_ + k] = cf_[i] * Vr[i * dv_ + k];
        Vu_ = scaled_ ? Vs_.data() : Vr;
    }

    // After the step (not after the chunk's last): [G, z] += phiK_s^T diag(exp(lk_j - P_last))
    // [V_s, 1], after rescaling from gs to P_last.
    void advance(std::size_t r0, std::size_t rows) {
        const T* ks = k_ + r0 * F_;
        const T rescale = lk_ && gs_ != kNoShift && gs_ != last_ ? T(std::exp(gs_ - last_)) : T(1);
        if (rescale != T(1)) {
            scale_in_place(G_, F_ * dv_, rescale);
            scale_in_place(z_.data(), F_, rescale);
        }
        tiles::times(ks, F_, 1, F_, rows, Vu_, dv_, dv_, G_, dv_, true);
        for (std::size_t j = 0; j < rows; ++j) {
            const T cj = scaled_ ? cf_[j] : T(1);
            for (std::size_t f = 0; f < F_; ++f) z_[f] += cj * ks[j * F_ + f];
        }
    }

    // The rows' terms from before the step, rescaled from gs to P_i.
    void to_running_max(std::size_t rows) {
        if (!lk_ || gs_ == kNoShift) return;
        for (std::size_t i = 0; i < rows; ++i)
            if (P_[i] != gs_) {
                const T s = T(std::exp(gs_ - P_[i]));
                scale_in_place(num_.data() + i * dv_, dv_, s);
                den_[i] *= s;
            }
    }

    // The step's own rows: the lower triangle of q_s k_s^T, key j weighted exp(lk_j - P_i),
    // added to num and den, then the rows normalised into out. From the first row i0 whose
    // running max is P_last (every row but a few at the start of a sequence, where the max of
    // lk_j still grows) the weights are cf_j, already in Vu; the rows before take one exp per pair.
    void triangle(std::size_t r0, std::size_t rows, T* out) {
        const T *qs = q_ + r0 * F_, *ks = k_ + r0 * F_;
        std::size_t i0 = 0;
        while (lk_ && i0 < rows && P_[i0] != last_) ++i0;
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < rows; ++j) {
                T sij = j <= i ? dot_lanes(qs + i * F_, ks + j * F_, F_) : T(0);
                if (i < i0 && j <= i && lk_[r0 + j] != P_[i]) sij *= T(std::exp(lk_[r0 + j] - P_[i]));
                S_[i * rows + j] = sij;
            }
        if (i0 > 0) tiles::times(S_.data(), i0, rows, 1, rows, V_ + r0 * dv_, dv_, dv_, num_.data(), dv_, true);
        tiles::times(S_.data() + i0 * rows, rows - i0, rows, 1, rows, Vu_, dv_, dv_, num_.data() + i0 * dv_, dv_, true);
        for (std::size_t i = 0; i < rows; ++i) {
            double t = 0.0;   // the row's own denominator terms, in double
            for (std::size_t j = 0; j <= i; ++j) t += double(S_[i * rows + j]) * (i >= i0 && scaled_ ? cf_[j] : 1.0);
            den_[i] += T(t);
            const T inv = normalise_ ? T(1) / den_[i] : T(1);
            for (std::size_t k = 0; k < dv_; ++k) out[(r0 + i) * dv_ + k] = num_[i * dv_ + k] * inv;
        }
    }

    const T *q_, *k_;
    const double* lk_;
    const T* V_;
    std::size_t F_, dv_;
    bool normalise_;
    double gs_;     // the shift the running sum is relative to
    T* G_;          // (F x dv), in storage the thread keeps
    std::vector<T> z_, S_, num_, den_, Vs_, cf_;
    std::vector<double> P_;
    double last_ = 0;     // P of the step's last row
    bool scaled_ = false;
    const T* Vu_ = nullptr;
};
}  // namespace

// Causal linear attention: out (L x dv) from V (L x dv) and the features of chunks of
// kLinearBlockRows rows (ChunkFeatures).
// Prefix sums G_i = sum_{j <= i} phiK_j [v_j, 1]^T, per chunk, in parallel: (1) the chunk's
// own sum (ChunkStarts::put); (2) its query features; (3) its starting sum, the own sums of the
// chunks before it added in chunk order (ChunkStarts::take, waiting for them if need be);
// (4) its rows in steps of c rows from there (ChunkRun): inside a step the lower triangle
// of phiQ_b phiK_b^T, before it the running G. Chunks are claimed in order, so the sums a
// chunk waits for are being made already. The chunk's features stay in cache through (1)-(4)
// (a pass over every chunk's sums first, then one over the steps, read all L x F key features
// back from memory: 1.14x the time at L = 16384, d = 64, m = 256, float32).
// With key log scales, every sum carries the shift it is relative to, as online softmax
// does: a chunk's own sum its largest lk; the running sums the running max P_i of lk_j,
// j <= i, rescaling what was accumulated by exp(P_old - P_new) <= 1 when the max grows.
// Row i thus sees each key j <= i with the factor exp(lk_j - P_i) <= 1 and the largest of
// them exactly 1, however much larger a later key's scale is.
template <class T>
void causal_linear(const T* V, std::size_t L, std::size_t F, std::size_t dv, T* out, int threads, bool normalise,
                   const ChunkFeatures<T>& features) {
    const std::size_t n = kLinearBlockRows, nchunks = (L + n - 1) / n, e = dv + 1;
    if (nchunks == 0) return;
    ChunkStarts<T> starts(nchunks, F * e);
    parallel_for(nchunks, threads, [&](std::size_t ch) {
        const std::size_t c0 = ch * n, rows = std::min(n, L - c0);
        try {
            const auto [phiK, lk] = features.keys(c0, rows);
            if (ch + 1 < nchunks) {   // the last chunk's own sum is never used
                std::vector<T> own(F * e);
                const double shift = own_kv(phiK, lk, V + c0 * dv, rows, F, dv, own.data());
                starts.put(ch, std::move(own), shift);
            }
            const T* phiQ = features.queries(c0, rows);
            std::vector<T> g;
            double gs = kNoShift;
            if (!starts.take(ch, g, gs)) return;
            ChunkRun<T> run(phiQ, phiK, lk, V + c0 * dv, F, dv, g, gs, normalise);
            for (std::size_t r0 = 0; r0 < rows; r0 += kCausalStepRows) {
                const std::size_t step = std::min(kCausalStepRows, rows - r0);
                run.step(r0, step, r0 + step < rows, out + c0 * dv);
            }
        } catch (...) {
            starts.fail();
            throw;
        }
    });
}

template void causal_linear<float>(const float*, std::size_t, std::size_t, std::size_t, float*, int, bool,
                                   const ChunkFeatures<float>&);
template void causal_linear<double>(const double*, std::size_t, std::size_t, std::size_t, double*, int, bool,
                                    const ChunkFeatures<double>&);

}  // namespace favor
