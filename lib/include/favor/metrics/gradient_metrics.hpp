#pragma once
// The gradient metrics (docs/design.md section 3): an estimator's gradients (dQ, dK, dV) for
// an upstream gradient G against those of exact softmax attention (float64), per trial, and
// over a cell's trials the error of their mean (the estimator's bias) beside the Monte Carlo
// floor of that mean. The metric table (metric_table.hpp) points at these.
#include <cstddef>

#include "favor/attention/backward_exact.hpp"
#include "favor/core/tensor.hpp"

namespace favor {

// grad_cosine: <g, g_hat> / (|g| |g_hat|), g the flattened (dQ, dK, dV); 0 when g_hat = 0.
double grad_cosine(const Gradients<double>& exact, const Gradients<double>& approx);

// The trials of one cell, added in trial order (Welford, entry by entry): their mean and
// spread = sum over trials t and entries of (g_t - mean)^2.
class TrialGradients {
public:
    void add(const Gradients<double>& g);
    std::size_t trials() const { return n_; }
    const Gradients<double>& mean() const { return mean_; }
    double spread() const { return spread_; }

private:
    Gradients<double> mean_;
    double spread_ = 0;
    std::size_t n_ = 0;
};

// grad_bias_rel: |mean_t g_t - g| / |g| over the flattened (dQ, dK, dV).
double grad_bias_rel(const Gradients<double>& exact, const TrialGradients& t);
// grad_bias_floor: sqrt(spread / (T (T - 1))) / |g|, the standard error of that mean: what
// grad_bias_rel would be for an unbiased estimator (to within its own sampling error); NaN
// for T = 1.
double grad_bias_floor(const Gradients<double>& exact, const TrialGradients& t);

}  // namespace favor
