// The metric table (docs/design.md section 3) and what its consumers ask of it: which
// columns a run has, how each is computed, combined over heads, written and checked.
#include "favor/metrics/metric_table.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/io/report.hpp"
#include "favor/metrics/output_metrics.hpp"

namespace favor {

namespace {
using S = MetricInfo::Source;

// An entry as the table writes it: the name, source and summary, then what differs from
// MetricInfo's defaults, each by name.
struct Entry {
    MetricInfo m;
    Entry(const char* name, S source, const char* description) {
        m.name = name, m.source = source, m.description = description;
    }
    // A function of (Out, Out_hat), generic over Out_hat's dtype (a captureless generic lambda).
    template <class Fn>
    Entry& output(Fn fn) { return m.output = {fn, fn}, *this; }
    // A function of (Out, Out_hat, G), generic the same way.
    template <class Fn>
    Entry& upstream(Fn fn) { return m.upstream = {fn, fn}, *this; }
    Entry& forward(double (*fn)(const ForwardCounts&)) { return m.forward = fn, *this; }
    Entry& gradient(double (*fn)(const Gradients<double>&, const Gradients<double>&)) { return m.gradient = fn, *this; }
    Entry& over_trials(double (*fn)(const Gradients<double>&, const TrialGradients&)) { return m.over_trials = fn, *this; }
    Entry& pass(bool PairwiseRequest::*asks, double PairwiseResult::*result) {
        return m.asks = asks, m.result = result, *this;
    }
    Entry& unit(const char* u) { return m.unit = u, *this; }
    Entry& summed() { return m.heads = MetricInfo::Reduce::sum, *this; }
    Entry& one_value() { return m.summary = MetricInfo::Summary::value, *this; }
    Entry& counted() { return m.format = MetricInfo::Format::count, m.check = MetricInfo::Check::count, *this; }
    Entry& nonnegative() { return m.check = MetricInfo::Check::nonnegative, *this; }
    Entry& blank_if_nan() { return m.blank_if_nan = true, *this; }
    Entry& kernels_only() { return m.kernels_only = true, *this; }
    Entry& by_default() { return m.by_default = true, *this; }
    Entry& always() { return m.always = true, *this; }
    Entry& with_half() { return m.with_half = true, *this; }
    Entry& implied_by(const char* other) { return m.implied_by = other, *this; }
    Entry& baseline() { return m.has_baseline = true, *this; }
    Entry& not_compared() { return m.compared = false, *this; }
    Entry& higher_is_better() { return m.higher_is_better = true, *this; }
    Entry& perfect(double v) { return m.perfect = v, *this; }
};

using Rq = PairwiseRequest;
using Grads = Gradients<double>;
using Rs = PairwiseResult;

std::vector<MetricInfo> make_table() {
    const auto mse = [](const Mat<double>& e, const auto& a) { return output_mse(e, a); };
    const auto rel = [](const Mat<double>& e, const auto& a) { return output_rel_error(e, a); };
    const auto bad = [](const Mat<double>&, const auto& a) { return double(count_nonfinite(a)); };
    const auto dloss = [](const Mat<double>& e, const auto& a, const Mat<double>& G) { return loss_delta(e, a, G); };
    const auto dloss_abs = [](const Mat<double>& e, const auto& a, const Mat<double>& G) {
        return std::fabs(loss_delta(e, a, G));
    };
    const auto read_rel = [](const Mat<double>& e, const auto& a, const Mat<double>& G) {
        return read_rows_rel_error(e, a, G);
    };
    const auto overflow = [](const ForwardCounts& c) { return c.entries ? double(c.overflow) / double(c.entries) : 0.0; };
    const Entry rows[] = {
        Entry("output_mse", S::output, "mean over i, c of (Out - Out_hat)^2 (Performer Fig. 4)")
            .output(mse).by_default().baseline().perfect(0),
        Entry("output_rel_error", S::output, "||Out - Out_hat||_F / ||Out||_F").output(rel).baseline().perfect(0),
        // The loss-aware errors (issue 55 item 5), from G = dLoss/dOut (inputs.grad: a capture's g.npy).
        Entry("loss_delta", S::upstream,
              "sum over i, c of G_ic (Out_hat - Out)_ic: the first-order change of the model's loss, G = dLoss/dOut "
              "(inputs.grad; summed over heads)")
            .upstream(dloss).summed().baseline().not_compared().perfect(0),
        Entry("loss_delta_abs", S::upstream, "|loss_delta| per head (summed over heads): its magnitude, compared")
            .upstream(dloss_abs).summed().nonnegative().baseline().perfect(0),
        Entry("output_rel_error_read", S::upstream,
              "output_rel_error over the rows G reads (G_i != 0: the positions the loss looks at); blank if none")
            .upstream(read_rel).blank_if_nan().baseline().perfect(0),
        Entry("attention_mse", S::pairwise, "mean over i, j of (A - A_hat)^2")
            .pass(&Rq::attention_mse, &Rs::attention_mse).by_default().baseline().perfect(0),
        Entry("attention_tv", S::pairwise, "mean over rows of the total variation (1/2) sum_j |A_ij - A_hat_ij|")
            .pass(&Rq::attention_tv, &Rs::attention_tv).baseline().perfect(0),
        Entry("attention_kl", S::pairwise, "mean over rows of KL(A_i || A_hat_i); blank where some A_hat_ij <= 0")
            .unit("nats").pass(&Rq::attention_kl, &Rs::attention_kl).blank_if_nan().baseline().perfect(0),
        Entry("kernel_mse", S::pairwise, "mean over i, j of (SM(x_i, y_j) - phi(x_i).phi(y_j))^2")
            .pass(&Rq::kernel_mse, &Rs::kernel_mse).kernels_only().by_default().perfect(0),
        Entry("kernel_mse_theory", S::theory, "mean over i, j of the map's closed-form MSE with iid W")
            .pass(nullptr, &Rs::kernel_mse_theory).one_value().implied_by("kernel_mse").not_compared(),
        Entry("negative_fraction", S::pairwise, "share of A_hat entries < 0 (or NaN)")
            .pass(&Rq::negative_fraction, &Rs::negative_fraction).by_default().perfect(0),
        Entry("nonfinite", S::output, "NaN or Inf entries of Out_hat (summed over heads)")
            .unit("count").output(bad).summed().counted().always().not_compared().perfect(0),
        Entry("overflow_fraction", S::forward,
              "share of the entries of phi(Q), phi(K) and the stored phi(K)^T [V, 1] (non-causal) that are +-Inf "
              "(after rounding with float16/bfloat16, where it is always present)")
            .forward(overflow).with_half().not_compared().perfect(0),
        Entry("grad_q_rel_error", S::gradient,
              "||dQ - dQ_hat||_F / ||dQ||_F for the upstream gradient G (uniform attention: 1, its dQ is 0)")
            .gradient([](const Grads& e, const Grads& a) { return output_rel_error(e.dQ, a.dQ); }).baseline().perfect(0),
        Entry("grad_k_rel_error", S::gradient,
              "||dK - dK_hat||_F / ||dK||_F for the upstream gradient G (uniform attention: 1, its dK is 0)")
            .gradient([](const Grads& e, const Grads& a) { return output_rel_error(e.dK, a.dK); }).baseline().perfect(0),
        Entry("grad_v_rel_error", S::gradient, "||dV - dV_hat||_F / ||dV||_F for the upstream gradient G")
            .gradient([](const Grads& e, const Grads& a) { return output_rel_error(e.dV, a.dV); }).baseline().perfect(0),
        Entry("grad_cosine", S::gradient, "cosine of the flattened (dQ_hat, dK_hat, dV_hat) with the exact (dQ, dK, dV)")
            .gradient(grad_cosine).baseline().higher_is_better().perfect(1),
        Entry("grad_bias_rel", S::trials,
              "|mean over the cell's trials of g_hat - g| / |g|, g = (dQ, dK, dV): the estimator's bias (one value per cell)")
            .over_trials(grad_bias_rel).one_value().not_compared().perfect(0),
        Entry("grad_bias_floor", S::trials,
              "sqrt(sum of the trials' variances / trials) / |g|: grad_bias_rel's Monte Carlo floor (blank for 1 trial)")
            .over_trials(grad_bias_floor).one_value().implied_by("grad_bias_rel").not_compared().perfect(0),
        Entry("seconds", S::clock, "wall time of the estimator (not deterministic; summed over heads)")
            .unit("s").summed().nonnegative().not_compared(),
        // The model's loss with the attention of some layers swapped (design.md section 9, swap_in).
        Entry("bits_per_byte", S::model,
              "the model's next-token cross-entropy / ln 2 over the windows, attention of `layers` swapped (favor.swap_in)")
            .unit("bits").nonnegative().baseline(),
        Entry("delta_bits_per_byte", S::model,
              "bits_per_byte minus the model's own (exact attention) on the same windows (favor.swap_in)")
            .unit("bits").baseline().perfect(0),
        Entry("recall", S::model,
              "an associative-recall model's share of query positions predicted right, attention of `layers` "
              "swapped (favor.swap_in, metric \"recall\")")
            .nonnegative().baseline().higher_is_better(),
        Entry("delta_recall", S::model, "recall minus the model's own (exact attention) on the same examples")
            .baseline().higher_is_better().perfect(0),
        Entry("task_loss", S::model, "the mean of a user's per-window loss (favor.swap_in, metric (name, fn, \"lower\"))")
            .baseline(),
        Entry("delta_task_loss", S::model, "task_loss minus the model's own (exact attention) on the same windows")
            .baseline().perfect(0),
        Entry("task_score", S::model,
              "the mean of a user's per-window score (favor.swap_in, metric (name, fn, \"higher\"))")
            .baseline().higher_is_better(),
        Entry("delta_task_score", S::model, "task_score minus the model's own (exact attention) on the same windows")
            .baseline().higher_is_better().perfect(0),
    };
    std::vector<MetricInfo> t;
    for (const Entry& e : rows) t.push_back(e.m);
    return t;
}

bool has(const std::vector<std::string>& columns, const std::string& c) {
    return std::find(columns.begin(), columns.end(), c) != columns.end();
}

// Those of `columns` whose entry passes `keep`, in their order.
template <class Keep>
std::vector<std::string> columns_where(const std::vector<std::string>& columns, Keep keep) {
    std::vector<std::string> out;
    for (const auto& c : columns) {
        const MetricInfo* m = find_metric(c);
        if (m && keep(*m)) out.push_back(c);
    }
    return out;
}

// Calls fn(entry) for each of `columns` that comes from `source`.
template <class Fn>
void each_from(const std::vector<std::string>& columns, S source, Fn&& fn) {
    for (const auto& c : columns)
        if (const MetricInfo* m = find_metric(c); m && m->source == source) fn(*m);
}
}  // namespace

const std::vector<MetricInfo>& metric_table() {
    static const std::vector<MetricInfo> t = make_table();
    return t;
}

const MetricInfo* find_metric(const std::string& name) {
    for (const auto& m : metric_table())
        if (name == m.name) return &m;
    return nullptr;
}

std::vector<std::string> metric_names() {
    std::vector<std::string> n;
    for (const auto& m : metric_table()) n.push_back(m.name);
    return n;
}

std::vector<std::string> run_metric_names() {
    return columns_where(metric_names(), [](const MetricInfo& m) { return m.source != S::model; });
}

std::vector<std::string> default_metrics() {
    return columns_where(metric_names(), [](const MetricInfo& m) { return m.by_default; });
}

std::vector<std::string> metric_columns(const std::vector<std::string>& requested) {
    std::vector<std::string> cols;
    for (const auto& m : metric_table())
        if (m.always || has(requested, m.name) || (*m.implied_by && has(requested, m.implied_by)))
            cols.push_back(m.name);
    return cols;
}

std::vector<std::string> metric_columns(const std::vector<std::string>& requested, bool row_sem) {
    std::vector<std::string> cols = metric_columns(requested);
    if (row_sem)
        for (const auto& c : sampled_columns(metric_columns(requested))) cols.push_back(row_sem_column(c));
    return cols;
}

std::vector<std::string> stat_columns(const std::vector<std::string>& columns) {
    return columns_where(columns, [](const MetricInfo& m) { return m.summary == MetricInfo::Summary::stats; });
}
std::vector<std::string> value_columns(const std::vector<std::string>& columns) {
    std::vector<std::string> out =
        columns_where(columns, [](const MetricInfo& m) { return m.summary == MetricInfo::Summary::value; });
    for (const auto& c : columns)
        if (is_row_sem_column(c)) out.push_back(c);
    return out;
}

std::vector<std::string> sampled_columns(const std::vector<std::string>& columns) {
    return columns_where(columns, [](const MetricInfo& m) {
        return (m.source == S::output || m.source == S::pairwise) && m.format == MetricInfo::Format::number;
    });
}
std::string row_sem_column(const std::string& metric) { return metric + "_row_sem"; }
bool is_row_sem_column(const std::string& column) {
    const std::string suffix = row_sem_column("");
    if (column.size() <= suffix.size() || column.compare(column.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
    return !sampled_columns({column.substr(0, column.size() - suffix.size())}).empty();
}
std::vector<std::string> baseline_columns(const std::vector<std::string>& columns) {
    return columns_where(columns, [](const MetricInfo& m) { return m.has_baseline; });
}

bool any_pairwise(const std::vector<std::string>& columns) {
    return !columns_where(columns, [](const MetricInfo& m) { return m.source == S::pairwise || m.source == S::theory; })
                .empty();
}

bool any_gradient(const std::vector<std::string>& columns) {
    return !columns_where(columns, [](const MetricInfo& m) { return m.source == S::gradient || m.source == S::trials; })
                .empty();
}
bool any_upstream(const std::vector<std::string>& columns) {
    return !columns_where(columns, [](const MetricInfo& m) {
                return m.source == S::gradient || m.source == S::trials || m.source == S::upstream;
            }).empty();
}
bool any_loss_aware(const std::vector<std::string>& columns) {
    return !columns_where(columns, [](const MetricInfo& m) { return m.source == S::upstream; }).empty();
}
bool any_trial_gradient(const std::vector<std::string>& columns) {
    return !columns_where(columns, [](const MetricInfo& m) { return m.source == S::trials; }).empty();
}
bool any_clock(const std::vector<std::string>& columns) {
    return !columns_where(columns, [](const MetricInfo& m) { return m.source == S::clock; }).empty();
}

bool output_fused(const std::vector<std::string>& columns, const FeatureMap& map, Rounding rounding, bool shift,
                  bool causal) {
    return columns_where(columns, [](const MetricInfo& m) { return m.source == S::forward; }).empty() &&
           forward_fused(map, rounding, shift, causal);
}

PairwiseRequest pairwise_request(const std::vector<std::string>& columns, bool causal, const FeatureMapPtr& map,
                                 std::size_t m, const Mat<double>& X, const Mat<double>& Y) {
    PairwiseRequest req;
    req.causal = causal;
    req.row_normalised = !map || map->row_normalised();
    each_from(columns, S::pairwise, [&](const MetricInfo& e) {
        if (!e.kernels_only || !map || map->is_kernel()) req.*e.asks = true;
    });
    each_from(columns, S::theory, [&](const MetricInfo&) {
        if (map) req.theory = kernel_theory(map, X, Y, m);
    });
    return req;
}

template <class T>
void output_values(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                   MetricValues& v) {
    each_from(columns, S::output, [&](const MetricInfo& e) {
        if constexpr (std::is_same_v<T, float>) v[e.name] = e.output.f32(exact, out);
        else v[e.name] = e.output.f64(exact, out);
    });
}
template void output_values<float>(const std::vector<std::string>&, const Mat<double>&, const Mat<float>&,
                                   MetricValues&);
template void output_values<double>(const std::vector<std::string>&, const Mat<double>&, const Mat<double>&,
                                    MetricValues&);

template <class T>
void upstream_values(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                     const Mat<double>& G, MetricValues& v) {
    each_from(columns, S::upstream, [&](const MetricInfo& e) {
        double x;
        if constexpr (std::is_same_v<T, float>) x = e.upstream.f32(exact, out, G);
        else x = e.upstream.f64(exact, out, G);
        if (!(e.blank_if_nan && std::isnan(x))) v[e.name] = x;
    });
}
template void upstream_values<float>(const std::vector<std::string>&, const Mat<double>&, const Mat<float>&,
                                     const Mat<double>&, MetricValues&);
template void upstream_values<double>(const std::vector<std::string>&, const Mat<double>&, const Mat<double>&,
                                      const Mat<double>&, MetricValues&);

void forward_values(const std::vector<std::string>& columns, const ForwardCounts& counts, MetricValues& v) {
    each_from(columns, S::forward, [&](const MetricInfo& e) { v[e.name] = e.forward(counts); });
}

void clock_values(const std::vector<std::string>& columns, double seconds, MetricValues& v) {
    each_from(columns, S::clock, [&](const MetricInfo& e) { v[e.name] = seconds; });
}

void gradient_values(const std::vector<std::string>& columns, const Gradients<double>& exact,
                     const Gradients<double>& approx, MetricValues& v) {
    each_from(columns, S::gradient, [&](const MetricInfo& e) { v[e.name] = e.gradient(exact, approx); });
}

void trial_gradient_values(const std::vector<std::string>& columns, const Gradients<double>& exact,
                           const TrialGradients& t, MetricValues& v) {
    each_from(columns, S::trials, [&](const MetricInfo& e) {
        const double x = e.over_trials(exact, t);
        if (!std::isnan(x)) v[e.name] = x;
    });
}

void pairwise_values(const std::vector<std::string>& columns, const PairwiseRequest& req, const PairwiseResult& res,
                     MetricValues& v) {
    auto record = [&](const MetricInfo& e, bool asked) {
        const double x = res.*e.result;
        if (asked && !(e.blank_if_nan && std::isnan(x))) v[e.name] = x;
    };
    each_from(columns, S::pairwise, [&](const MetricInfo& e) { record(e, req.*e.asks); });
    each_from(columns, S::theory, [&](const MetricInfo& e) { record(e, bool(req.theory)); });
}

MetricValues combine_heads(const std::vector<MetricValues>& heads, const std::vector<std::string>& columns) {
    MetricValues out;
    for (const std::string& col : columns) {
        double total = 0;
        bool all = !heads.empty();
        for (const auto& v : heads) {
            const auto it = v.find(col);
            if (it != v.end() && it->second) total += *it->second;
            else all = false;
        }
        // (<name>_row_sem: the mean over heads, an upper bound of the standard error of the
        // heads' mean, whose rows are the same positions.)
        const MetricInfo* m = find_metric(col);
        if (all) out[col] = m && m->heads == MetricInfo::Reduce::sum ? total : total / double(heads.size());
    }
    return out;
}

std::string metric_cell(const MetricValues& v, const std::string& column) {
    const auto it = v.find(column);
    if (it == v.end() || !it->second) return "";
    const MetricInfo* m = find_metric(column);   // null: a <name>_row_sem column, a number
    return m && m->format == MetricInfo::Format::count ? format_count(std::size_t(*it->second))
                                                       : format_number(it->second);
}

std::string metric_cell_problem(const std::string& column, const std::string& cell) {
    if (cell.empty()) return "";
    const MetricInfo* m = find_metric(column);
    const MetricInfo::Check check = column == "trials" ? MetricInfo::Check::nonnegative
                                    : m                ? m->check
                                                       : MetricInfo::Check::number;
    double v = 0;
    std::size_t n = 0;
    if (check == MetricInfo::Check::count) return parse_count(cell, n) ? "" : "is not a count";
    if (check == MetricInfo::Check::nonnegative)
        return parse_real(cell, v, false) && v >= 0 ? "" : "is not a finite number >= 0";
    return parse_real(cell, v, true) ? "" : "is not a number";
}

}  // namespace favor
