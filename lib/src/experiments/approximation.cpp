// The "approximation" experiment: attention errors of each estimator against exact
// attention, per cell (variant, L, d, m or num_features, scale), input seed and trial
// (docs/design.md sections 3 and 6).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <map>
#include <optional>
#include <type_traits>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_linear.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/exact_rows.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/experiments/cells.hpp"
#include "experiments/experiment_parts.hpp"
#include "favor/attention/hybrid_attention.hpp"
#include "favor/attention/hybrid_fast.hpp"
#include "favor/core/parallel.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/grid.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/io/report.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/metrics/metric_table.hpp"
#include "favor/metrics/row_sample.hpp"
#include "favor/metrics/row_sampled_metrics.hpp"

namespace favor {

namespace {

using Values = MetricValues;   // metric -> value

// One attention problem: a (batch, head) slice of the inputs, with its exact reference.
// Row-sampled (docs/design.md 3.1: `sample` has rows): x, reference and softmax hold the
// sampled query rows only, q_rows those rows of q; y only when a pairwise metric is asked.
template <class T>
struct Head {
    Mat<T> q, k, v;            // inputs in the compute dtype (half dtypes: rounded floats)
    Mat<double> x, y;          // scaled q, k in float64 (pairwise metrics)
    Mat<double> reference;     // exact softmax attention output, float64
    SoftmaxRows softmax;       // the exact side of the pairwise metrics (if any is asked)
    Mat<T> g;                  // the upstream gradient G (L, dv) of the gradient metrics (if any is asked)
    Gradients<double> grad;    // exact attention's (dQ, dK, dV) for G, float64
    RowSample sample;          // the query rows evaluated; no rows: all, as always
    Mat<T> q_rows;             // row-sampled: the sampled rows of q
    Mat<double> g_up;          // G in float64 for the loss-aware metrics (if any metric reads G)
    bool sampled() const { return !sample.rows.empty(); }
};

template <class T>
Gradients<double> widen(const Gradients<T>& g) {
    return {cast_mat<double>(g.dQ), cast_mat<double>(g.dK), cast_mat<double>(g.dV)};
}

// The inputs of one (L, d, scale) point of the grid and one input seed.
template <class T>
struct Instance {
    std::size_t L = 0, d = 0;
    std::optional<double> scale;   // random inputs only
    std::uint64_t input_seed = 0;
    std::vector<Head<T>> heads;
    std::size_t model_heads = 1;   // heads[i] is the model's head i % model_heads (weight_heads)
};

// Items run as (cell, input seed, trial), trials fastest; `pos` indexes the cells a shard
// owns. An item's inputs are instance point * seeds + seed.
struct Items {
    std::size_t seeds, trials;
    std::size_t pos(std::size_t item) const { return item / (seeds * trials); }
    std::size_t seed(std::size_t item) const { return item / trials % seeds; }
    std::size_t trial(std::size_t item) const { return item % trials; }
    std::size_t instance(const ApproxCells& g, std::size_t cell, std::size_t item) const {
        return g.point(cell) * seeds + seed(item);
    }
};

// A row-sampled head (docs/design.md 3.1) from its inputs in the compute type (before any half
// rounding), the sampled rows of q in float64 (x) and, for the pairwise metrics, k in float64
// (y; null without them).
template <class T>
Head<T> sampled_head(Mat<T> q, Mat<T> k, Mat<T> v, const Mat<double>& q_rows, const Mat<double>* k64, bool causal,
                     int threads, Rounding rounding, RowSample sample) {
    Head<T> h{std::move(q), std::move(k), std::move(v), scale_rows(q_rows), {}, {}, {}, {}, {}, {}, {}};
    // The reference rows (3.1): a float run's in float32 products of the float32 inputs (before
    // any half rounding) with float64 sums across key tiles; a float64 run's in float64.
    if constexpr (std::is_same_v<T, float>) h.reference = exact_attention_rows_f32(h.q, sample.rows, h.k, h.v, causal, threads);
    else h.reference = exact_attention_rows(h.q, sample.rows, h.k, h.v, causal, threads);
    h.sample = std::move(sample);
    const std::vector<std::size_t>& rows = h.sample.rows;
    for (Mat<T>* m : {&h.q, &h.k, &h.v}) round_to(rounding, m->data(), m->size());
    h.q_rows = take_rows(h.q, rows);
    if (k64) {
        h.y = scale_rows(*k64);
        h.softmax = softmax_rows(h.x, h.y, causal, threads, rows.data());
    }
    return h;
}

// G: the upstream gradient, or null when no metric reads it; grads: a gradient metric is asked
// (the exact gradients are made); loss_aware: a loss-aware error is (G kept as g_up). sample: the rows a `query_rows` config evaluates (no rows:
// all; never with G: config.cpp refuses the pair).
template <class T>
Head<T> make_head(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, bool causal, int threads,
                  Rounding rounding, bool pairwise, const Mat<double>* G, bool grads, bool loss_aware, RowSample sample) {
    if (sample.rows.empty()) {
        // With the gradients the forward keeps each row's lse and the exact gradient starts from
        // it (one forward, as exact_attention_backward would make again; Out bitwise the same: 2.7).
        const bool backward = G && grads;
        ExactForward<double> f = backward ? exact_attention_saved(q, k, v, causal, threads)
                                          : ExactForward<double>{exact_attention(q, k, v, causal, threads), {}};
        Head<T> h{cast_mat<T>(q), cast_mat<T>(k), cast_mat<T>(v), scale_rows(q), scale_rows(k),
                  std::move(f.out), {}, {}, {}, {}, {}};
        for (Mat<T>* m : {&h.q, &h.k, &h.v}) round_to(rounding, m->data(), m->size());
        if (pairwise) h.softmax = softmax_rows(h.x, h.y, causal, threads);
        if (G && loss_aware) h.g_up = *G;
        if (backward)
            h.g = cast_mat<T>(*G),
            h.grad = exact_attention_backward_saved(q, k, v, *G, h.reference, f.lse, causal, threads);
        return h;
    }
    const Mat<double> q_rows = take_rows(q, sample.rows);
    return sampled_head<T>(cast_mat<T>(q), cast_mat<T>(k), cast_mat<T>(v), q_rows, pairwise ? &k : nullptr, causal,
                           threads, rounding, std::move(sample));
}

// The first `rows` rows of m (all of them when it has no more).
Mat<double> first_rows(const Mat<double>& m, std::size_t rows) {
    if (rows >= m.shape(0)) return m;
    Mat<double> out = Mat<double>::from_shape({rows, m.shape(1)});
    std::copy(m.data(), m.data() + rows * m.shape(1), out.data());
    return out;
}

// Every instance of the grid ((L, d, scale) point x input seed; npy inputs are one point),
// with inputs and references loaded for those `cells` use.
template <class T>
std::vector<Instance<T>> load_instances(const Config& cfg, const ApproxCells& grid, const std::vector<std::size_t>& cells,
                                        nlohmann::json& info, int threads, const std::atomic<bool>* stop) {
    const bool npy = cfg.inputs.npy();
    HeadTensors files;
    std::size_t file_L = 0;   // npy: q's rows in its file
    if (npy) {
        files = load_qkv(npy_source(cfg));
        const std::size_t L = cfg.inputs.L.empty() ? files.L() : cfg.inputs.L.front();
        check_map_sizes(cfg, files.d(), L, key_rows(files.file_L, files.file_Lk, L), weight_heads(files.lead));
        file_L = files.file_L;
    }
    const std::size_t S = cfg.input_seeds.size();
    std::vector<Instance<T>> out(grid.points() * S);
    // Some metric (or baseline) of the streamed pairwise pass; some gradient metric.
    const bool pairwise = any_pairwise(metric_columns(cfg.approximation.metrics));
    const bool grads = any_gradient(metric_columns(cfg.approximation.metrics));
    const bool upstream = any_upstream(metric_columns(cfg.approximation.metrics));   // some metric reads G
    const bool loss_aware = any_loss_aware(metric_columns(cfg.approximation.metrics));
    std::vector<Mat<double>> file_g;   // npy inputs: inputs.grad, or drawn per head
    if (npy && upstream) {
        // G has the files' L rows (inputs.grad, or drawn at that L); a cell takes its first L.
        const std::size_t dv = files.v[0].shape(1), gL = file_L ? file_L : files.L();
        if (!cfg.inputs.grad.empty()) file_g = load_upstream(cfg.inputs.grad, files.lead, gL, dv, cfg.file + ": inputs.grad", cfg.inputs.layout);
        else
            for (std::size_t h = 0; h < files.q.size(); ++h) file_g.push_back(upstream_gradient(cfg.seed, gL, dv, h));
    }
    std::vector<bool> needed(grid.points(), false);
    for (std::size_t c : cells) needed[grid.point(c)] = true;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::size_t p = i / S;
        const PointIndex at = grid.point_at(p);
        Instance<T>& in = out[i];
        in.L = npy && cfg.inputs.L.empty() ? files.L() : cfg.inputs.L[at.L];
        in.d = npy ? files.d() : cfg.inputs.d[at.d];
        in.input_seed = cfg.input_seeds[i % S];
        if (!npy) in.scale = cfg.inputs.scale[at.scale];
        if (!needed[p] || (stop && stop->load())) continue;   // stopped: no item will run
        const RowSample sample = cfg.approximation.samples(in.L)
                                     ? draw_query_rows(cfg.seed, in.input_seed, in.L, *cfg.approximation.query_rows, cfg.causal)
                                     : RowSample{};
        const InputDraw draw{cfg.inputs.family, in.input_seed, cfg.file + ": inputs.scale"};   // random inputs
        if (npy) {
            // The first L query rows (inputs.L), their keys and values as key_rows says (all of
            // them unless the files are self-attention's: docs/design.md section 5).
            const std::size_t Lk = key_rows(files.file_L, files.file_Lk, in.L);
            in.heads.reserve(files.q.size());   // (no doubled copy while the vector grows: many small heads)
            in.model_heads = weight_heads(files.lead);
            for (std::size_t h = 0; h < files.q.size(); ++h) {
                const Mat<double> G = upstream ? first_rows(file_g[h], in.L) : Mat<double>();
                in.heads.push_back(make_head<T>(first_rows(files.q[h], in.L), first_rows(files.k[h], Lk),
                                                first_rows(files.v[h], Lk), cfg.causal, threads,
                                                dtype_rounding(cfg.dtype), pairwise, upstream ? &G : nullptr, grads,
                                                loss_aware, sample));
            }
        } else if (!sample.rows.empty() && !pairwise) {
            // Row-sampled without the pairwise metrics: the inputs drawn straight into the
            // compute type (random_inputs_as; no float64 whole), the sampled rows of q again
            // in float64 for x (bitwise those rows of the whole draw).
            const std::size_t dv = cfg.inputs.d_v.value_or(in.d);
            InputsOf<T> x = random_inputs_as<T>(cfg.seed, in.L, in.d, dv, *in.scale, draw, threads);
            const QKV rows = random_input_rows(cfg.seed, in.d, dv, *in.scale, draw, sample.rows);
            in.heads.push_back(sampled_head<T>(std::move(x.q), std::move(x.k), std::move(x.v), rows.q, nullptr,
                                               cfg.causal, threads, dtype_rounding(cfg.dtype), sample));
        } else {
            QKV qkv = random_inputs(cfg.seed, in.L, in.d, cfg.inputs.d_v.value_or(in.d), *in.scale, draw, threads);
            const Mat<double> G = upstream ? upstream_gradient(cfg.seed, in.L, qkv.v.shape(1), 0, in.input_seed) : Mat<double>();
            in.heads.push_back(make_head<T>(qkv.q, qkv.k, qkv.v, cfg.causal, threads, dtype_rounding(cfg.dtype), pairwise,
                                            upstream ? &G : nullptr, grads, loss_aware, sample));
        }
    }
    if (npy) info["inputs"] = {{"shape_lead", files.lead}, {"L", file_L}, {"d", files.d()}, {"heads", files.q.size()}};
    return out;
}

// The metrics of the streamed pass over all pairs (i, j) the request asks for.
template <class T>
void pass_values(const Head<T>& h, const FeatureRows& fq, const FeatureRows& fk, const std::vector<std::string>& cols,
                 const PairwiseRequest& req, int threads, Values& v) {
    if (req.any()) pairwise_values(cols, req, pairwise_metrics(h.x, h.y, h.softmax, fq, fk, req, threads), v);
}

// The estimator's gradients for the head's G: hybrid_backward for hybrids, favor_backward
// otherwise (the map must have a gradient: gradient_refusal() empty).
template <class T>
Gradients<double> estimator_gradients(const Estimator<T>& est, const Head<T>& h, bool causal, int threads) {
    if (est.hybrid.active()) return widen(hybrid_backward(est, h.q, h.k, h.v, h.g, causal, threads));
    return widen(favor_backward(est, h.q, h.k, h.v, h.g, causal, threads));
}

// A hybrid's metrics (docs/design.md 2.8): the output metrics of hybrid_forward's output (the
// fast path for window / sinks; row-sampled: the reference path's sampled rows only, each
// bitwise that row of the reference's whole); the pairwise
// metrics of its explicit A_hat_ij = K_ij / D_i (hybrid_pairwise; the rows' sums added in row
// order; kernel_mse_theory blank); the gradient metrics from hybrid_backward (blank for maps
// without a gradient). The forward metric (overflow_fraction) is blank.
template <class T>
Values hybrid_values(const Estimator<T>& est, const Head<T>& h, const std::vector<std::string>& cols, bool causal,
                     int inner_threads) {
    Values v;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::size_t>* rows = h.sampled() ? &h.sample.rows : nullptr;
    thread_local Mat<T> all_rows;   // reused across the cells this worker runs (no page faults)
    Mat<T> sampled_rows;
    if (rows) sampled_rows = hybrid_attention(est, h.q, h.k, h.v, causal, inner_threads, rows);
    else hybrid_forward_into(est, h.q, h.k, h.v, all_rows, causal, inner_threads);
    const Mat<T>& out = rows ? sampled_rows : all_rows;
    clock_values(cols, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), v);
    PairwiseRequest req = pairwise_request(cols, causal, est.map, est.W.shape(0), h.x, h.y);
    req.theory = {}, req.row_normalised = true;
    if (h.sampled()) req.positions = h.sample.rows.data();
    std::vector<PairwiseSums> per_row;
    if (req.any()) per_row = hybrid_pairwise(est, h.q, h.k, h.x, h.y, req, inner_threads, rows);
    if (h.sampled()) {
        sampled_values(cols, h.reference, out, req, per_row, h.sample, v);
    } else {
        output_values(cols, h.reference, out, v);
        if (h.g_up.size() != 0) upstream_values(cols, h.reference, out, h.g_up, v);
        PairwiseSums total;
        for (const PairwiseSums& r : per_row) total.add(r);   // in row order
        if (req.any()) pairwise_values(cols, req, pairwise_result(total, req), v);
    }
    if (h.g.size() != 0 && est.ready_map().gradient_refusal().empty())
        gradient_values(cols, h.grad, estimator_gradients(est, h, causal, inner_threads), v);
    return v;
}

// The metric columns of one head for one estimator.
template <class T>
Values measure(const Estimator<T>& est, const Head<T>& h, const std::vector<std::string>& cols, bool causal,
               int inner_threads) {
    if (est.hybrid.active()) return hybrid_values(est, h, cols, causal, inner_threads);
    Values v;
    PairwiseRequest req = pairwise_request(cols, causal, est.map, est.W.shape(0), h.x, h.y);
    if (h.sampled()) req.positions = h.sample.rows.data();
    Mat<T> out_rows;   // row-sampled: Out_hat's sampled rows (their metrics come with the pass's)
    // Row-sampled, non-causal, fused: the forward of the sampled rows only (a row needs its own
    // features and the key sums over all L keys: bitwise those rows of the whole forward), unless
    // `seconds` asks for the whole forward's time (docs/design.md 3.1).
    const bool rows_only = h.sampled() && !causal && !any_clock(cols);
    const auto outputs = [&](const Mat<T>& out) {
        if (h.sampled()) out_rows = take_rows(out, h.sample.rows);
        else output_values(cols, h.reference, out, v);
        if (!h.sampled() && h.g_up.size() != 0) upstream_values(cols, h.reference, out, h.g_up, v);
    };
    const auto t0 = std::chrono::steady_clock::now();
    // The output: the fused forward, no (L, F) feature matrices, unless a metric of the
    // unfused forward's counts is asked (overflow_fraction) or the estimator cannot take it
    // (half-precision emulation, unshifted maps: docs/design.md 2.6; forward_fused).
    if (output_fused(cols, est.ready_map(), est.rounding, est.shift, causal)) {
        thread_local Mat<T> out;   // reused across the cells this worker runs (no page faults)
        favor_forward_into(est, rows_only ? h.q_rows : h.q, h.k, h.v, out, causal);
        clock_values(cols, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), v);
        if (rows_only) out_rows = out;
        else outputs(out);
    } else {
        const Approximation<T> a = favor_attention(est, h.q, h.k, h.v, causal);
        clock_values(cols, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), v);
        outputs(a.out);
        forward_values(cols, {a.overflow, a.entries}, v);
    }
    // The gradient metrics: the estimator's backward pass for G (blank for maps without one).
    if (h.g.size() != 0 && est.ready_map().gradient_refusal().empty())
        gradient_values(cols, h.grad, estimator_gradients(est, h, causal, inner_threads), v);
    // The pairwise metrics stream over the pairs, each tile's features made again from the
    // estimator (bitwise favor_attention's): never the (L, F) matrices (docs/design.md 3).
    // Row-sampled: the sampled query rows' features against all keys, each row's own sums.
    if (h.sampled()) {
        std::vector<PairwiseSums> per_row;
        if (req.any())
            pairwise_metrics(h.x, h.y, h.softmax, EstimatorRows<T>(est, h.q_rows, Side::query, inner_threads),
                             EstimatorRows<T>(est, h.k, Side::key, inner_threads), req, inner_threads, &per_row);
        sampled_values(cols, h.reference, out_rows, req, per_row, h.sample, v);
    } else if (req.any()) {
        pass_values(h, EstimatorRows<T>(est, h.q, Side::query, inner_threads),
                    EstimatorRows<T>(est, h.k, Side::key, inner_threads), cols, req, inner_threads, v);
    }
    return v;
}

// A problem evaluated on all its rows in a table with <name>_row_sem columns (npy inputs with
// query_rows >= L): no sampling error, 0 beside each value.
void all_rows_sems(const std::vector<std::string>& cols, Values& v) {
    for (const auto& c : sampled_columns(cols))
        if (const auto it = v.find(c); it != v.end() && it->second) v[row_sem_column(c)] = 0.0;
}

// The baseline metrics of one head: uniform attention, i.e. the estimator whose features
// are the constant 1 (A_hat_ij = 1/n_i, Out_hat = the mean of the visible rows of V).
template <class T>
Values uniform_baseline(const Head<T>& h, const std::vector<std::string>& cols, bool causal, int threads) {
    const std::vector<std::string> wanted = baseline_columns(cols);
    Values v;
    if (wanted.empty()) return v;
    // Sizes from the fields every head has (q, k; x: the evaluated query rows): y and softmax
    // exist only with a pairwise metric when row-sampled, g and grad only with a gradient metric.
    const std::size_t Lk = h.k.shape(0), d = h.k.shape(1);
    Features<double> fq{Mat<double>::from_shape({h.x.shape(0), 1}), std::vector<double>(h.x.shape(0), 0.0)};
    Features<double> fk{Mat<double>::from_shape({Lk, 1}), std::vector<double>(Lk, 0.0)};
    fq.phi.fill(1.0);
    fk.phi.fill(1.0);
    // Every query row (row-sampled: more than x's); row-sampled and non-causal, one row: each
    // row of the whole is that row, the key sums times 1 (no (L, d_v) float64 output at L = 2^20).
    const bool one_row = h.sampled() && !causal;
    Mat<double> ones = Mat<double>::from_shape({one_row ? std::size_t(1) : h.q.shape(0), 1});
    ones.fill(1.0);
    const Mat<double> out_all = linear_attention(ones, fk.phi, cast_mat<double>(h.v), causal, threads);
    const auto sampled_out = [&] {
        if (!one_row) return take_rows(out_all, h.sample.rows);
        Mat<double> o = Mat<double>::from_shape({h.sample.rows.size(), out_all.shape(1)});
        for (std::size_t r = 0; r < o.shape(0); ++r) std::copy(out_all.data(), out_all.data() + o.shape(1), &o(r, 0));
        return o;
    };
    PairwiseRequest req = pairwise_request(wanted, causal, nullptr, 0, h.x, h.y);
    if (h.sampled()) {   // the sampled rows (fq has as many), against all keys
        req.positions = h.sample.rows.data();
        std::vector<PairwiseSums> per_row;
        if (req.any())
            pairwise_metrics(h.x, h.y, h.softmax, MatrixRows<double>(fq), MatrixRows<double>(fk), req, threads, &per_row);
        sampled_values(wanted, h.reference, sampled_out(), req, per_row, h.sample, v);
    } else {
        output_values(wanted, h.reference, out_all, v);
        if (h.g_up.size() != 0) upstream_values(wanted, h.reference, out_all, h.g_up, v);
        pass_values(h, MatrixRows<double>(fq), MatrixRows<double>(fk), wanted, req, threads, v);
    }
    if (h.g.size() != 0) {   // constant features: dQ = dK = 0, dV = A^T G with A_ij = 1/n_i
        Gradients<double> u{Mat<double>::from_shape({h.q.shape(0), d}), Mat<double>::from_shape({Lk, d}), {}};
        u.dQ.fill(0.0), u.dK.fill(0.0);
        u.dV = linear_attention_backward(fq.phi, fk.phi, {}, cast_mat<double>(h.v), cast_mat<double>(h.g), causal).dV;
        gradient_values(wanted, h.grad, u, v);
    }
    Values out;
    for (const auto& c : wanted) {
        out[c] = v[c];
        if (v.count(row_sem_column(c))) out[row_sem_column(c)] = v[row_sem_column(c)];
    }
    return out;
}

// The metrics over a cell's trials (grad_bias_rel, grad_bias_floor), per (cell, input seed):
// every trial's gradients again, added in trial order (TrialGradients), into the cells of
// each of its trials' rows (blank for maps without a gradient). After the items, so resumed
// and fresh items alike; the numbers depend on the cell alone.
template <class T>
void trial_gradient_cells(const Config& cfg, const ApproxCells& grid, const Items& it, const std::vector<std::size_t>& cells,
                          const std::vector<Instance<T>>& instances, const std::vector<std::string>& cols, int threads,
                          std::vector<JournalRows>& items) {
    std::vector<std::string> wanted;
    for (const auto& c : cols)   // (a <metric>_row_sem column is no table entry)
        if (const MetricInfo* mi = find_metric(c); mi && mi->source == MetricInfo::Source::trials) wanted.push_back(c);
    if (wanted.empty()) return;
    const bool per_head = cfg.inputs.npy() && cfg.inputs.per_head;
    const std::size_t groups = cells.size() * it.seeds;
    const int inner = groups < std::size_t(threads) ? threads : 1;
    parallel_for(groups, threads, [&](std::size_t g) {
        const std::size_t first = g * it.trials, cell = cells[it.pos(first)];
        const Variant& var = cfg.variants[grid.at(cell).variant];
        const Instance<T>& in = instances[it.instance(grid, cell, first)];
        if (!var.map->gradient_refusal().empty()) return;
        const std::size_t m = var.map->uses_m() ? grid.m(cell, in.d) : 1;
        std::vector<TrialGradients> acc(in.heads.size());
        for (std::size_t t = 0; t < it.trials; ++t) {
            const Estimator<T> base = make_estimator<T>(var, m, in.d, cfg.seed, t, dtype_rounding(cfg.dtype));
            for (std::size_t h = 0; h < in.heads.size(); ++h) {
                const Head<T>& x = in.heads[h];
                acc[h].add(estimator_gradients(base.for_inputs(x.q, x.k, h % in.model_heads), x, cfg.causal, inner));
            }
        }
        std::vector<Values> per(in.heads.size());
        for (std::size_t h = 0; h < in.heads.size(); ++h) trial_gradient_values(wanted, in.heads[h].grad, acc[h], per[h]);
        const std::vector<Values> rows = per_head ? per : std::vector<Values>{combine_heads(per, wanted)};
        for (std::size_t t = 0; t < it.trials; ++t)
            for (std::size_t r = 0; r < rows.size(); ++r)
                for (const auto& c : wanted)
                    items[first + t][r][std::size_t(std::find(cols.begin(), cols.end(), c) - cols.begin())] =
                        metric_cell(rows[r], c);
    });
}

// The metric cells of one (cell, trial): one row for all heads, or one per head with
// "per_head". These strings are what errors.csv holds and what the journal records.
JournalRows item_rows(const std::vector<Values>& heads, const std::vector<std::string>& cols, bool per_head) {
    const std::vector<Values> rows = per_head ? heads : std::vector<Values>{combine_heads(heads, cols)};
    JournalRows out;
    for (const Values& v : rows) {
        std::vector<std::string> row;
        for (const auto& col : cols) row.push_back(metric_cell(v, col));
        out.push_back(std::move(row));
    }
    return out;
}

// errors.csv: one row per (cell, input seed, trial), or per (cell, input seed, trial, head)
// with "per_head"; the input_seed column only when the config sets input_seeds.
template <class T>
Table error_rows(const Config& cfg, const ApproxCells& grid, const Items& it, const std::vector<std::size_t>& cells,
                 const std::vector<Instance<T>>& instances, const std::vector<JournalRows>& items,
                 const std::vector<std::string>& cols) {
    const bool per_head = cfg.inputs.npy() && cfg.inputs.per_head, seeds = cfg.input_seeds_set();
    Table t;
    t.columns = approximation_key_columns();
    if (per_head) t.columns.push_back("head");
    if (seeds) t.columns.push_back("input_seed");
    for (const char* c : {"trial", "seed"}) t.columns.push_back(c);
    for (const auto& col : cols) t.columns.push_back(col);
    for (std::size_t item = 0; item < items.size(); ++item) {
        const std::size_t cell = cells[it.pos(item)];
        const Variant& var = cfg.variants[grid.at(cell).variant];
        const Instance<T>& in = instances[it.instance(grid, cell, item)];
        const std::size_t m = grid.m(cell, in.d);
        for (std::size_t h = 0; h < items[item].size(); ++h) {
            std::vector<std::string> row = {var.name, var.features_label(), var.projection_label(), format_count(in.L),
                                             format_count(in.d), format_count(m),
                                             format_count(var.num_features(m, in.d, cfg.causal)), format_number(in.scale)};
            if (per_head) row.push_back(format_count(h));
            if (seeds) row.push_back(std::to_string(in.input_seed));
            row.push_back(format_count(it.trial(item)));
            row.push_back(std::to_string(cfg.seed));
            for (const auto& c : items[item][h]) row.push_back(c);
            t.rows.push_back(std::move(row));
        }
    }
    return t;
}

// baseline_<metric> per (L, d, scale[, head]) and input seed for the instances in use (the
// input_seed column only when the config sets input_seeds).
template <class T>
Table baseline_rows(const Config& cfg, const std::vector<Instance<T>>& instances, const std::vector<std::string>& cols,
                    int threads) {
    const bool per_head = cfg.inputs.npy() && cfg.inputs.per_head, seeds = cfg.input_seeds_set();
    Table t;
    t.columns = baseline_key_columns(per_head);
    if (seeds) t.columns.push_back("input_seed");
    std::vector<std::string> names = baseline_columns(cols);
    if (cfg.has_row_sem())   // (the uniform baseline's sampling errors too)
        for (const auto& c : sampled_columns(baseline_columns(cols))) names.push_back(row_sem_column(c));
    for (const auto& c : names) t.columns.push_back("baseline_" + c);
    if (names.empty()) return t;
    for (const Instance<T>& in : instances) {
        if (in.heads.empty()) continue;
        std::vector<Values> heads;
        for (const Head<T>& h : in.heads) {
            heads.push_back(uniform_baseline(h, cols, cfg.causal, threads));
            if (cfg.has_row_sem() && !h.sampled()) all_rows_sems(cols, heads.back());
        }
        const std::vector<Values> rows = per_head ? heads : std::vector<Values>{combine_heads(heads, names)};
        for (std::size_t h = 0; h < rows.size(); ++h) {
            std::vector<std::string> row = {format_count(in.L), format_count(in.d), format_number(in.scale)};
            if (per_head) row.push_back(format_count(h));
            if (seeds) row.push_back(std::to_string(in.input_seed));
            for (const auto& c : names) row.push_back(metric_cell(rows[h], c));
            t.rows.push_back(std::move(row));
        }
    }
    return t;
}

// Maps without a projection draw nothing, so every trial gives the same numbers, and maps
// that ignore m (elu, dpfp) give the same numbers at every m: each such (cell, input seed,
// trial) item is computed once, at its first occurrence (`unique`), and copied (source[item])
// to the others.
void dedupe_items(const Config& cfg, const ApproxCells& grid, const Items& it, const std::vector<std::size_t>& cells,
                  std::vector<std::size_t>& source, std::vector<std::size_t>& unique) {
    const std::size_t total = cells.size() * it.seeds * it.trials;
    source.assign(total, 0);
    std::map<std::vector<std::size_t>, std::size_t> first;
    constexpr std::size_t any = std::size_t(-1);
    for (std::size_t item = 0; item < total; ++item) {
        const std::size_t cell = cells[it.pos(item)];
        const CellIndex& at = grid.at(cell);
        const Variant& var = cfg.variants[at.variant];
        const std::vector<std::size_t> key = {at.variant, it.instance(grid, cell, item), var.map->uses_m() ? at.budget : any,
                                              var.map->uses_projection() ? it.trial(item) : any};
        const auto [pos, fresh] = first.emplace(key, item);
        if (fresh) unique.push_back(item);
        source[item] = pos->second;
    }
}

// The items of `unique` found in the journal (resume), each checked to have the shape of a
// fresh item, copied into `items` and marked finished.
void resume_items(const Journal* j, const Config& cfg, const Items& it, const std::vector<std::size_t>& cells,
                         const std::vector<std::size_t>& unique, std::size_t heads, const std::vector<std::string>& cols,
                         std::vector<JournalRows>& items, std::vector<char>& finished) {
    for (std::size_t item : unique) {
        const std::size_t cell = cells[it.pos(item)], trial = it.trial(item);
        const JournalRows* rows = j ? j->find(cell, trial, cfg.input_seeds[it.seed(item)]) : nullptr;
        if (!rows) continue;
        check_journal_entry(*j, *rows, heads, cols, cell, trial);
        items[item] = *rows;
        finished[item] = 1;
    }
}

// The tables of a finished run: errors.csv, summary.csv with the baselines' mean over input
// seeds, and (with input_seeds) the baselines per input draw.
template <class T>
void make_tables(const Config& cfg, const ApproxCells& grid, const Items& it, const std::vector<std::size_t>& cells,
                 const std::vector<Instance<T>>& instances, const std::vector<JournalRows>& items,
                 const std::vector<std::string>& cols, int threads, RunResult& r) {
    r.errors = error_rows(cfg, grid, it, cells, instances, items, cols);
    std::vector<std::string> keys = approximation_key_columns();
    const bool per_head = r.errors.has_column("head");
    if (per_head) keys.push_back("head");
    r.summary = summarize(r.errors, keys, stat_columns(cols), value_columns(cols));
    const Table per_seed = baseline_rows(cfg, instances, cols, threads);
    const std::vector<std::string> on = baseline_key_columns(per_head);
    std::vector<std::string> values;
    for (const auto& c : per_seed.columns)
        if (c.rfind("baseline_", 0) == 0) values.push_back(c);
    r.summary = join_columns(r.summary, group_means(per_seed, on, values), on);
    if (cfg.input_seeds_set() && !values.empty()) r.baselines = per_seed;
}

// One item's rows: the variant's estimator for this trial on every head of the instance.
template <class T>
JournalRows measure_item(const Config& cfg, const ApproxCells& grid, std::size_t cell, std::size_t trial,
                         const Instance<T>& in, const std::vector<std::string>& cols, bool per_head, int threads) {
    const Variant& var = cfg.variants[grid.at(cell).variant];
    // elu and dpfp never read W: a (1, d) placeholder, whatever the m label of their cell.
    const std::size_t m = var.map->uses_m() ? grid.m(cell, in.d) : 1;
    const Estimator<T> base = make_estimator<T>(var, m, in.d, cfg.seed, trial, dtype_rounding(cfg.dtype));
    std::vector<Values> per;   // one per head
    for (std::size_t i = 0; i < in.heads.size(); ++i) {
        const Head<T>& h = in.heads[i];
        per.push_back(measure(base.for_inputs(h.q, h.k, i % in.model_heads), h, cols, cfg.causal, threads));
        if (cfg.has_row_sem() && !h.sampled()) all_rows_sems(cols, per.back());
    }
    return item_rows(per, cols, per_head);
}

template <class T>
RunResult run_approximation(const Config& cfg, const RunOptions& opt, nlohmann::json info) {
    const int threads = resolve_threads(opt.threads);
    const ApproxCells grid(cfg);
    const std::vector<std::size_t> cells = grid.owned(opt.shard);
    info["shard"]["cells"] = cells.size();
    const Items it{cfg.input_seeds.size(), cfg.trials};
    const std::size_t total = cells.size() * it.seeds * it.trials;
    std::vector<std::size_t> source, unique;   // items computed once, and where the others copy from
    dedupe_items(cfg, grid, it, cells, source, unique);
    std::size_t resumed = 0;
    for (std::size_t item : unique)
        resumed += opt.journal && opt.journal->find(cells[it.pos(item)], it.trial(item), cfg.input_seeds[it.seed(item)]);
    if (opt.progress) opt.progress(resumed, unique.size());   // before the exact references, which take a while
    const std::vector<Instance<T>> instances = load_instances<T>(cfg, grid, cells, info, threads, opt.stop);
    const std::vector<std::string> cols = metric_columns(cfg.approximation.metrics, cfg.has_row_sem());
    const bool per_head = cfg.inputs.npy() && cfg.inputs.per_head;
    std::vector<JournalRows> items(total);   // [item][row][metric]
    std::vector<char> finished(total, 0);
    const std::size_t heads = per_head ? info["inputs"]["heads"].get<std::size_t>() : 1;
    resume_items(opt.journal, cfg, it, cells, unique, heads, cols, items, finished);
    std::atomic<std::size_t> done{resumed};
    // With fewer items than threads, the row blocks of the pairwise metrics share the spare
    // threads (their sums do not depend on how blocks are spread).
    const int inner_threads = unique.size() - resumed < std::size_t(threads) ? threads : 1;
    // Each item runs on one thread: its numbers never depend on the thread count. W depends
    // on (seed, projection, m, d, trial) only, so every input seed of a trial shares it.
    parallel_for(unique.size(), threads, [&](std::size_t u) {
        const std::size_t item = unique[u];
        if (finished[item] || (opt.stop && opt.stop->load())) return;
        const std::size_t cell = cells[it.pos(item)];
        const Instance<T>& in = instances[it.instance(grid, cell, item)];
        items[item] = measure_item(cfg, grid, cell, it.trial(item), in, cols, per_head, inner_threads);
        if (opt.journal) opt.journal->record(cell, it.trial(item), items[item], in.input_seed);
        finished[item] = 1;
        const std::size_t now = done.fetch_add(1) + 1;
        if (opt.progress) opt.progress(now, unique.size());
    });
    // Copies of the items computed once (maps without a projection, or without m).
    for (std::size_t item = 0; item < total; ++item)
        if (source[item] != item) items[item] = items[source[item]];
    RunResult r;
    r.items_done = done.load(), r.items_total = unique.size(), r.items_resumed = resumed;
    if (resumed) info["resumed_items"] = resumed;
    r.info = std::move(info);
    if (r.items_done < unique.size()) {
        r.complete = false;
        return r;
    }
    trial_gradient_cells(cfg, grid, it, cells, instances, cols, threads, items);
    make_tables(cfg, grid, it, cells, instances, items, cols, threads, r);
    return r;
}

}  // namespace

RunResult run_approximation_experiment(const Config& cfg, const RunOptions& opt, nlohmann::json info) {
    return with_dtype(cfg.dtype, [&](auto t) { return run_approximation<decltype(t)>(cfg, opt, std::move(info)); });
}

}  // namespace favor
