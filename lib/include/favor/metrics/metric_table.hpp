#pragma once
// The metric table (docs/design.md section 3): every metric of the approximation experiment's
// tables as one entry: its name and summary, its computation (an output metric's function) or
// the pass that makes it (the streamed pairwise pass, the unfused forward, the clock), how it
// combines over heads, when it is present, how its cells are written and checked, and its
// value for exact attention. Config validation, the runner, the summary, merge, compare's
// `--metric all` and `favor list` iterate this table; none of them names a metric.
//
// Adding a metric: an entry in metric_table.cpp and its computation (a function of
// output_metrics.hpp/.cpp, or a request flag, result field and sum of the pairwise pass).
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "favor/attention/pairwise_pass.hpp"
#include "favor/core/half.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/metrics/gradient_metrics.hpp"

namespace favor {

// One head's (or all heads') value of each metric column; nullopt: blank (does not apply).
using MetricValues = std::map<std::string, std::optional<double>>;

// What the unfused forward (favor_attention) counts besides its output.
struct ForwardCounts {
    std::size_t overflow = 0, entries = 0;   // +-Inf entries of phi(Q), phi(K), phi(K)^T [V, 1]; all
};

struct MetricInfo {
    // Where the value comes from. output: a function of Out_hat and Out; forward: of the
    // unfused forward's counts (so the runner does not fuse); pairwise: the streamed pass over
    // all (i, j); theory: a closed form summed in the same pass; clock: the estimator's time;
    // gradient: a function of the exact and the estimator's (dQ, dK, dV) for the upstream
    // gradient G; trials: of the exact gradients and the mean and spread of a cell's trials';
    // model: measured on a model with the attention swapped in (favor.swap_in,
    // scripts/swap_in.py), never by a run (a config asking for one is refused), read by compare;
    // upstream: a function of Out, Out_hat and the upstream gradient G (the loss-aware errors).
    enum class Source { output, forward, pairwise, theory, clock, gradient, trials, model, upstream };
    enum class Reduce { mean, sum };          // over batch x heads
    enum class Summary { stats, value };      // stats: _mean/_std/_sem...; value: one number per cell
    enum class Format { number, count };      // cells written by format_number / format_count
    enum class Check { number, nonnegative, count };   // what merge and --resume accept in a cell
    // Out (L, dv) float64 against Out_hat (L, dv) of each compute dtype.
    struct OutputFn {
        double (*f32)(const Mat<double>& exact, const Mat<float>& out) = nullptr;
        double (*f64)(const Mat<double>& exact, const Mat<double>& out) = nullptr;
    };
    // Out, Out_hat and G (L, dv) float64.
    struct UpstreamFn {
        double (*f32)(const Mat<double>& exact, const Mat<float>& out, const Mat<double>& G) = nullptr;
        double (*f64)(const Mat<double>& exact, const Mat<double>& out, const Mat<double>& G) = nullptr;
    };

    const char* name = "";
    const char* unit = "";
    const char* description = "";             // one line: `favor list`
    Source source = Source::output;
    OutputFn output;                           // source output
    UpstreamFn upstream;                       // source upstream
    double (*forward)(const ForwardCounts&) = nullptr;   // source forward
    double (*gradient)(const Gradients<double>& exact, const Gradients<double>& approx) = nullptr;   // source gradient
    double (*over_trials)(const Gradients<double>& exact, const TrialGradients& t) = nullptr;        // source trials
    bool PairwiseRequest::*asks = nullptr;     // source pairwise: the request's flag ...
    double PairwiseResult::*result = nullptr;  // ... and (also theory) the pass's result
    bool blank_if_nan = false;                 // pairwise, upstream: a NaN result is a blank cell
    bool kernels_only = false;                 // pairwise: only for maps that are kernels (is_kernel)
    Reduce heads = Reduce::mean;
    Summary summary = Summary::stats;
    Format format = Format::number;
    Check check = Check::number;
    bool by_default = false;                   // asked for when the config gives no "metrics"
    bool always = false;                       // in every approximation table, asked for or not
    bool with_half = false;                    // asked for whenever the dtype is float16 / bfloat16
    const char* implied_by = "";               // also present whenever this metric is asked for
    bool has_baseline = false;                 // summary.csv also gives baseline_<name>: its value for
                                               // uniform attention (Out_hat = mean of V) on the inputs
    bool compared = true;                      // among compare's `--metric all`
    bool higher_is_better = false;             // its direction: compare's verdicts and rankings
    std::optional<double> perfect;             // its value for exact attention against itself
};
const std::vector<MetricInfo>& metric_table();
const MetricInfo* find_metric(const std::string& name);   // nullptr if unknown
std::vector<std::string> metric_names();
// Those a run computes (every source but model): what a config's "metrics" may name.
std::vector<std::string> run_metric_names();
std::vector<std::string> default_metrics();               // by_default, in table order
// The metric columns of a table for these requested metrics, in table order.
std::vector<std::string> metric_columns(const std::vector<std::string>& requested);
// The same, then with `row_sem` (Config::has_row_sem) the <name>_row_sem of each sampled column:
// the metric columns of an approximation run's errors.csv.
std::vector<std::string> metric_columns(const std::vector<std::string>& requested, bool row_sem);
// Those of `columns` summarised as statistics / as one value per cell (the mean over the
// cell's rows; also the <name>_row_sem columns).
std::vector<std::string> stat_columns(const std::vector<std::string>& columns);
std::vector<std::string> value_columns(const std::vector<std::string>& columns);
// Those of `columns` with a baseline_<name> column.
std::vector<std::string> baseline_columns(const std::vector<std::string>& columns);
// Row-sampled metrics (docs/design.md 3.1): those of `columns` a row sample estimates (output
// and pairwise numbers; not counts, the clock, the forward's counts or closed forms), and
// the column of each one's sampling standard error, <name>_row_sem.
std::vector<std::string> sampled_columns(const std::vector<std::string>& columns);
std::string row_sem_column(const std::string& metric);
// Whether `column` is some metric's <name>_row_sem.
bool is_row_sem_column(const std::string& column);
// Whether some column comes from the streamed pass (pairwise or theory).
bool any_pairwise(const std::vector<std::string>& columns);
// Whether some column needs the gradients (source gradient or trials) / a cell's trials' (trials).
bool any_gradient(const std::vector<std::string>& columns);
// Whether some column reads the upstream gradient G (source gradient, trials or upstream) / is
// a loss-aware error (source upstream: G kept beside Out).
bool any_upstream(const std::vector<std::string>& columns);
bool any_loss_aware(const std::vector<std::string>& columns);
bool any_trial_gradient(const std::vector<std::string>& columns);
// Whether some column is a wall time (source clock: `seconds`).
bool any_clock(const std::vector<std::string>& columns);
// Whether the approximation runner makes an estimator's output with the fused forward
// (forward_fused: no (L, F) feature matrices) for these metric columns: not when some column
// comes from the unfused forward's counts. The memory estimate (cost_model.cpp) asks the same.
bool output_fused(const std::vector<std::string>& columns, const FeatureMap& map, Rounding rounding, bool shift,
                  bool causal);

// The pass's request for these metric columns; the theory comes from `map` (resolved) with
// m random vectors for the scaled rows X (L, d), Y (Lk, d), where it has one; row_normalised
// as the map is (null map: uniform attention, row-normalised, kernel_mse skipped: no kernel).
PairwiseRequest pairwise_request(const std::vector<std::string>& columns, bool causal, const FeatureMapPtr& map,
                                 std::size_t m, const Mat<double>& X, const Mat<double>& Y);

// The values of the columns of each source into v. exact: Out (L, dv), out: Out_hat (L, dv).
template <class T>
void output_values(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                   MetricValues& v);
// G: the upstream gradient (L, dv) float64 (the source upstream columns).
template <class T>
void upstream_values(const std::vector<std::string>& columns, const Mat<double>& exact, const Mat<T>& out,
                     const Mat<double>& G, MetricValues& v);
void forward_values(const std::vector<std::string>& columns, const ForwardCounts& counts, MetricValues& v);
void clock_values(const std::vector<std::string>& columns, double seconds, MetricValues& v);
// exact: float64 gradients of exact attention; approx: the estimator's, widened to float64.
void gradient_values(const std::vector<std::string>& columns, const Gradients<double>& exact,
                     const Gradients<double>& approx, MetricValues& v);
// Over a cell's trials (a NaN, the floor of one trial, is a blank cell).
void trial_gradient_values(const std::vector<std::string>& columns, const Gradients<double>& exact,
                           const TrialGradients& t, MetricValues& v);
// Those the request asked for (a NaN result blank where the entry says so).
void pairwise_values(const std::vector<std::string>& columns, const PairwiseRequest& req, const PairwiseResult& res,
                     MetricValues& v);

// One value per column for all heads: each entry's reduction (mean or sum); blank if any
// head's value is blank (attention_kl: a blank is an infinite divergence, so the mean is too).
MetricValues combine_heads(const std::vector<MetricValues>& heads, const std::vector<std::string>& columns);
// The cell of column `column` as the entry formats it ("" when blank or absent).
std::string metric_cell(const MetricValues& v, const std::string& column);
// Why a cell of column `column` is not one favor writes, "" when it is: empty (the metric does
// not apply), a count, a finite number >= 0 (also `trials`), or any number (nan / inf where
// the runner can produce them), as the entry checks (unknown columns: any number).
std::string metric_cell_problem(const std::string& column, const std::string& cell);

}  // namespace favor
