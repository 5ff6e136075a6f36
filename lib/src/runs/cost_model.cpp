// The cost model (docs/limits.md): the peak memory and rough time of a request, counted from
// the sizes alone, buffer by buffer as each code path allocates them. Its constants (a base
// RSS, OpenBLAS's working set per thread, the rates of the rough time) were measured on the
// configs in configs/ with /usr/bin/time -v (docs/limits.md has the table). A run's cells
// come from its kind's grid (cells.hpp), as the runner takes them.
#include "favor/runs/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/exact_rows.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/byte_sizes.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/cells.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/metrics/metric_table.hpp"

namespace favor {

namespace {

// Resident set of the process before any data: binary, libraries, OpenBLAS's init.
constexpr double kBaseRss = 9 * kMiB;
// What a thread running BLAS and favor's kernels keeps resident beyond the data: the part of
// OpenBLAS's buffer it touches (packed panels), its stack, malloc's per-thread arena.
constexpr double kThreadRss = 4 * kMiB;
// Rough rates per thread: matrix-product flops (float64; float32 twice as fast),
// vectorised exp (and the pairwise metrics' vectorised exp / log).
constexpr double kGemmRate = 8e9, kVexpRate = 1e9;
// The hybrids' reference path (hybrid_attention.cpp): dot products as scalar chains, std::exp.
constexpr double kScalarRate = 1e9, kScalarExpRate = 5e7;
// The kernel experiment: each (pair, trial) estimate costs two small feature computations
// (allocations dominate), each trial a draw of W (a normal costs ~40 ns).
constexpr double kPairSeconds = 12e-6, kNormalSeconds = 40e-9;

// The bookkeeping of one attention problem (a head) beside its numbers, for the whole run
// (docs/limits.md): the runner's Head (approximation.cpp: 11 matrices of 96 bytes, the softmax
// rows' and the row draw's vectors; 1144 bytes with libstdc++ on x86-64), and per buffer it
// allocates, xsimd's aligned allocation (the alignment and malloc's header: 48 bytes).
// Tensor files: each head's q, k, v buffers (HeadTensors) are freed after loading, but
// between the heads' own buffers, so the heap keeps their overhead (their numbers are the
// loading term's). Measured: 2^18 heads of L = d = 4 peaked at 3445 bytes a head, of which
// the estimate charged 2032 without these.
constexpr double kHeadBytes = 1144, kBufferBytes = 48, kFileHeadBytes = 3 * kBufferBytes;

// The rows of one block of the linear attention's partial sums and of one causal chunk of the
// fused forward (attention_blocks.hpp, the passes' own value).
constexpr double kLinearRows = double(kLinearBlockRows);

double gemm_seconds(double flops, std::size_t s) { return flops / (s == 4 ? 2 * kGemmRate : kGemmRate); }

// The exact pass's per-thread tiles (a tile of keys per kExactQueryRows query rows at most, and two
// rows of dv; attention_blocks.hpp), in elements of s bytes, on `threads` threads.
double exact_tiles(int threads, double dv, std::size_t s) {
    const double kt = double(exact_tile_keys(s)), rows = double(kExactQueryRows);
    return double(threads) * (rows * kt + 2.0 * rows * dv) * double(s);
}

// The exact backward from saved statistics (backward_exact.cpp) beyond its inputs, G, Out and
// the gradients: K^T and V^T laid out once, the rows' lse and delta, the dQ partials of all
// chunks but the first (attention_blocks.hpp), each thread's P and dS tiles.
double exact_backward_bytes(int threads, double L, double Lk, double d, double dv, std::size_t s) {
    const double chunks = std::min(double(kExactBackwardChunks), std::ceil(Lk / double(kExactBackwardKeys)));
    return double(s) * (Lk * (d + dv) + 2.0 * L + std::max(chunks - 1.0, 0.0) * L * d +
                        double(threads) * 2.0 * double(kExactBackwardQueryRows * kExactBackwardKeys));
}

// Drawing W (m, d) and keeping it in precision s: the matrix, its float64 draw, and the
// scratch of one d x d (or p x p, hadamard: its block_rows) block and its QR.
double w_bytes(std::size_t m, std::size_t d, std::size_t s, Projection p) {
    const double b = double(std::max(d, p.entry().block_rows(d)));
    return double(m) * double(d) * double(8 + s) + 4.0 * b * b * 8.0;
}

// Terms of an estimate, by name, each with the field it belongs to.
struct Terms {
    std::map<std::string, double> bytes;
    std::map<std::string, std::string> field;
    void add(const std::string& name, const std::string& f, double b) {
        bytes[name] += b;
        field[name] = f;
    }
};

Cost finish(const Terms& t, double seconds, int threads, const std::string& where,
            const std::map<std::string, std::string>& hints) {
    Cost c;
    c.peak = kBaseRss;
    for (const auto& [name, b] : t.bytes) c.peak += b;
    c.seconds = seconds;
    c.threads = threads;
    c.where = where;
    std::vector<std::pair<std::string, double>> parts(t.bytes.begin(), t.bytes.end());
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    c.parts = parts;
    // The field: that of the largest term other than the per-thread overhead.
    for (const auto& [name, b] : parts)
        if (name != "thread buffers") {
            c.field = t.field.at(name);
            break;
        }
    if (c.field.empty() && !parts.empty()) c.field = t.field.at(parts[0].first);
    if (!c.field.empty()) {
        const auto h = hints.find(c.field);
        if (h != hints.end()) c.hint = h->second;
    }
    return c;
}

std::string cell_label(const std::string& variant, std::size_t L, std::size_t d, std::size_t m) {
    return variant + " at L = " + std::to_string(L) + ", d = " + std::to_string(d) + ", m = " + std::to_string(m);
}

// --- approximation -------------------------------------------------------------------------

// One cell of an approximation run: the memory of one (cell, trial) item beyond the inputs,
// split into features (and W, linear attention) and the pairwise metrics, and its flops.
// `kept`: the part of `features` in buffers its thread keeps for its next items (the fused
// forward's thread_local features blocks, sums, and output; KeptBuffer).
// `backward`: the gradient metrics' backward pass, after the forward (its kept buffers stay).
struct ItemCost {
    double features = 0, pairwise = 0, fit = 0, backward = 0, seconds = 0;
    std::array<double, 3> kept{};
    double held() const { return kept[0] + kept[1] + kept[2]; }
    double total() const { return std::max({fit, features + pairwise, held() + backward}); }
    double transient() const { return std::max({fit, features - held() + pairwise, backward}); }   // beyond `kept`
};

// A buffer a thread keeps and only grows (grown(), memory.hpp): the largest size a cell
// asks, and while it grows, the smaller one it is copied from (std::vector::resize): at most
// the largest size below it (case a of docs/limits.md: 2611 MiB peak RSS with the cells of
// smaller key partials first, 2413 MiB with them last).
struct KeptBuffer {
    double largest = 0, below = 0;
    void add(double b) {
        if (b > largest) below = largest, largest = b;
        else if (b < largest) below = std::max(below, b);
    }
};

// The sizes of one item: queries L, keys Lk, dimensions d and dv, heads, m and its F feature
// columns, s bytes per element of the compute dtype, and the query rows its metrics are
// evaluated on (`query_rows`, docs/design.md 3.1: min(N, L); L without it).
struct ItemShape {
    std::size_t m, L, Lk, d, dv, heads, s;
    double F;
    std::size_t rows;
    bool sampled() const { return rows < L; }
};

// favor_forward_into (favor_forward.cpp) on the item's thread: W^T (FusedFeatures), the output
// `out` (the runner's thread_local), and causal: a chunk of kLinearRows rows' key and query
// features with their log scales (thread_local), the running sum F x dv (causal_chunk,
// thread_local), an own and a starting sum F x (dv + 1) per chunk at most (ChunkStarts);
// non-causal: one block of fused_rows rows' features and log scales (thread_local, shared by
// the key and query passes) and its scaled copy of V, the key partials nk x F x (dv + 1)
// (fused_kv1, thread_local), KV1 and its column z.
void fused_forward_cost(const ItemShape& x, bool causal, double W, double out, ItemCost& c) {
    const double F = x.F, Lq = double(x.L), Lkd = double(x.Lk), e = double(x.dv + 1);
    const double Wt = double(x.s) * double(x.m) * double(x.d), sF = double(x.s) * F;
    double passing;
    if (causal) {
        const double rows = std::min(Lq, kLinearRows), chunks = std::ceil(Lq / kLinearRows);
        c.kept = {rows * (2.0 * sF + 16.0), sF * double(x.dv), out};
        passing = 2.0 * chunks * sF * e;
    } else {
        const double kb = double(fused_rows(x.Lk, std::size_t(F), x.d, x.s)), nk = std::ceil(Lkd / kb);
        const double rows = std::max(kb, double(fused_rows(x.L, std::size_t(F), x.d, x.s)));
        c.kept = {rows * (sF + 8.0) + kb * double(x.s) * e, nk * sF * e, out};
        passing = sF * (e + 1.0) + 8.0 * nk;
    }
    c.features = W + Wt + passing + c.held();
}

// favor_attention: both (L, F) feature matrices and their log scales, the linear attention's
// partial sums (one F x (dv + 1) per kLinearRows keys; causal: an own and a start).
void unfused_cost(const ItemShape& x, bool causal, double W, double out, ItemCost& c) {
    const double F = x.F, Lq = double(x.L), Lkd = double(x.Lk), e = double(x.dv + 1);
    const double feats = double(x.s) * (Lq + Lkd) * F + 16.0 * (Lq + Lkd);
    const double blocks = std::ceil(Lkd / kLinearRows) + 3;
    const double linear = double(x.s) * F * e * (causal ? 2 * blocks : blocks) + double(x.s) * kLinearRows * double(x.dv);
    c.features = W + feats + out + linear;
}

// hybrid_attention (the reference path, docs/design.md 2.8) on `threads` threads: the map's
// features of the rows asked and of all keys with their log scales, the rows' copy of Q, per
// thread its scratch rows over the keys (scores, kernel values, weights, flags, order); time:
// every asked row against its visible keys in scalar loops (feature products and value sums,
// scores on the support, or all of them for the top-k oracle), one exp per pair. Returns the
// seconds of one head on one thread.
double hybrid_cost(const ItemShape& x, const Variant& v, bool causal, double W, double out, int threads, ItemCost& c) {
    const double F = x.F, rows = double(x.rows), Lkd = double(x.Lk), d = double(x.d), dv = double(x.dv);
    const double feats = F > 0 ? double(x.s) * (rows + Lkd) * F + 16.0 * (rows + Lkd) + double(x.s) * rows * d : 0.0;
    c.features = W + feats + out + double(threads) * (Lkd * 33.0 + 8.0 * dv);
    const double pairs = causal ? rows * Lkd / 2 : rows * Lkd;
    const double support = v.hybrid.topk ? pairs : rows * double(v.hybrid.columns(causal));
    const double flops = 2.0 * pairs * (F + dv) + 2.0 * support * d;
    const double maps = F > 0 ? gemm_seconds(v.map->feature_flops(x.rows, x.Lk, x.m, x.d), x.s) + (rows + Lkd) * F / kVexpRate : 0.0;
    return maps + flops / kScalarRate + pairs / kScalarExpRate;
}

// hybrid_backward (hybrid_attention.cpp): both feature matrices, their gradients and the maps'
// vjps of them, dQ, dK, dV's float64 sums and per-row stats beside the gradients in the
// compute dtype and widened to float64. Its time: a pass over the rows and one over the keys,
// each pair's weight made again (each about hybrid_cost's), the two vjps about the features'.
// Sets c.backward; returns the seconds of one head on one thread (a trial metric: twice).
double hybrid_backward_cost(const ItemShape& x, const Variant& v, bool causal, bool trials, ItemCost& c) {
    const double F = x.F, L = double(x.L), Lkd = double(x.Lk), d = double(x.d), dv = double(x.dv), sz = double(x.s);
    const double grads = (L + Lkd) * d + Lkd * dv;
    c.backward = 2.0 * sz * (L + Lkd) * F + 8.0 * grads + 24.0 * L + (2.0 * sz + 8.0) * grads;
    ItemCost scratch;
    const ItemShape all{x.m, x.L, x.Lk, x.d, x.dv, 1, x.s, x.F, x.L};
    return (trials ? 2.0 : 1.0) * 3.0 * hybrid_cost(all, v, causal, 0.0, 0.0, 1, scratch);
}

// hybrid_fast (docs/design.md 2.8; window / sinks, all rows, no half emulation) on `threads`
// threads: the keys' features and log scales (kept per calling thread; the queries' per
// thread, a group of feature_block_rows() rows at a time), the 32-key chunks' own sums,
// Lk / 32 x F (dv + 1) (causal: overwritten by their prefix sums), non-causal also every
// 32-row query block's sums (L / 32 x F (dv + 1)) and per thread a piece of the prefix sums
// ((Lk / 32 + 1) x 128), per thread a query block's score and feature tiles (its explicit
// keys x 32: the window's hull rounded out to chunks, at most w + 64 causal, 2w + 96 non-causal, plus the sinks' chunks),
// Q_b^T and phi~(X_b)^T; time: the map's features, the key sums and the far remainder's
// product (4 (L + Lk) F (dv + 1)), and per row its explicit keys' score and value products
// (2 (d + dv) each), the feature products of the two chunks at the hull's ends (2 F each),
// and the exps. Seconds of one head, one thread.
double hybrid_fast_cost(const ItemShape& x, const Variant& v, bool causal, double W, double out, int threads,
                        ItemCost& c) {
    const double F = x.F, L = double(x.L), Lk = double(x.Lk), d = double(x.d), dv = double(x.dv), s = double(x.s);
    const double w = double(v.hybrid.window), sinks = double(v.hybrid.sinks);
    const double sink_keys = sinks > 0 ? std::ceil(sinks / 32.0) * 32.0 : 0.0;
    const double expl = std::min(Lk, (causal ? w + 64.0 : 2.0 * w + 96.0) + sink_keys);
    const double corner = std::min(expl, 64.0);
    const double chunks = std::ceil(Lk / 32.0), size = F * (dv + 1.0) * s;
    const double sums = F <= 0 ? 0.0
                        : causal ? chunks * size
                                 : (chunks + std::ceil(L / 32.0)) * size + double(threads) * (chunks + 1.0) * 128.0 * s;
    const double feats = F > 0 ? s * Lk * F + 16.0 * Lk : 0.0;
    const double rows = double(feature_block_rows());   // a group of query rows' features
    const double block = (2.0 * 32.0 * expl + expl + 32.0 * (d + F)) * s + 8.0 * F * dv * s + rows * (F * s + 8.0);
    c.features = W + feats + out + sums + double(threads) * block;
    const double maps = F > 0 ? gemm_seconds(v.map->feature_flops(x.L, x.Lk, x.m, x.d) + 4.0 * (L + Lk) * F * (dv + 1.0), x.s) +
                                    (L + Lk) * F / kVexpRate
                              : 0.0;
    return maps + gemm_seconds(2.0 * L * (expl * (d + dv) + corner * F), x.s) + L * expl / kVexpRate;
}

// Whether hybrid_forward takes the fast path (hybrid_fast_applies) for a run of all rows.
bool hybrid_fast_run(const Variant& v, Rounding r, bool sampled) {
    return v.hybrid.active() && !v.hybrid.topk && r == Rounding::none && !sampled;
}

// The streamed pass of the pairwise metrics (docs/design.md section 3), when some metric of
// `cols` needs it: per thread (`inner` threads share an item's row blocks) the features of a
// block of Q query rows and of a tile of R keys, K and S (Q x R), row sums; whole: the key
// log scales, P_i, the per-tile key column sums (float32: the tile made in float first) and,
// where they fit (pairwise_keeps_keys), the key features.
// Sets c.pairwise; returns its flops and exps.
std::pair<double, double> pairwise_cost(const ItemShape& x, const std::vector<std::string>& cols, bool causal, int inner,
                                        ItemCost& c) {
    auto wants = [&](const char* k) { return std::find(cols.begin(), cols.end(), k) != cols.end(); };
    bool pair = false;   // any metric of the streamed pass over all pairs (the metric table says which)
    for (const auto& col : cols) {
        const MetricInfo* mi = find_metric(col);
        pair |= mi && (mi->source == MetricInfo::Source::pairwise || mi->source == MetricInfo::Source::theory);
    }
    if (!pair) return {0.0, 0.0};
    const double F = x.F, Lq = double(x.rows), Lkd = double(x.Lk);   // (row-sampled: the sampled query rows)
    const double R = double(feature_block_rows()), tiles = std::ceil(Lkd / R);
    const double Q = double(pairwise_query_rows(x.rows));   // query rows per block
    const bool kept = pairwise_keeps_keys(x.Lk, std::size_t(F));
    c.pairwise = double(inner) * (8.0 * ((Q + R) * F + 2.0 * Q * R + 6.0 * Q) + double(x.s) * R * F) +
                 8.0 * (Lq + Lkd + (tiles + 1.0) * F) + (kept ? 8.0 * Lkd * F : 0.0);
    const double pairs = causal ? Lq * Lkd / 2 : Lq * Lkd;
    // K and S per tile (causal: K once more for D_i), and each tile's key features made in the
    // key sweep and, unless kept (pairwise_keeps_keys), again for every row block.
    const double remade = (kept ? 1.0 : std::ceil(Lq / Q) + 1.0) * Lkd;
    const double flops = 2.0 * pairs * (double(x.d) + F * (causal ? 2.0 : 1.0)) + 2.0 * remade * double(x.m) * double(x.d);
    const double exps = remade * F + pairs * (1.0 + (wants("attention_kl") ? 1.0 : 0.0) + (wants("kernel_mse") ? 3.0 : 0.0));
    return {flops, exps};
}

// favor_backward (backward_linear.cpp) for the gradient metrics, on `inner` threads. Fused
// (backward_saves; backward_fused.cpp): the forward's saved state (out, D, KV1), W^T, per
// thread a block of fused_backward_rows rows' features, their gradient, h, W^T h, a and log
// scales, the nq partials of dKV1, KV1 and dKV1 with their transposes; its flops and exps (the
// features made twice, the forward's four products, the backward's eight). Otherwise (causal):
// both feature matrices and their gradients, the per-block partials of KV1 and dKV1, a
// block's psi, [V, 1], numerators and a; features made again, six products of the linear
// part, each side's Jacobian. Both: the gradients in the compute dtype and widened to
// float64. A metric over trials runs it once more per item.
std::pair<double, double> backward_cost(const ItemShape& x, const std::vector<std::string>& cols, bool fused, int inner,
                                        ItemCost& c) {
    if (!any_gradient(cols)) return {0.0, 0.0};
    const double F = x.F, Lq = double(x.L), Lkd = double(x.Lk), d = double(x.d), dv = double(x.dv), e = dv + 1;
    const double sz = double(x.s), m = double(x.m), runs = any_trial_gradient(cols) ? 2.0 : 1.0;
    const double grads = (sz + 8.0) * ((Lq + Lkd) * d + Lkd * dv);
    if (fused) {
        const double rows = double(fused_backward_rows(std::max(x.L, x.Lk), std::size_t(F), x.d, x.s));
        const double nq = std::ceil(Lq / double(fused_backward_rows(x.L, std::size_t(F), x.d, x.s)));
        c.backward = sz * (Lq * (dv + 1.0) + F * e * (nq + 4.0) + m * d) + grads +
                     double(inner) * rows * (sz * (2.0 * F + m + d + e) + 16.0);
        return {runs * (6.0 * (Lq + Lkd) * m * d + 6.0 * (Lq + Lkd) * F * e), runs * 2.0 * (Lq + Lkd) * F};
    }
    const double blocks = std::ceil(Lq / kLinearRows) + std::ceil(Lkd / kLinearRows);
    c.backward = 2.0 * sz * F * (Lq + Lkd) + 16.0 * (Lq + Lkd) + sz * F * e * (blocks + 2.0) +
                 sz * kLinearRows * (F + 3.0 * e) + grads;
    return {runs * (4.0 * (Lq + Lkd) * m * d + 6.0 * (Lq + Lkd) * F * e), runs * (Lq + Lkd) * F};
}

ItemCost approximation_item(const Variant& v, const Config& cfg, const ItemShape& x, int inner) {
    ItemCost c;
    const double Lq = double(x.L), Lkd = double(x.Lk), e = double(x.dv + 1);
    const double W = w_bytes(x.m, x.d, x.s, v.projection);
    // oprf's A*: float64 copies of the scaled Q and K while it is fitted (before the features).
    if (v.map->data_dependent()) c.fit = W + 16.0 * (Lq + Lkd) * double(x.d);
    const std::vector<std::string> cols = metric_columns(cfg.approximation.metrics);
    // (Row-sampled: also the sampled rows of the output, and its jackknife copies, 3.1.)
    const double out = double(x.s) * Lq * double(x.dv) + (x.sampled() ? 2.0 * 8.0 * double(x.rows * x.dv) : 0.0);
    if (v.hybrid.active()) {   // the forward (fast or reference path, 2.8); the pairwise sums: a reference pass
        const bool fast = hybrid_fast_run(v, dtype_rounding(cfg.dtype), x.sampled());
        const double fwd = fast ? hybrid_fast_cost(x, v, cfg.causal, W, out, inner, c) : hybrid_cost(x, v, cfg.causal, W, out, inner, c);
        double pass = 0.0;
        if (any_pairwise(cols)) {
            ItemCost ref;   // hybrid_pairwise holds the reference path's features
            pass = fast ? hybrid_cost(x, v, cfg.causal, W, out, inner, ref) : fwd;
            c.features = std::max(c.features, ref.features);
            c.pairwise = double(x.s) * double(x.rows + x.Lk) * x.F + 80.0 * double(x.rows);
        }
        const double back = any_gradient(cols) ? hybrid_backward_cost(x, v, cfg.causal, any_trial_gradient(cols), c) : 0.0;
        c.seconds = double(x.heads) * (fwd + pass + back);
        return c;
    }
    if (output_fused(cols, *v.map, dtype_rounding(cfg.dtype), v.shift, cfg.causal)) fused_forward_cost(x, cfg.causal, W, out, c);
    else unfused_cost(x, cfg.causal, W, out, c);
    const auto [pair_flops, pair_exps] = pairwise_cost(x, cols, cfg.causal, inner, c);
    // The map's own feature flops (feature_map.hpp: X W^T, or what it computes instead).
    const bool saves = backward_saves(*v.map, dtype_rounding(cfg.dtype), cfg.causal, x.Lk);
    const auto [back_flops, back_exps] = backward_cost(x, cols, saves, inner, c);
    const double flops = v.map->feature_flops(x.L, x.Lk, x.m, x.d) + 4.0 * (Lq + Lkd) * x.F * e + pair_flops + back_flops;
    c.seconds = double(x.heads) * (gemm_seconds(flops, x.s) + ((Lq + Lkd) * x.F + pair_exps + back_exps) / kVexpRate);
    return c;
}

// An approximation run of one shard: its cells (cells.hpp) and items, and how many of those
// run at once (`conc`) and on how many threads an item's pairwise pass runs (`inner`).
struct ApproxRun {
    const Config& cfg;
    const QkvShapes* npy;
    std::size_t s;
    ApproxCells grid;
    std::vector<std::size_t> cells;
    double draws;        // input draws per cell
    std::size_t items;   // (cell, input seed, trial)
    int conc, inner;

    ApproxRun(const Config& c, int threads, const Shard& shard, const QkvShapes* shapes)
        : cfg(c), npy(shapes), s(dtype_bytes(c.dtype)), grid(c), cells(grid.owned(shard)), draws(double(c.input_seeds.size())),
          items(cells.size() * c.input_seeds.size() * c.trials),
          conc(int(std::min<std::size_t>(std::size_t(threads), std::max<std::size_t>(items, 1)))),
          inner(items < std::size_t(threads) ? threads : 1) {}

    // The sizes at input point (L, d) (npy inputs: the files'); m and F left 0.
    ItemShape shape(std::size_t li, std::size_t di) const {
        const bool files = cfg.inputs.npy();   // npy: the files' rows, or the first inputs.L of them
        const std::size_t L = files && cfg.inputs.L.empty() ? npy->L : cfg.inputs.L[li];
        const std::size_t rows = cfg.approximation.samples(L) ? *cfg.approximation.query_rows : L;
        // (npy: the keys key_rows gives, all of them unless the files are self-attention's.)
        if (files)
            return {0, L, cfg.inputs.L.empty() ? npy->Lk : key_rows(npy->file_L, npy->file_Lk, L), npy->d, npy->dv,
                    npy->heads, s, 0.0, rows};
        const std::size_t d = cfg.inputs.d[di];
        return {0, L, L, d, cfg.inputs.d_v.value_or(d), 1, s, 0.0, rows};
    }
};

// The inputs: every instance a cell of this shard uses, with its exact reference, held for
// the whole run; while one is made, its float64 draw (or the npy files; row-sampled without
// pairwise metrics, blocks of it) and the exact pass.
struct InputCost {
    double held = 0, loading = 0, seconds = 0;
};

InputCost input_cost(const ApproxRun& run, int threads) {
    const Config& cfg = run.cfg;
    std::vector<bool> needed(run.grid.points(), false);
    for (std::size_t c : run.cells) needed[run.grid.point(c)] = true;
    bool pairwise = false, baseline_pairwise = false, baseline = false;
    const bool grads = any_gradient(metric_columns(cfg.approximation.metrics));
    for (const auto& col : metric_columns(cfg.approximation.metrics)) {
        const MetricInfo* mi = find_metric(col);
        pairwise |= mi && mi->source == MetricInfo::Source::pairwise;
        baseline_pairwise |= mi && mi->has_baseline && mi->source == MetricInfo::Source::pairwise;
        baseline |= mi && mi->has_baseline;
    }
    InputCost in;
    if (cfg.inputs.npy() && run.npy) in.held += double(run.npy->heads) * kFileHeadBytes;   // (read once)
    for (std::size_t p = 0; p < needed.size(); ++p) {
        if (!needed[p]) continue;
        const PointIndex at = run.grid.point_at(p);
        const ItemShape x = run.shape(at.L, at.d);
        const double Lq = double(x.L), Lkd = double(x.Lk), d = double(x.d), dv = double(x.dv), H = double(x.heads);
        // Row-sampled (3.1): the float64 scaled queries, reference and softmax rows of the R
        // sampled rows and their rows of q; the scaled keys only for the pairwise metrics.
        const double R = double(x.rows), y = x.sampled() && !pairwise ? 0.0 : Lkd * d;
        // Per head: its struct and buffers (q, k, v, x, reference; y unless row-sampled without
        // pairwise metrics; the softmax rows' two, the sampled rows of q, G and three gradients).
        const double buffers =
            5.0 + (y > 0 ? 1.0 : 0.0) + (pairwise ? 2.0 : 0.0) + (x.sampled() ? 1.0 : 0.0) + (grads ? 4.0 : 0.0);
        in.held += run.draws * H *
                   (double(run.s) * (Lq * d + Lkd * d + Lkd * dv + (x.sampled() ? R * d : 0.0)) +
                    8.0 * (R * d + y + R * dv) + (pairwise ? 16.0 * R : 0.0) +   // + the exact softmax rows; per input draw
                    (grads ? double(run.s) * Lq * dv + 8.0 * ((Lq + Lkd) * d + Lkd * dv) : 0.0) +   // + G, exact gradients
                    kHeadBytes + kBufferBytes * buffers);
        // npy: the files whole (all their rows), a permuted copy too with a layout (+ G's file).
        const bool known = run.npy && run.npy->file_L && run.npy->file_Lk;
        const double fL = known ? double(run.npy->file_L) : Lq, fLk = known ? double(run.npy->file_Lk) : Lkd;
        // Random inputs: the float64 draw whole, or (row-sampled without pairwise metrics:
        // random_inputs_as) a block per thread and the sampled rows.
        const bool blocks = x.sampled() && !pairwise;
        const double draw = cfg.inputs.npy() ? 8.0 * H * (fL * d + fLk * d + fLk * dv + (grads ? fL * dv : 0.0)) *
                                                   (cfg.inputs.layout.empty() ? 1.5 : 2.5)
                            : blocks ? double(threads) * double(input_block_bytes(x.d, x.dv)) + 8.0 * R * (2 * d + dv)
                                     : 8.0 * (2 * Lq * d + Lq * dv);
        // The exact pass: K^T laid out once (ExactOperands; row-sampled: per tile, and the
        // row draw's (uniform, index) pairs), each thread's tiles (float64; row-sampled: those
        // of the reference rows' precision, exact_rows.hpp).
        const std::size_t ref_s = x.sampled() && run.s == 4 ? 4 : 8;
        const double tiles =
            x.sampled() ? double(threads) * exact_rows_thread_bytes(x.d, x.dv, ref_s) : exact_tiles(threads, dv, 8);
        in.loading = std::max(in.loading, draw + (x.sampled() ? 16.0 * Lq : 8.0 * Lkd * d) + tiles);
        // The exact backward (backward_exact.cpp): the exact pass's lse, then its own buffers.
        if (grads) in.loading = std::max(in.loading, draw + 8.0 * Lq + exact_backward_bytes(threads, Lq, Lkd, d, dv, 8));
        // The uniform baseline, after the cells (uniform_baseline): v in float64, the constant
        // key features and the output rows (one, row-sampled and non-causal; else every row).
        const double out_rows = x.sampled() && !cfg.causal ? 1.0 : Lq;
        if (baseline) in.loading = std::max(in.loading, 8.0 * (Lkd * dv + 2.0 * Lkd + out_rows * (dv + 1) + R * dv));
        const double pairs = cfg.causal ? R * Lkd / 2 : R * Lkd;
        in.seconds += run.draws * H * (gemm_seconds(2.0 * pairs * double(x.d + x.dv), ref_s) + pairs / kVexpRate) / threads;
        // The exact backward from the exact pass's saved lse: 5 products over the pairs (S, P^T G,
        // G V^T, dS^T Q, dS K), one exp pass.
        if (grads)
            in.seconds += run.draws * H * (gemm_seconds(2.0 * pairs * double(3 * x.d + 2 * x.dv), 8) + pairs / kVexpRate) / threads;
        // The uniform-attention baseline of the pairwise metrics: one more pass.
        if (baseline_pairwise)
            in.seconds += run.draws * H * (gemm_seconds(2.0 * pairs * double(x.d + 1), 8) + 2 * pairs / kVexpRate) / threads;
    }
    return in;
}

// The items: `conc` at once, each thread the most any cell needs beyond its kept buffers,
// and those buffers at their largest, one of them growing (`where`: the cell needing the most).
struct WorkCost {
    ItemCost worst;
    std::array<KeptBuffer, 3> kept;
    double largest = 0, seconds = 0;   // seconds: on one thread
    std::string where;
    double held() const { return kept[0].largest + kept[1].largest + kept[2].largest + std::max(kept[0].below, kept[1].below); }
};

WorkCost work_cost(const ApproxRun& run) {
    WorkCost w;
    for (std::size_t c : run.cells) {
        const CellIndex& at = run.grid.at(c);
        ItemShape x = run.shape(at.L, at.d);
        const Variant& v = run.cfg.variants[at.variant];
        x.m = run.grid.m(c, x.d);
        x.F = double(v.map->num_features(x.m, x.d));
        const ItemCost ic = approximation_item(v, run.cfg, x, run.inner);
        w.seconds += ic.seconds * double(run.cfg.trials) * run.draws;
        for (std::size_t k = 0; k < w.kept.size(); ++k) w.kept[k].add(ic.kept[k]);
        if (ic.transient() > w.worst.transient()) w.worst = ic;
        if (ic.total() > w.largest) {
            w.largest = ic.total();
            w.where = cell_label(v.name, x.L, x.d, x.m);
        }
    }
    return w;
}

Cost estimate_approximation(const Config& cfg, int threads, const Shard& shard, const QkvShapes* npy) {
    const ApproxRun run(cfg, threads, shard, npy);
    const InputCost in = input_cost(run, threads);
    const WorkCost w = work_cost(run);
    const ItemCost& worst = w.worst;
    const double conc = double(run.conc);
    Terms t;
    // The knob of the inputs: random inputs' L (and d); tensor files are read whole (inputs.q),
    // their problems hold the first inputs.L rows where it is set.
    const bool files = cfg.inputs.npy();
    const std::string read_field = files ? "inputs.q" : "inputs.L";
    const std::string held_field = files && cfg.inputs.L.empty() ? "inputs.q" : "inputs.L";
    const std::string budget = cfg.num_features.empty() ? "m" : "num_features";
    t.add("inputs", held_field, in.held);
    // (The output is made anew when its shape changes, not copied: it does not grow.)
    if (in.loading > conc * (worst.transient() + w.held())) {
        t.add("loading inputs", read_field, in.loading);
    } else if (worst.backward > std::max(worst.fit, worst.features - worst.held() + worst.pairwise)) {
        t.add("backward pass", "metrics", conc * (worst.backward + w.held()));
    } else if (worst.fit > worst.features - worst.held() + worst.pairwise) {
        t.add("features", budget, conc * (worst.fit + w.held()));
    } else {
        t.add("features", budget, conc * (worst.features - worst.held() + w.held()));
        if (worst.pairwise > 0) t.add("pairwise metrics", "metrics", conc * worst.pairwise);
    }
    // Per (cell, input seed, trial, head) row: the metric values (map nodes), then the errors
    // table as text and the summary.
    const double heads = double(cfg.inputs.npy() ? npy->heads : 1), items = double(run.items);
    const double cols = double(metric_columns(cfg.approximation.metrics, cfg.has_row_sem()).size());
    t.add("results", cfg.input_seeds_set() ? "input_seeds" : "trials", items * heads * (cols * 120.0 + 64.0) + items * (cols + 9) * 64.0);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, in.seconds + w.seconds / double(threads), threads, w.where,
                  {{"trials", "lower trials"},
                   {"input_seeds", "lower input_seeds or trials"},
                   {"inputs.L", files ? std::string("lower inputs.L (the tensor files' first rows)")
                                    : std::string("lower inputs.L or inputs.d") + (cfg.input_seeds_set() ? " or input_seeds" : "")},
                   {"inputs.q", "the .npy inputs are too large for this machine"},
                   {"m", "lower m"},
                   {"num_features", "lower num_features"},
                   {"metrics", "lower " + budget + ", or leave attention_mse, kernel_mse, negative_fraction and the grad_ "
                               "metrics out of metrics"}});
}

// --- kernel and timing ---------------------------------------------------------------------

Cost estimate_kernel(const Config& cfg, int threads) {
    const KernelSpec& k = cfg.kernel;
    const KernelCells grid(cfg);
    const double n = double(k.norm.size() * k.angle.size());
    double worst = 0, seconds = 0;
    std::string where;
    for (std::size_t cell = 0; cell < grid.size(); ++cell) {
        if (grid.pair(cell) != 0) continue;   // one item per (variant, d, m) covers all its pairs
        const KernelIndex at = grid.at(cell);
        const Variant& v = cfg.variants[at.variant];
        const std::size_t d = k.d[at.d], m = cfg.m[at.m];
        const double F = double(v.map->num_features(m, d));
        const double item = w_bytes(m, d, 8, v.projection) + 2.0 * n * double(d) * 8.0 + 4.0 * F * 8.0 + 2.0 * d * d * 8.0;
        seconds += double(cfg.trials) *
                   (n * (kPairSeconds + gemm_seconds(4.0 * double(m) * double(d), 8) + 2 * F / kVexpRate) +
                    (double(m) * double(d) + 2.0 * double(d) * double(d)) * kNormalSeconds +
                    gemm_seconds(4.0 * double(d) * double(d) * double(std::max(m, d)), 8)) /
                   threads;
        if (item > worst) worst = item, where = v.name + " at d = " + std::to_string(d) + ", m = " + std::to_string(m);
    }
    // Every trial's squared error of every point and the closed form at its pair (sq and th,
    // kernel_experiment.cpp; th filled with NaN for every projection), kept until the summary.
    const double results = double(cfg.variants.size() * k.d.size() * cfg.m.size()) * double(cfg.trials) * n * 16.0;
    Terms t;
    t.add("features", "m", double(threads) * worst);
    t.add("results", "trials", results);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, seconds, threads, where, {{"m", "lower m"}, {"trials", "lower trials"}});
}

// One timing cell: the memory beyond the inputs (exact: the tiles per thread; hybrids: what
// hybrid_forward holds, as in approximation runs; FAVOR: W, both feature matrices, the sums,
// as the unfused run that breaks the time into phases makes them) and the time of its warm-up
// and timed runs (TimingSpec::cell_seconds).
std::pair<double, double> timing_cell(const Config& cfg, const Variant& v, std::size_t L, std::size_t d, std::size_t m,
                                      int threads) {
    const std::size_t s = dtype_bytes(cfg.dtype), dv = cfg.inputs.d_v.value_or(d);
    const double Ld = double(L);
    double bytes, secs, back = 0;   // one forward's and one backward's seconds
    if (v.exact) {
        bytes = exact_tiles(threads, double(dv), s) + Ld * dv * double(s);
        const double pairs = cfg.causal ? Ld * Ld / 2 : Ld * Ld;
        secs = (gemm_seconds(2.0 * pairs * double(d + dv), s) + pairs / kVexpRate) / threads;
        if (cfg.timing.backward) {   // G, Out, lse, the gradients and the backward's buffers; 5 products
            bytes += double(s) * Ld * (3.0 * dv + 2.0 * d) + 8.0 * Ld + exact_backward_bytes(threads, Ld, Ld, d, dv, s);
            back = (gemm_seconds(2.0 * pairs * double(3 * d + 2 * dv), s) + pairs / kVexpRate) / threads;
        }
    } else if (v.hybrid.active()) {   // hybrid_forward_into: the fast path or the reference (2.8)
        const ItemShape x{m, L, L, d, dv, 1, s, double(v.map->num_features(m, d)), L};
        const double W = w_bytes(m, d, s, v.projection), out = Ld * dv * double(s);
        ItemCost c;
        secs = (hybrid_fast_run(v, dtype_rounding(cfg.dtype), false) ? hybrid_fast_cost(x, v, cfg.causal, W, out, threads, c)
                                                                     : hybrid_cost(x, v, cfg.causal, W, out, threads, c)) /
               threads;
        bytes = c.features;
    } else {
        const double F = double(v.map->num_features(m, d));
        bytes = w_bytes(m, d, s, v.projection) + double(s) * 2 * Ld * F + 32.0 * Ld +
                double(s) * F * double(dv + 1) * (std::ceil(Ld / kLinearRows) + 3) + Ld * dv * double(s);
        secs = (gemm_seconds(v.map->feature_flops(L, L, m, d) + 4.0 * 2 * Ld * F * double(dv + 1), s) + 2 * Ld * F / kVexpRate) /
               threads;
        if (cfg.timing.backward) {   // favor_backward: both sides' features and their gradients, G and
            // the gradients; the features' products twice (features, Jacobians), the linear part's 3x.
            bytes += double(s) * (4.0 * Ld * F + Ld * (2.0 * dv + 2.0 * d));
            back = (gemm_seconds(2.0 * v.map->feature_flops(L, L, m, d) + 3.0 * 4.0 * Ld * F * double(dv + 1), s) +
                     2 * Ld * F / kVexpRate) /
                    threads;
        }
    }
    return {bytes, cfg.timing.cell_seconds(secs, back)};
}

// The largest L's inputs (in the compute type) and its largest cell; cells the time
// budget would skip are left out, as the runner skips them (a series stops once over).
Cost estimate_timing(const Config& cfg, int threads) {
    const std::size_t s = dtype_bytes(cfg.dtype);
    const TimingCells grid(cfg);
    double peak_inputs = 0, peak_work = 0, peak_total = 0, seconds = 0;
    std::string where;
    std::map<std::string, double> series_last;   // budget: a series stops once a cell is over it
    for (std::size_t L : cfg.inputs.L)
        for (std::size_t d : cfg.inputs.d) {
            const std::size_t dv = cfg.inputs.d_v.value_or(d);
            const double Ld = double(L);
            // (drawn straight into the compute type: random_inputs_as's float64 block per thread)
            const double inputs = double(threads) * double(input_block_bytes(d, dv)) + double(s) * (2 * Ld * d + Ld * dv);
            double work = 0;
            std::string w;
            for (const TimingSeries& ser : grid.series()) {
                if (ser.d != d) continue;
                const Variant& v = cfg.variants[ser.variant];
                const std::string key = v.name + "/" + std::to_string(d) + "/" + std::to_string(ser.m);
                const auto [bytes, secs] = timing_cell(cfg, v, L, d, ser.m, threads);
                const bool skipped = cfg.timing.time_budget_s > 0 && (series_last.count(key) ? series_last[key] < 0 : false);
                if (skipped || (cfg.timing.time_budget_s > 0 && secs > cfg.timing.time_budget_s)) {
                    series_last[key] = -1;
                    continue;
                }
                series_last[key] = secs;
                seconds += secs;
                if (bytes > work) work = bytes, w = cell_label(v.name, L, d, ser.m);
            }
            if (inputs + work > peak_total) peak_total = inputs + work, peak_inputs = inputs, peak_work = work, where = w;
        }
    Terms t;
    t.add("inputs", "inputs.L", peak_inputs);
    t.add("features", "m", peak_work);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, seconds, threads, where, {{"inputs.L", "lower inputs.L or inputs.d"}, {"m", "lower m or inputs.L"}});
}

}  // namespace

std::string Cost::summary() const {
    std::string s = format_bytes(peak);
    std::string p;
    for (const auto& [name, b] : parts)
        if (b >= 0.005 * peak) p += (p.empty() ? "" : ", ") + name + " " + format_bytes(b);
    return p.empty() ? s : s + " (" + p + ")";
}

void check_memory(const Cost& c, const MemoryBudget& b, const std::string& name) {
    if (c.peak <= double(b.bytes)) return;
    const std::string source = b.source == "--max-memory" ? "--max-memory" : b.source;
    throw Error(name + ": " + c.field + ": needs an estimated " + c.summary() + " of memory" +
                (c.where.empty() ? "" : " for " + c.where) + ", more than the " + format_bytes(double(b.bytes)) +
                " available (" + source + ")" + (c.hint.empty() ? "" : "; " + c.hint) +
                (b.source == "--max-memory" ? "" : ", or set the budget with --max-memory"));
}

Cost estimate_run(const Config& cfg, int threads, const Shard& shard, const QkvShapes* npy) {
    threads = std::max(threads, 1);
    switch (cfg.experiment) {
        case ExperimentKind::approximation:
            if (cfg.inputs.npy() && !npy) throw std::logic_error("estimate_run: npy inputs need their shapes");
            return estimate_approximation(cfg, threads, shard, npy);
        case ExperimentKind::kernel: return estimate_kernel(cfg, threads);
        case ExperimentKind::timing: return estimate_timing(cfg, threads);
    }
    return {};
}

ThreadPlan fit_threads(const Config& cfg, int threads, const Shard& shard, const QkvShapes* npy, const MemoryBudget& b,
                       Cost& cost) {
    ThreadPlan p;
    p.threads = threads;
    cost = estimate_run(cfg, threads, shard, npy);
    if (cost.peak <= double(b.bytes)) return p;
    for (int t = threads - 1; t >= 1; --t) {
        Cost c = estimate_run(cfg, t, shard, npy);
        if (c.peak <= double(b.bytes)) {
            p.warning = "--threads " + std::to_string(threads) + " would need an estimated " + format_bytes(cost.peak) +
                        " of memory, more than the " + format_bytes(double(b.bytes)) + " available (" + b.source +
                        "); using " + std::to_string(t) + " threads (" + format_bytes(c.peak) + ")";
            p.threads = t;
            cost = c;
            return p;
        }
    }
    cost = estimate_run(cfg, 1, shard, npy);
    check_memory(cost, b, cfg.file);
    return p;
}

namespace {
// apply --grad after the output (apply_grad.cpp): G read (its array and heads), every head's
// gradients in float64, and per head the tensors in the compute dtype and the backward's
// buffers (exact: its forward's Out and lse, then exact_backward_bytes; features: as
// backward_cost); its time.
std::pair<double, double> apply_backward(const QkvShapes& sh, const ApplyOptions& o, int threads) {
    const std::size_t s = dtype_bytes(o.dtype);
    const double H = double(sh.heads), L = double(sh.L), Lk = double(sh.Lk), d = double(sh.d), dv = double(sh.dv);
    const double held = 16.0 * H * L * dv + 8.0 * H * ((L + Lk) * d + Lk * dv);
    double head = double(s) * ((L + Lk) * d + Lk * dv + L * dv), flops, exps;
    if (!o.variant) {
        head += double(s) * L * dv + 8.0 * L + exact_backward_bytes(threads, L, Lk, d, dv, s);
        const double pairs = o.causal ? L * Lk / 2 : L * Lk;
        flops = 2.0 * pairs * (4 * d + 3 * dv), exps = 2 * pairs;   // forward (2 products), backward (5)
    } else if (o.variant->hybrid.active()) {   // hybrid_backward (2.8)
        ItemCost c;
        const ItemShape x{o.m, sh.L, sh.Lk, sh.d, sh.dv, sh.heads, s, double(o.variant->map->num_features(o.m, sh.d)), sh.L};
        const double seconds = hybrid_backward_cost(x, *o.variant, o.causal, false, c);
        return {held + head + c.backward, H * seconds / double(threads)};
    } else {
        ItemCost c;
        const ItemShape x{o.m, sh.L, sh.Lk, sh.d, sh.dv, sh.heads, s, double(o.variant->map->num_features(o.m, sh.d)), sh.L};
        const bool saves = backward_saves(*o.variant->map, dtype_rounding(o.dtype), o.causal, sh.Lk);
        std::tie(flops, exps) = backward_cost(x, {"grad_cosine"}, saves, threads, c);
        head += c.backward;
    }
    return {held + head, H * (gemm_seconds(flops, s) + exps / kVexpRate) / double(threads)};
}
}  // namespace

namespace {
// The flag an apply's attention memory answers to: --m for a map that uses it; a window-only
// variant's band (--window); a fixed-F map's own features (--features); exact: the tensors.
std::string apply_work_flag(const std::optional<Variant>& v) {
    if (!v) return "--q";
    if (v->map->uses_m()) return "--m";
    return v->hybrid.active() && v->map->num_features(1, 1) == 0 ? "--window" : "--features";
}
}  // namespace

Cost estimate_apply(const QkvShapes& sh, const ApplyOptions& o, int threads, bool grad) {
    threads = std::max(threads, 1);
    const std::size_t s = dtype_bytes(o.dtype);
    const double H = double(sh.heads), L = double(sh.L), Lk = double(sh.Lk), d = double(sh.d), dv = double(sh.dv);
    // The tensors as float64 heads, and while a file is read its array beside its heads.
    const double tensors = 8.0 * H * (L * d + Lk * d + Lk * dv);
    const double reading = 8.0 * H * std::max(L * d, Lk * std::max(d, dv));
    const double outs = 8.0 * H * L * dv;
    double head = double(s) * (L * d + Lk * d + Lk * dv) + 8.0 * L * dv + double(s) * L * dv;
    double seconds;
    if (!o.variant) {
        head += exact_tiles(threads, dv, s);
        const double pairs = o.causal ? L * Lk / 2 : L * Lk;
        seconds = H * (gemm_seconds(2.0 * pairs * (d + dv), s) + pairs / kVexpRate) / threads;
    } else {
        const Variant& v = *o.variant;
        const double F = double(v.map->num_features(o.m, sh.d));
        const double W = w_bytes(o.m, sh.d, s, v.projection);
        // apply_head: favor_forward on `threads` threads (each with its own block buffers) where
        // the map fuses, else favor_attention's feature matrices; oprf's fit before either.
        const ItemShape x{o.m, sh.L, sh.Lk, sh.d, sh.dv, 1, s, F, sh.L};
        ItemCost c;
        double hybrid_seconds = 0;
        if (v.hybrid.active()) {   // hybrid_forward: the fast path or the reference (2.8)
            hybrid_seconds = hybrid_fast_run(v, dtype_rounding(o.dtype), false) ? hybrid_fast_cost(x, v, o.causal, W, 0.0, threads, c)
                                                                                 : hybrid_cost(x, v, o.causal, W, 0.0, threads, c);
        } else if (forward_fused(*v.map, dtype_rounding(o.dtype), v.shift, o.causal)) {
            fused_forward_cost(x, o.causal, W, 0.0, c);
            c.features += double(threads - 1) * c.kept[0];
        } else {
            unfused_cost(x, o.causal, W, 0.0, c);
        }
        const double fit = v.map->data_dependent() ? W + 16.0 * (L + Lk) * d : 0;
        head += std::max(fit, c.features);
        seconds = v.hybrid.active()
                      ? H * hybrid_seconds / threads
                      : H * (gemm_seconds(v.map->feature_flops(std::size_t(L), std::size_t(Lk), o.m, sh.d) + 4.0 * (L + Lk) * F * (dv + 1), s) +
                             (L + Lk) * F / kVexpRate) / threads;
    }
    const double save = outs + 8.0 * H * L * dv + double(s) * H * L * dv;
    const auto [back, back_seconds] = grad ? apply_backward(sh, o, threads) : std::pair<double, double>{0.0, 0.0};
    seconds += back_seconds;
    Terms t;
    t.add("inputs", "--q", tensors);
    const double work = std::max({reading, outs + head, save, outs + back});
    if (work == reading) t.add("reading inputs", "--q", reading);
    else if (work == save) t.add("output", "--q", save);
    else if (work == outs + back) t.add("backward pass", "--grad", outs + back);
    else t.add(o.variant ? "features" : "attention", apply_work_flag(o.variant), head + outs);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, seconds, threads, "",
                  {{"--q", "the tensors are too large for this machine"}, {"--m", "lower --m"},
                   {"--window", "lower --window or --sinks"},
                   {"--features", "its features do not depend on --m: choose a map with fewer features, or shorter tensors"},
                   {"--grad", "the tensors are too large for a backward pass on this machine"}});
}

Cost estimate_gen(std::size_t L, std::size_t d, std::size_t dv, bool basis) {
    Terms t;
    const double Ld = double(L);
    t.add("inputs", "--L", 8.0 * (2 * Ld * d + Ld * dv));
    if (basis) t.add("family basis", "--d", 8.0 * 4 * double(d) * double(d));
    // The three files' bytes (swapped in together) and one file's concatenated data.
    t.add("output", "--L", 8.0 * (2 * Ld * d + Ld * dv) + 8.0 * Ld * double(std::max(d, dv)));
    return finish(t, 0, 1, "", {{"--L", "lower --L or --d"}, {"--d", "lower --d"}});
}

Cost estimate_projection(std::size_t m, std::size_t d) {
    Terms t;
    t.add("W", "--m", w_bytes(m, d, 8, Projection("hadamard")) + 8.0 * double(m) * double(d));
    return finish(t, 0, 1, "", {{"--m", "lower --m or --d"}});
}

}  // namespace favor
