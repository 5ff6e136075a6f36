#pragma once
// Small shared pieces of the Catch2 tests: result sets as merge reads them, pairs (x, y) and
// the kernel estimate at them, sample statistics, error messages, maps by name.
#include <cmath>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "favor/core/error.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/variant.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/results/merge.hpp"

namespace favor_test {

using favor::Mat;

// A run's result set as `favor merge` reads it from directory `dir`.
inline favor::MergeInput as_input(const favor::RunResult& r, const std::string& dir) {
    favor::MergeInput in;
    in.dir = dir;
    for (const auto& [name, content] : favor::result_files(r)) {
        if (name == "run.json") in.run_json = content;
        if (name == "errors.csv") in.errors = content;
        if (name == "summary.csv") in.summary = content;
        if (name == "baselines.csv") in.baselines = content;
    }
    return in;
}

// A pair (x, y) as 1 x d matrices with its statistics.
struct Pair {
    Mat<double> x, y;
    double x2 = 0, y2 = 0, xy = 0;
    double z2() const { return x2 + y2 + 2 * xy; }
    double sm() const { return std::exp(xy); }
};

inline Pair make_pair(const std::vector<double>& x, const std::vector<double>& y) {
    Pair p{Mat<double>::from_shape({1, x.size()}), Mat<double>::from_shape({1, y.size()})};
    for (std::size_t c = 0; c < x.size(); ++c) {
        p.x(0, c) = x[c];
        p.y(0, c) = y[c];
        p.x2 += x[c] * x[c];
        p.y2 += y[c] * y[c];
        p.xy += x[c] * y[c];
    }
    return p;
}

// The message of the favor::Error that f() throws; "" when it throws none.
template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const favor::Error& e) {
        return e.what();
    }
    return "";
}

// A sample of N estimates of `target`: mean and its standard error, the MSE about target and
// the standard error of that MSE (the sample standard deviation of the squared errors / sqrt N).
struct Sample {
    double mean = 0, se = 0, mse = 0, mse_se = 0;
};

inline Sample describe(const std::vector<double>& est, double target) {
    const double n = double(est.size());
    Sample s;
    for (double e : est) {
        s.mean += e / n;
        s.mse += (e - target) * (e - target) / n;
    }
    double v = 0, vsq = 0;
    for (double e : est) {
        v += (e - s.mean) * (e - s.mean) / (n - 1);
        const double q = (e - target) * (e - target) - s.mse;
        vsq += q * q / (n - 1);
    }
    s.se = std::sqrt(v / n);
    s.mse_se = std::sqrt(vsq / n);
    return s;
}

// Mean and standard error of a sample.
inline std::pair<double, double> mean_se(const std::vector<double>& v) {
    const Sample s = describe(v, 0.0);
    return {s.mean, s.se};
}

// phi_q(x) . phi_k(y) with the map's parameters as they are (no refit to the pair, unlike
// favor::kernel_estimate), the shifts undone. x, y: (1, d); W: (m, d).
inline double estimate_as_is(const favor::FeatureMap& f, const Mat<double>& W, const Mat<double>& x,
                             const Mat<double>& y) {
    const favor::Features<double> fx = favor::compute_features(f, x, 1.0, W, favor::Side::query);
    const favor::Features<double> fy = favor::compute_features(f, y, 1.0, W, favor::Side::key);
    double dot = 0.0;
    for (std::size_t j = 0; j < fx.phi.shape(1); ++j) dot += fx.phi(0, j) * fy.phi(0, j);
    return dot * std::exp(fx.log_scale[0] + fy.log_scale[0]);
}

// N estimates of SM(x, y) by the map f, trial t with W = draw_projection(p, m, d, seed, t):
// kernel_estimate (data-dependent parameters fitted to the pair) with `refit`, else
// estimate_as_is (the parameters as they are).
inline std::vector<double> kernel_estimates(const favor::FeatureMap& f, favor::Projection p, std::size_t m,
                                            const Pair& pr, std::size_t N, std::uint64_t seed, bool refit = true) {
    std::vector<double> est(N);
    for (std::size_t t = 0; t < N; ++t) {
        const Mat<double> W = favor::draw_projection(p, m, pr.x.shape(1), seed, t);
        est[t] = refit ? favor::kernel_estimate(f, W, pr.x, pr.y) : estimate_as_is(f, W, pr.x, pr.y);
    }
    return est;
}

// kernel_estimates described about SM(x, y).
inline Sample sample(const favor::FeatureMap& f, favor::Projection p, std::size_t m, const Pair& pr, std::size_t N,
                     std::uint64_t seed, bool refit = true) {
    return describe(kernel_estimates(f, p, m, pr, N, seed, refit), pr.sm());
}

// Three d = 4 pairs with small |x + y|^2 (0.63, 0.25, 0.5), where the sample MSE converges
// (the exponential estimators' errors are heavy-tailed at large norms: docs/estimators.md);
// the first is the d = m = 4 reference point of the structured projections (iid MSE 0.207,
// ORF 0.185, SimRF 0.078).
inline std::vector<Pair> small_norm_points() {
    return {make_pair({.3, -.2, .5, .1}, {.4, .1, -.3, .2}), make_pair({.2, .1, 0, -.3}, {-.1, .3, .2, .1}),
            make_pair({.5, 0, 0, 0}, {0, .5, 0, 0})};
}

// Row a . row b of W.
inline double dot_rows(const Mat<double>& W, std::size_t a, std::size_t b) {
    double s = 0;
    for (std::size_t c = 0; c < W.shape(1); ++c) s += W(a, c) * W(b, c);
    return s;
}

// The feature map a config variant {"features": name, ...extra} gives.
inline favor::FeatureMapPtr map_named(const std::string& features, nlohmann::json extra = nlohmann::json::object()) {
    extra["features"] = features;
    return favor::parse_variant(extra, favor::Field{"test", ""}, false, "").map;
}

// The estimator with this map and W, fitted to queries Q and keys K.
template <class T>
favor::Estimator<T> fitted(const favor::FeatureMapPtr& f, const Mat<T>& W, const Mat<T>& Q, const Mat<T>& K) {
    return favor::Estimator<T>{f, W, false}.for_inputs(Q, K);
}

#ifdef FAVOR_BINARY
// What `favor list` prints (the built binary, FAVOR_BINARY); "" if it fails.
inline std::string favor_list_output() {
    FILE* p = popen((std::string(FAVOR_BINARY) + " list").c_str(), "r");
    if (!p) return "";
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    return pclose(p) == 0 ? out : "";
}
#endif

}  // namespace favor_test
