// Cost estimates and resource limits (docs/limits.md). The memory model counts the buffers
// each code path allocates, from the sizes alone; its constants (a base RSS, OpenBLAS's
// working set per thread, the rates of the rough time) were measured on the configs in
// configs/ with /usr/bin/time -v (docs/limits.md has the table).
#include "favor/limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "favor/attention.hpp"
#include "favor/cells.hpp"
#include "favor/error.hpp"
#include "favor/metrics.hpp"
#include "favor/parallel.hpp"
#include "favor/projections.hpp"

namespace favor {

namespace {

constexpr double MiB = 1024.0 * 1024.0;
// Resident set of the process before any data: binary, libraries, OpenBLAS's init.
constexpr double kBaseRss = 9 * MiB;
// What a thread running BLAS and favor's kernels keeps resident beyond the data: the part of
// OpenBLAS's buffer it touches (packed panels), its stack, malloc's per-thread arena.
constexpr double kThreadRss = 4 * MiB;
// Address space a thread takes whether touched or not: OpenBLAS's buffer (BUFFER_SIZE,
// 128 MiB in Debian's 0.3.21), glibc's arena reservation (64 MiB); the stack comes on top.
constexpr double kBlasBuffer = 128 * MiB, kArena = 64 * MiB;
// Rough rates per thread: matrix-product flops (float64; float32 twice as fast),
// vectorised exp (and the pairwise metrics' vectorised exp / log).
constexpr double kGemmRate = 8e9, kVexpRate = 1e9;
// The kernel experiment: each (pair, trial) estimate costs two small feature computations
// (allocations dominate), each trial a draw of W (a normal costs ~40 ns).
constexpr double kPairSeconds = 12e-6, kNormalSeconds = 40e-9;

double gemm_seconds(double flops, std::size_t s) { return flops / (s == 4 ? 2 * kGemmRate : kGemmRate); }

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

// One cell of an approximation run: the memory of one (cell, trial) item beyond the inputs,
// split into features (and W, linear attention) and the pairwise metrics, and its flops.
// `kept`: the part of `features` in buffers its thread keeps for its next items (the fused
// forward's thread_local features blocks, sums, and output; KeptBuffer).
struct ItemCost {
    double features = 0, pairwise = 0, fit = 0, seconds = 0;
    std::array<double, 3> kept{};
    double held() const { return kept[0] + kept[1] + kept[2]; }
    double total() const { return std::max(fit, features + pairwise); }
    double transient() const { return std::max(fit, features - held() + pairwise); }   // beyond `kept`
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

ItemCost approximation_item(const Variant& v, const Config& cfg, std::size_t m, std::size_t L, std::size_t Lk,
                            std::size_t d, std::size_t dv, std::size_t heads, std::size_t s, int inner) {
    ItemCost c;
    const double F = double(v.map->num_features(m, d)), Lq = double(L), Lkd = double(Lk), e = double(dv + 1);
    const double W = w_bytes(m, d, s, v.projection);
    // oprf's A*: float64 copies of the scaled Q and K while it is fitted (before the features).
    if (v.map->data_dependent()) c.fit = W + 16.0 * (Lq + Lkd) * double(d);
    const std::vector<std::string> cols = metric_columns(cfg.approximation.metrics);
    const double out = double(s) * Lq * double(dv);
    if (output_fused(cols, *v.map, dtype_rounding(cfg.dtype), v.shift, cfg.causal)) {
        // favor_forward_into (attention.cpp) on the item's thread: W^T (FusedFeatures), the
        // output (the runner's thread_local), and causal: a chunk of 1024 rows' key and query
        // features with their log scales (thread_local), the running sum F x dv (causal_chunk,
        // thread_local), an own and a starting sum F x (dv + 1) per chunk at most
        // (ChunkStarts); non-causal: one block of fused_rows rows' features and log scales
        // (thread_local, shared by the key and query passes) and its scaled copy of V, the key
        // partials nk x F x (dv + 1) (fused_kv1, thread_local), KV1 and its column z.
        const double Wt = double(s) * double(m) * double(d), sF = double(s) * F;
        double passing;
        if (cfg.causal) {
            const double rows = std::min(Lq, 1024.0), chunks = std::ceil(Lq / 1024.0);
            c.kept = {rows * (2.0 * sF + 16.0), sF * double(dv), out};
            passing = 2.0 * chunks * sF * e;
        } else {
            const double kb = double(fused_rows(Lk, std::size_t(F), d, s)), nk = std::ceil(Lkd / kb);
            const double rows = std::max(kb, double(fused_rows(L, std::size_t(F), d, s)));
            c.kept = {rows * (sF + 8.0) + kb * double(s) * e, nk * sF * e, out};
            passing = sF * (e + 1.0) + 8.0 * nk;
        }
        c.features = W + Wt + passing + c.held();
    } else {
        // favor_attention: both (L, F) feature matrices and their log scales, the linear
        // attention's partial sums (one F x (dv + 1) per 1024 keys; causal: an own and a start).
        const double feats = double(s) * (Lq + Lkd) * F + 16.0 * (Lq + Lkd);
        const double blocks = std::ceil(Lkd / 1024.0) + 3;
        const double linear = double(s) * F * e * (cfg.causal ? 2 * blocks : blocks) + double(s) * 1024.0 * double(dv);
        c.features = W + feats + out + linear;
    }
    auto wants = [&](const char* k) { return std::find(cols.begin(), cols.end(), k) != cols.end(); };
    // Any metric of the streamed pass over all pairs (the metric table says which).
    bool pair = false;
    for (const auto& col : cols) {
        const MetricInfo* mi = find_metric(col);
        pair |= mi && (mi->source == MetricInfo::Source::pairwise || mi->source == MetricInfo::Source::theory);
    }
    double pair_flops = 0, pair_exps = 0;
    if (pair) {
        // The streamed pass (docs/design.md section 3): per thread the features of a block of
        // R query rows and of a tile of R keys, K and S (R x R), row sums; whole: the key log
        // scales, P_i and the per-tile key column sums (float32: the tile made in float first).
        const double R = double(feature_block_rows()), tiles = std::ceil(Lkd / R);
        c.pairwise = double(inner) * (8.0 * (2.0 * R * F + 2.0 * R * R + 6.0 * R) + double(s) * R * F) +
                     8.0 * (Lq + Lkd + (tiles + 1.0) * F);
        const double pairs = cfg.causal ? Lq * Lkd / 2 : Lq * Lkd;
        // K and S per tile (causal: K once more for D_i), and each tile's key features made again
        // for every row block.
        const double remade = (std::ceil(Lq / R) + 1.0) * Lkd;
        pair_flops = 2.0 * pairs * (double(d) + F * (cfg.causal ? 2.0 : 1.0)) + 2.0 * remade * double(m) * double(d);
        pair_exps = remade * F + pairs * (1.0 + (wants("attention_kl") ? 1.0 : 0.0) + (wants("kernel_mse") ? 3.0 : 0.0));
    }
    const double flops = 2.0 * (Lq + Lkd) * double(m) * double(d) + 4.0 * (Lq + Lkd) * F * e + pair_flops;
    c.seconds = double(heads) * (gemm_seconds(flops, s) + ((Lq + Lkd) * F + pair_exps) / kVexpRate);
    return c;
}

std::string cell_label(const std::string& variant, std::size_t L, std::size_t d, std::size_t m) {
    return variant + " at L = " + std::to_string(L) + ", d = " + std::to_string(d) + ", m = " + std::to_string(m);
}

Cost estimate_approximation(const Config& cfg, int threads, const Shard& shard, const QkvShapes* npy) {
    const bool is_npy = cfg.inputs.npy();
    const std::size_t s = dtype_bytes(cfg.dtype);
    const std::size_t nL = is_npy ? 1 : cfg.inputs.L.size(), nd = is_npy ? 1 : cfg.inputs.d.size(),
                      ns = is_npy ? 1 : cfg.inputs.scale.size();
    const ApproxCells grid(cfg);
    const std::vector<std::size_t> cells = grid.owned(shard);
    const double draws = double(cfg.input_seeds.size());   // input draws per cell
    const std::size_t items = cells.size() * cfg.input_seeds.size() * cfg.trials;
    const int conc = int(std::min<std::size_t>(std::size_t(threads), std::max<std::size_t>(items, 1)));
    const int inner = items < std::size_t(threads) ? threads : 1;
    auto sizes = [&](std::size_t li, std::size_t di, std::size_t& L, std::size_t& Lk, std::size_t& d, std::size_t& dv,
                     std::size_t& H) {
        if (is_npy) {
            L = npy->L, Lk = npy->Lk, d = npy->d, dv = npy->dv, H = npy->heads;
        } else {
            L = Lk = cfg.inputs.L[li], d = cfg.inputs.d[di], dv = cfg.inputs.d_v.value_or(d), H = 1;
        }
    };
    // Inputs: every instance a cell of this shard uses, with its exact reference, held for the
    // whole run; while one is made, its float64 draw (or the npy files) and the exact pass.
    std::vector<bool> needed(nL * nd * ns, false);
    for (std::size_t c : cells) needed[grid.point(c)] = true;
    double inputs = 0, load_extra = 0, seconds = 0;
    bool pairwise = false, baseline_pairwise = false;
    for (const auto& col : metric_columns(cfg.approximation.metrics)) {
        const MetricInfo* mi = find_metric(col);
        pairwise |= mi && mi->source == MetricInfo::Source::pairwise;
        baseline_pairwise |= mi && mi->has_baseline && mi->source == MetricInfo::Source::pairwise;
    }
    for (std::size_t li = 0; li < nL; ++li)
        for (std::size_t di = 0; di < nd; ++di)
            for (std::size_t si = 0; si < ns; ++si) {
                if (!needed[(li * nd + di) * ns + si]) continue;
                std::size_t L, Lk, d, dv, H;
                sizes(li, di, L, Lk, d, dv, H);
                const double Lq = double(L), Lkd = double(Lk);
                inputs += draws * double(H) *
                          (double(s) * (Lq * d + Lkd * d + Lkd * dv) + 8.0 * (Lq * d + Lkd * d + Lq * dv) +
                           (pairwise ? 16.0 * Lq : 0.0));   // + the exact softmax rows; per input draw
                const double draw = is_npy ? 8.0 * double(H) * (Lq * d + Lkd * d + Lkd * dv) * 1.5
                                           : 8.0 * (2 * Lq * d + Lq * dv);
                // The exact pass: K^T laid out once (ExactOperands), each thread's tiles.
                load_extra = std::max(load_extra, draw + 8.0 * Lkd * double(d) +
                                                      double(threads) * (256.0 * 256.0 + 512.0 * dv) * 8.0);
                const double pairs = cfg.causal ? Lq * Lkd / 2 : Lq * Lkd;
                seconds += draws * double(H) * (gemm_seconds(2.0 * pairs * double(d + dv), 8) + pairs / kVexpRate) / threads;
                // The uniform-attention baseline of the pairwise metrics: one more pass.
                if (baseline_pairwise)
                    seconds += draws * double(H) * (gemm_seconds(2.0 * pairs * double(d + 1), 8) + 2 * pairs / kVexpRate) / threads;
            }
    // Items: `conc` at once, each thread the most any cell needs beyond its kept buffers, and
    // those buffers at their largest, one of them growing (`where`: the cell needing the most).
    ItemCost worst;
    std::array<KeptBuffer, 3> kept;
    double largest = 0;
    std::string where;
    double work = 0;
    for (std::size_t c : cells) {
        const CellIndex& at = grid.at(c);
        std::size_t L, Lk, d, dv, H;
        sizes(at.L, at.d, L, Lk, d, dv, H);
        const Variant& v = cfg.variants[at.variant];
        const std::size_t m = grid.m(c, d);
        const ItemCost ic = approximation_item(v, cfg, m, L, Lk, d, dv, H, s, inner);
        work += ic.seconds * double(cfg.trials) * draws;
        for (std::size_t k = 0; k < kept.size(); ++k) kept[k].add(ic.kept[k]);
        if (ic.transient() > worst.transient()) worst = ic;
        if (ic.total() > largest) {
            largest = ic.total();
            where = cell_label(v.name, L, d, m);
        }
    }
    seconds += work / double(threads);
    Terms t;
    const std::string in_field = is_npy ? "inputs.q" : "inputs.L";
    const std::string budget = cfg.num_features.empty() ? "m" : "num_features";
    t.add("inputs", in_field, inputs);
    // (The output is made anew when its shape changes, not copied: it does not grow.)
    const double held = kept[0].largest + kept[1].largest + kept[2].largest + std::max(kept[0].below, kept[1].below);
    if (load_extra > double(conc) * (worst.transient() + held)) {
        t.add("loading inputs", in_field, load_extra);
    } else if (worst.fit > worst.features - worst.held() + worst.pairwise) {
        t.add("features", budget, double(conc) * (worst.fit + held));
    } else {
        t.add("features", budget, double(conc) * (worst.features - worst.held() + held));
        if (worst.pairwise > 0) t.add("pairwise metrics", "metrics", double(conc) * worst.pairwise);
    }
    // Per (cell, input seed, trial, head) row: the metric values (map nodes), then the errors
    // table as text and the summary.
    const std::size_t heads = is_npy ? npy->heads : 1;
    const double cols = double(metric_columns(cfg.approximation.metrics).size());
    t.add("results", cfg.input_seeds_set() ? "input_seeds" : "trials", double(items) * double(heads) * (cols * 120.0 + 64.0) + double(items) * (cols + 9) * 64.0);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, seconds, threads, where,
                  {{"trials", "lower trials"},
                   {"input_seeds", "lower input_seeds or trials"},
                   {"inputs.L", std::string("lower inputs.L or inputs.d") + (cfg.input_seeds_set() ? " or input_seeds" : "")},
                   {"inputs.q", "the .npy inputs are too large for this machine"},
                   {"m", "lower m"},
                   {"num_features", "lower num_features"},
                   {"metrics", "lower " + budget + ", or leave attention_mse, kernel_mse and negative_fraction out of metrics"}});
}

Cost estimate_kernel(const Config& cfg, int threads) {
    const KernelSpec& k = cfg.kernel;
    const double n = double(k.norm.size() * k.angle.size());
    double worst = 0, seconds = 0;
    std::string where;
    for (const Variant& v : cfg.variants)
        for (std::size_t d : k.d)
            for (std::size_t m : cfg.m) {
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

Cost estimate_timing(const Config& cfg, int threads) {
    const std::size_t s = dtype_bytes(cfg.dtype);
    const std::size_t runs = cfg.timing.warmup + cfg.timing.repeats;
    double peak_inputs = 0, peak_work = 0, peak_total = 0, seconds = 0;
    std::string where;
    std::map<std::string, double> series_last;   // budget: a series stops once a cell is over it
    for (std::size_t L : cfg.inputs.L)
        for (std::size_t d : cfg.inputs.d) {
            const std::size_t dv = cfg.inputs.d_v.value_or(d);
            const double Ld = double(L);
            const double inputs = 8.0 * (2 * Ld * d + Ld * dv) + double(s) * (2 * Ld * d + Ld * dv);
            double work = 0;
            std::string w;
            for (const Variant& v : cfg.variants)
                for (std::size_t m : v.exact ? std::vector<std::size_t>{0} : cfg.m) {
                    const std::string key = v.name + "/" + std::to_string(d) + "/" + std::to_string(m);
                    double bytes, secs;
                    if (v.exact) {
                        const double kt = double((std::size_t(1) << 19) / (256 * s));
                        bytes = double(threads) * (256.0 * kt + 512.0 * dv) * double(s) + Ld * dv * double(s);
                        const double pairs = cfg.causal ? Ld * Ld / 2 : Ld * Ld;
                        secs = (gemm_seconds(2.0 * pairs * double(d + dv), s) + pairs / kVexpRate) / threads;
                    } else {
                        const double F = double(v.map->num_features(m, d));
                        bytes = w_bytes(m, d, s, v.projection) + double(s) * 2 * Ld * F + 32.0 * Ld +
                                double(s) * F * double(dv + 1) * (std::ceil(Ld / 1024.0) + 3) + Ld * dv * double(s);
                        secs = (gemm_seconds(2.0 * 2 * Ld * double(m) * d + 4.0 * 2 * Ld * F * double(dv + 1), s) +
                                2 * Ld * F / kVexpRate) / threads;
                    }
                    secs *= double(runs);
                    const bool skipped = cfg.timing.time_budget_s > 0 &&
                                         (series_last.count(key) ? series_last[key] < 0 : false);
                    if (skipped || (cfg.timing.time_budget_s > 0 && secs > cfg.timing.time_budget_s)) {
                        series_last[key] = -1;
                        continue;
                    }
                    series_last[key] = secs;
                    seconds += secs;
                    if (bytes > work) work = bytes, w = cell_label(v.name, L, d, m);
                }
            if (inputs + work > peak_total) {
                peak_total = inputs + work;
                peak_inputs = inputs;
                peak_work = work;
                where = w;
            }
        }
    Terms t;
    t.add("inputs", "inputs.L", peak_inputs);
    t.add("features", "m", peak_work);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, seconds, threads, where, {{"inputs.L", "lower inputs.L or inputs.d"}, {"m", "lower m or inputs.L"}});
}

// "<key>: N kB" lines of /proc files, in bytes; nullopt when absent.
std::optional<double> proc_kb(const std::string& file, const std::string& key) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0) {
            try {
                return std::stod(line.substr(key.size() + 1)) * 1024.0;
            } catch (const std::exception&) {
                return std::nullopt;
            }
        }
    return std::nullopt;
}

std::optional<double> read_number_file(const std::string& path) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word == "max") return std::nullopt;
    try {
        return std::stod(word);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// Free memory under the cgroup limits of this process (v2, then v1), if any.
std::optional<double> cgroup_free() {
    std::ifstream in("/proc/self/cgroup");
    std::optional<double> best;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("0::", 0) == 0) {   // v2: this group and its parents
            for (std::string p = line.substr(3);; p = p.substr(0, p.rfind('/'))) {
                const std::string dir = "/sys/fs/cgroup" + (p == "/" ? std::string() : p);
                const auto max = read_number_file(dir + "/memory.max");
                const auto cur = read_number_file(dir + "/memory.current");
                if (max && cur) best = std::min(best.value_or(INFINITY), std::max(0.0, *max - *cur));
                if (p.empty() || p == "/" || p.rfind('/') == std::string::npos) break;
            }
        }
    }
    if (!best) {   // v1
        const auto lim = read_number_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        const auto use = read_number_file("/sys/fs/cgroup/memory/memory.usage_in_bytes");
        if (lim && use && *lim < 1e18) best = std::max(0.0, *lim - *use);
    }
    return best;
}

std::optional<double> rlimit_bytes(int which) {
    struct rlimit r {};
    if (::getrlimit(which, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
    return double(r.rlim_cur);
}

double stack_bytes() {
    const auto s = rlimit_bytes(RLIMIT_STACK);
    return s ? std::min(*s, 64 * MiB) : 8 * MiB;
}

}  // namespace

std::string format_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (std::fabs(b) >= 1024 && u < 5) b /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : (b < 10 ? "%.2g %s" : "%.3g %s"), b, units[u]);
    // "%.2g" of 1.0 is "1": fine; of 9.96 "10": fine.
    return buf;
}

std::size_t parse_size_text(const std::string& flag, const std::string& text) {
    const std::string expected = "a size like 8G, 512M or 1000000 (bytes)";
    if (text.empty()) throw Error(flag + ": empty value (expected " + expected + ")");
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string num = text.substr(0, i), unit = text.substr(i);
    double v = 0;
    try {
        std::size_t used = 0;
        if (num.empty() || num.front() == '.') throw std::invalid_argument(text);
        v = std::stod(num, &used);
        if (used != num.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        throw Error(flag + ": '" + text + "' is not " + expected);
    }
    static const std::vector<std::pair<std::string, double>> units = {
        {"", 1}, {"B", 1}, {"K", 1024}, {"KB", 1024}, {"KiB", 1024}, {"M", MiB}, {"MB", MiB}, {"MiB", MiB},
        {"G", 1024 * MiB}, {"GB", 1024 * MiB}, {"GiB", 1024 * MiB}, {"T", MiB * MiB}, {"TB", MiB * MiB}, {"TiB", MiB * MiB}};
    for (const auto& [u, f] : units)
        if (unit == u) {
            const double bytes = v * f;
            if (!(bytes >= 1) || bytes > 1.8e19) throw Error(flag + ": must be at least 1 byte and fit in 64 bits, got '" + text + "'");
            return std::size_t(bytes);
        }
    throw Error(flag + ": unknown unit '" + unit + "' in '" + text + "' (expected " + expected + ")");
}

std::string Cost::summary() const {
    std::string s = format_bytes(peak);
    std::string p;
    for (const auto& [name, b] : parts)
        if (b >= 0.005 * peak) p += (p.empty() ? "" : ", ") + name + " " + format_bytes(b);
    return p.empty() ? s : s + " (" + p + ")";
}

MemoryBudget memory_budget(std::optional<std::size_t> max_memory) {
    if (max_memory) return {*max_memory, "--max-memory"};
    MemoryBudget b{std::numeric_limits<std::size_t>::max(), "no limit found"};
    auto offer = [&](std::optional<double> v, const char* source) {
        if (v && *v < double(b.bytes)) b = {std::size_t(std::max(0.0, *v)), source};
    };
    offer(proc_kb("/proc/meminfo", "MemAvailable"), "MemAvailable in /proc/meminfo");
    offer(cgroup_free(), "the cgroup's memory.max");
    const auto vm = proc_kb("/proc/self/status", "VmSize").value_or(0);
    if (const auto as = rlimit_bytes(RLIMIT_AS)) offer(*as - vm - kBlasBuffer - kArena, "the address-space limit (ulimit -v)");
    const auto data = proc_kb("/proc/self/status", "VmData").value_or(0);
    if (const auto dl = rlimit_bytes(RLIMIT_DATA)) offer(*dl - data - kBlasBuffer - kArena, "the data limit (ulimit -d)");
    return b;
}

void check_memory(const Cost& c, const MemoryBudget& b, const std::string& name) {
    if (c.peak <= double(b.bytes)) return;
    const std::string source = b.source == "--max-memory" ? "--max-memory" : b.source;
    throw Error(name + ": " + c.field + ": needs an estimated " + c.summary() + " of memory" +
                (c.where.empty() ? "" : " for " + c.where) + ", more than the " + format_bytes(double(b.bytes)) +
                " available (" + source + ")" + (c.hint.empty() ? "" : "; " + c.hint) +
                (b.source == "--max-memory" ? "" : ", or set the budget with --max-memory"));
}

ThreadPlan plan_threads(int requested, double data_bytes, const std::string& flag) {
    ThreadPlan p;
    const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    p.threads = requested > 0 ? requested : hw;
    if (p.threads > max_threads()) {
        p.warning = flag + " " + std::to_string(requested) + " is more than the " + std::to_string(max_threads()) +
                    " threads that can help here (4 per hardware thread, " + std::to_string(hw) + " hardware threads)";
        p.threads = max_threads();
    }
    // Under ulimit -v (or -d), a thread that cannot get OpenBLAS's buffer makes OpenBLAS retry
    // for ever: start only as many as the address space (data segment) holds.
    struct Limit {
        int which;
        const char* status_key;
        const char* name;
    };
    for (const Limit l : {Limit{RLIMIT_AS, "VmSize", "the address-space limit (ulimit -v"},
                          Limit{RLIMIT_DATA, "VmData", "the data limit (ulimit -d"}}) {
        const auto lim = rlimit_bytes(l.which);
        if (!lim) continue;
        const double used = proc_kb("/proc/self/status", l.status_key).value_or(0);
        const double per_thread = kBlasBuffer + kArena + stack_bytes();
        const double room = *lim - used - kBlasBuffer - data_bytes;   // the main thread's buffer, the data
        if (room < 0)
            throw Error(flag + ": " + l.name + " " + format_bytes(*lim) + ") leaves no room: " + format_bytes(used) +
                        " in use, OpenBLAS needs " + format_bytes(kBlasBuffer) + " per thread, the data an estimated " +
                        format_bytes(data_bytes));
        const int fit = 1 + int(std::min(room / per_thread, 1e6));
        if (fit < p.threads) {
            p.warning = (p.warning.empty() ? flag + " " + std::to_string(p.threads) : p.warning + ", and " + std::to_string(p.threads)) +
                        " does not fit " + l.name + " " + format_bytes(*lim) + "; a thread needs about " +
                        format_bytes(per_thread) + " of address space for OpenBLAS's buffer, its stack and its malloc arena)";
            p.threads = fit;
        }
    }
    if (!p.warning.empty()) p.warning += "; using " + std::to_string(p.threads);
    return p;
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

Cost estimate_apply(const QkvShapes& sh, const ApplyOptions& o, int threads) {
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
        const double kt = double((std::size_t(1) << 19) / (256 * s));
        head += double(threads) * (256.0 * kt + 512.0 * dv) * double(s);
        const double pairs = o.causal ? L * Lk / 2 : L * Lk;
        seconds = H * (gemm_seconds(2.0 * pairs * (d + dv), s) + pairs / kVexpRate) / threads;
    } else {
        const Variant& v = *o.variant;
        const double F = double(v.map->num_features(o.m, sh.d));
        const double fit = v.map->data_dependent() ? 16.0 * (L + Lk) * d : 0;
        head += w_bytes(o.m, sh.d, s, v.projection) +
                std::max(fit, double(s) * (L + Lk) * F + 32.0 * (L + Lk) +
                                  double(s) * F * (dv + 1) * (std::ceil(Lk / 1024.0) + 3) * (o.causal ? 2 : 1));
        seconds = H * (gemm_seconds(2.0 * (L + Lk) * double(o.m) * d + 4.0 * (L + Lk) * F * (dv + 1), s) +
                       (L + Lk) * F / kVexpRate);
    }
    const double save = outs + 8.0 * H * L * dv + double(s) * H * L * dv;
    Terms t;
    t.add("inputs", "--q", tensors);
    const double work = std::max({reading, outs + head, save});
    if (work == reading) t.add("reading inputs", "--q", reading);
    else if (work == save) t.add("output", "--q", save);
    else t.add(o.variant ? "features" : "attention", o.variant ? "--m" : "--q", head + outs);
    t.add("thread buffers", "--threads", double(threads) * kThreadRss);
    return finish(t, seconds, threads, "", {{"--q", "the tensors are too large for this machine"}, {"--m", "lower --m"}});
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

void use_predictable_allocator() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 16 * 1024 * 1024);
#endif
}

}  // namespace favor
