#pragma once
// The error metrics of docs/design.md section 3. Pairwise ones stream over query blocks and key
// tiles, making features as they need them: never an (L, F) nor an L x L matrix.
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "favor/estimator.hpp"
#include "favor/feature_maps.hpp"
#include "favor/tensor.hpp"

namespace favor {

// --- the metric table ---------------------------------------------------------------------
// Every metric of the approximation experiment's tables (docs/design.md section 3): what it
// is, where it comes from, how it combines over heads and how it is summarised. Config
// validation, the runner, the summary, merge and `favor list` read this table.
struct MetricInfo {
    enum class Source { output, pairwise, theory, clock };
    enum class Summary { stats, value };   // stats: _mean/_std/_sem...; value: one number per cell
    const char* name;
    const char* unit;
    const char* description;
    Source source;          // output: from Out and the exact output; pairwise: a streamed pass
                            // over all (i, j); theory: a closed form over (i, j); clock: timed
    bool summed_over_heads; // otherwise averaged over batch x heads
    Summary summary;
    bool always;            // in every approximation table, asked for or not
    const char* implied_by; // also present whenever this metric is asked for ("" if none)
    bool has_baseline;      // summary.csv also gives baseline_<name>: its value for uniform
                            // attention (every A_hat row 1/n: Out_hat = mean of V) on the inputs
};
const std::vector<MetricInfo>& metric_table();
const MetricInfo* find_metric(const std::string& name);   // nullptr if unknown
std::vector<std::string> metric_names();
// The metric columns of a table for these requested metrics, in table order.
std::vector<std::string> metric_columns(const std::vector<std::string>& requested);
// Those of `columns` summarised as statistics / as one value per cell.
std::vector<std::string> stat_columns(const std::vector<std::string>& columns);
std::vector<std::string> value_columns(const std::vector<std::string>& columns);
// Whether the approximation runner makes an estimator's output with the fused forward
// (forward_fused: no (L, F) feature matrices) for these metric columns: not when
// overflow_fraction is among them, which only favor_attention counts. The memory estimate
// (cost_model.cpp) asks the same.
bool output_fused(const std::vector<std::string>& columns, const FeatureMap& map, Rounding rounding, bool shift,
                  bool causal);

// output_mse: mean over i, c of (Out - Out_hat)^2. exact: (L, dv) float64.
template <class T>
double output_mse(const Mat<double>& exact, const Mat<T>& approx);

// output_rel_error: ||Out - Out_hat||_F / ||Out||_F.
template <class T>
double output_rel_error(const Mat<double>& exact, const Mat<T>& approx);

// nonfinite: number of NaN / Inf entries.
template <class T>
std::size_t count_nonfinite(const Mat<T>& a);

// The closed-form MSE of pair (i, j) of the scaled rows X, Y for this (resolved) map with m
// iid random vectors (FeatureMap::pair_mse_rows), or an empty function where the map has
// none (relu).
FeatureMap::PairMse kernel_theory(const FeatureMapPtr& f, const Mat<double>& X, const Mat<double>& Y,
                                  std::size_t m);

struct PairwiseRequest {
    bool attention_mse = false;      // mean (A - A_hat)^2
    bool attention_tv = false;       // mean over rows of (1/2) sum_j |A_ij - A_hat_ij|
    bool attention_kl = false;       // mean over rows of KL(A_i || A_hat_i), NaN if some A_hat <= 0
    bool kernel_mse = false;         // mean (SM - phi(x).phi(y))^2, with the shifts undone
    bool negative_fraction = false;  // share of A_hat entries < 0
    FeatureMap::PairMse theory;      // kernel_mse_theory (i, j, x_i.y_j), if set
    bool causal = false;             // only pairs j <= i
    bool row_normalised = true;      // A_hat = K row / D_i; otherwise the K row itself
    bool any() const {
        return attention_mse || attention_tv || attention_kl || kernel_mse || negative_fraction || bool(theory);
    }
    // The request for these metric columns; the theory comes from `map` (resolved) with m
    // random vectors for the scaled rows X, Y, where it has one; kernel_mse only for maps
    // that are kernels (FeatureMap::is_kernel); row_normalised as the map is.
    static PairwiseRequest of(const std::vector<std::string>& columns, bool causal, const FeatureMapPtr& map,
                              std::size_t m, const Mat<double>& X, const Mat<double>& Y);
};

struct PairwiseResult {
    static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    double attention_mse = nan, attention_tv = nan, attention_kl = nan, kernel_mse = nan, kernel_mse_theory = nan,
           negative_fraction = nan;
};

// --- the streamed pairwise pass (docs/design.md section 3) -------------------------------

// The exact side of the pairwise metrics for the scaled rows X (L, d), Y (Lk, d): per query
// row i the largest visible score max_j x_i.y_j and sum_j exp(x_i.y_j - max). O(L); made
// once per attention problem and shared by every estimator run on it.
struct SoftmaxRows {
    std::vector<double> max, sum;
};
SoftmaxRows softmax_rows(const Mat<double>& X, const Mat<double>& Y, bool causal, int threads = 1);

// Where the pass reads features: rows [r0, r0 + n) (r0 a multiple of feature_block_rows())
// as phi (n x F, float64) and their log scales (Features::log_scale). Called from several
// threads at once.
class FeatureRows {
public:
    virtual ~FeatureRows() = default;
    virtual std::size_t columns() const = 0;   // F
    virtual void rows(std::size_t r0, std::size_t n, double* phi, double* log_scale) const = 0;
};

// Read from whole feature matrices (tests; the uniform baseline's constant features).
template <class T>
class MatrixRows final : public FeatureRows {
public:
    explicit MatrixRows(const Features<T>& f) : f_(f) {}
    std::size_t columns() const override { return f_.phi.shape(1); }
    void rows(std::size_t r0, std::size_t n, double* phi, double* log_scale) const override;

private:
    const Features<T>& f_;
};

// Made when needed from a ready estimator (Estimator::for_inputs) and its queries or keys
// X (L, d), unscaled: bitwise the rows of favor_attention's features (feature_rows: the same
// block calls, per-row shifts, the map's common key shift, `shift`, est.rounding), then
// widened to float64.
template <class T>
class EstimatorRows final : public FeatureRows {
public:
    EstimatorRows(const Estimator<T>& est, const Mat<T>& X, Side side, int threads = 1);
    std::size_t columns() const override { return F_; }
    void rows(std::size_t r0, std::size_t n, double* phi, double* log_scale) const override;

private:
    const Estimator<T>& est_;
    const Mat<T>& X_;
    Side side_;
    double xs_, key_shift_ = 0.0;
    std::size_t F_;
    std::vector<T> Wt_;   // W^T, laid out once for every block's product (FeatureBlock::Wt)
};

// The pairwise metrics of `req` over all pairs (i, j), streamed: query rows in blocks of
// feature_block_rows(), keys in tiles of as many rows, each tile's features made when needed
// (memory O(block x (tile + F)) per thread plus O(L + Lk + F) vectors; never (L, F) or L x L).
// X: (L, d), Y: (Lk, d) scaled inputs; exact: softmax_rows(X, Y, req.causal); fq, fk: their
// features. Sums are formed per row block (per-lane sums, in a fixed order) and added in block
// order: the same for any thread count.
PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const SoftmaxRows& exact,
                                const FeatureRows& fq, const FeatureRows& fk, const PairwiseRequest& req,
                                int threads = 1);
// The same from whole features (float64), the exact side computed here.
PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const Features<double>& fq,
                                const Features<double>& fk, const PairwiseRequest& req, int threads = 1);

}  // namespace favor
