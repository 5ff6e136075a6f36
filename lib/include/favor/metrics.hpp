#pragma once
// The error metrics of design.md section 3. Pairwise ones stream over row blocks: memory
// O(block x L), never an L x L matrix.
#include <cstddef>
#include <functional>
#include <limits>

#include "favor/feature_maps.hpp"
#include "favor/tensor.hpp"

namespace favor {

// output_mse: mean over i, c of (Out - Out_hat)^2. exact: (L, dv) float64.
template <class T>
double output_mse(const Mat<double>& exact, const Mat<T>& approx);

// nonfinite: number of NaN / Inf entries.
template <class T>
std::size_t count_nonfinite(const Mat<T>& a);

// The Lemma 2 MSE of one pair for this map with m random vectors (iid value), or an empty
// function where no closed form exists (relu).
std::function<double(double x2, double y2, double xy)> kernel_theory(const FeatureMap& f,
                                                                      std::size_t m, std::size_t d);

struct PairwiseRequest {
    bool attention_mse = false;      // mean (A - A_hat)^2
    bool kernel_mse = false;         // mean (SM - phi(x).phi(y))^2, with the shifts undone
    bool negative_fraction = false;  // share of A_hat entries < 0
    std::function<double(double, double, double)> theory;  // kernel_mse_theory, if set
    bool causal = false;             // only pairs j <= i
    bool any() const { return attention_mse || kernel_mse || negative_fraction || bool(theory); }
};

struct PairwiseResult {
    static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    double attention_mse = nan, kernel_mse = nan, kernel_mse_theory = nan, negative_fraction = nan;
};

// X: (L, d), Y: (Lk, d) scaled inputs; fq, fk: their features (float64).
// Sums are formed per row block and added in block order: the same for any thread count.
PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y,
                                const Features<double>& fq, const Features<double>& fk,
                                const PairwiseRequest& req, int threads = 1);

}  // namespace favor
