#pragma once
// The streamed pairwise pass (docs/design.md section 3): the metrics over all pairs (i, j)
// (attention_mse, attention_tv, attention_kl, negative_fraction, kernel_mse and
// kernel_mse_theory), streamed over query blocks and key tiles, making features as they are
// needed: never an (L, F) nor an L x L matrix. The metric table (metric_table.hpp) names
// which request flag and result field each metric is.
#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include "favor/core/tensor.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

// The closed-form MSE of pair (i, j) of the scaled rows X, Y for this (resolved) map with m
// iid random vectors (FeatureMap::pair_mse_rows), or an empty function where the map has
// none (relu).
FeatureMap::PairMse kernel_theory(const FeatureMapPtr& f, const Mat<double>& X, const Mat<double>& Y,
                                  std::size_t m);

// What the pass computes (metric_table.hpp's pairwise_request makes one from metric columns).
struct PairwiseRequest {
    bool attention_mse = false;      // mean (A - A_hat)^2
    bool attention_tv = false;       // mean over rows of (1/2) sum_j |A_ij - A_hat_ij|
    bool attention_kl = false;       // mean over rows of KL(A_i || A_hat_i), NaN if some A_hat <= 0
    bool kernel_mse = false;         // mean (SM - phi(x).phi(y))^2, with the shifts undone
    bool negative_fraction = false;  // share of A_hat entries < 0
    FeatureMap::PairMse theory;      // kernel_mse_theory (i, j, x_i.y_j), if set
    bool causal = false;             // only pairs j <= i
    // Row-sampled metrics (docs/design.md 3.1): query row i sits at key position positions[i]
    // (ascending; causal: it sees keys j <= positions[i]); null: at i.
    const std::size_t* positions = nullptr;
    bool row_normalised = true;      // A_hat = K row / D_i; otherwise the K row itself
    // Keep the key features the key sweep makes for every query block where they fit
    // (pairwise_keeps_keys); false: make them again per block. The same numbers either way.
    bool keep_key_features = true;
    bool any() const {
        return attention_mse || attention_tv || attention_kl || kernel_mse || negative_fraction || bool(theory);
    }
};

// Its results, NaN where not asked (attention_kl: also where undefined, some A_hat <= 0).
struct PairwiseResult {
    static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    double attention_mse = nan, attention_tv = nan, attention_kl = nan, kernel_mse = nan, kernel_mse_theory = nan,
           negative_fraction = nan;
};

// The sums the results are ratios of: over a row block, or one query row (row-sampled metrics).
struct PairwiseSums {
    double attention = 0, tv = 0, kl = 0, kernel = 0, theory = 0, negative = 0, pairs = 0, rows = 0;
    bool kl_undefined = false;   // some A_hat entry <= 0 (or NaN): KL(A || A_hat) is infinite
    void add(const PairwiseSums& o) {
        attention += o.attention, tv += o.tv, kl += o.kl, kernel += o.kernel, theory += o.theory;
        negative += o.negative, pairs += o.pairs, rows += o.rows;
        kl_undefined = kl_undefined || o.kl_undefined;
    }
};
// The results of `req` from sums over some rows (the whole pass: over all of them).
PairwiseResult pairwise_result(const PairwiseSums& total, const PairwiseRequest& req);

// The exact side of the pairwise metrics for the scaled rows X (L, d), Y (Lk, d): per query
// row i the largest visible score max_j x_i.y_j and sum_j exp(x_i.y_j - max). O(L); made
// once per attention problem and shared by every estimator run on it.
struct SoftmaxRows {
    std::vector<double> max, sum;
};
// positions: as PairwiseRequest::positions (null: row i at i).
SoftmaxRows softmax_rows(const Mat<double>& X, const Mat<double>& Y, bool causal, int threads = 1,
                         const std::size_t* positions = nullptr);

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
// order: the same for any thread count. per_row (row-sampled metrics): also each query row's
// own sums (the result then adds those in row order instead).
PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const SoftmaxRows& exact,
                                const FeatureRows& fq, const FeatureRows& fk, const PairwiseRequest& req,
                                int threads = 1, std::vector<PairwiseSums>* per_row = nullptr);
// The same from whole features (float64), the exact side computed here.
PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const Features<double>& fq,
                                const Features<double>& fk, const PairwiseRequest& req, int threads = 1);

}  // namespace favor
