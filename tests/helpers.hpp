#pragma once
// Small shared pieces of the Catch2 tests.
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>
#include <string>

#include "favor/estimator.hpp"
#include "favor/experiment.hpp"
#include "favor/merge.hpp"
#include "favor/tensor.hpp"
#include "favor/variant.hpp"

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

}  // namespace favor_test
