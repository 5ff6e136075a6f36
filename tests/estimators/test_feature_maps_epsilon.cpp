// Where epsilon is added: "epsilon_after": "max_exponent" (favor's default) and "max_wx" (the
// official Performer code's), each against a direct computation of its formula.
#include <catch2/catch.hpp>
#include <cmath>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/inputs.hpp"

#include "helpers.hpp"

using namespace favor;
using namespace favor_test;

namespace {

// Positive features as the official code's softmax_kernel_transformation computes them:
//   ratio * (exp(w.x - |x|^2/2 - max) + eps), ratio = 1/sqrt(m),
// max = max_j w_j.x per query row, max over all keys and j of w_j.y for keys ("max_wx");
// or the same with max taken of w.x - |x|^2/2 ("max_exponent", favor's).
Mat<double> direct_features(const Mat<double>& X, const Mat<double>& W, double eps, bool keys, bool wx) {
    const std::size_t L = X.shape(0), d = X.shape(1), m = W.shape(0);
    Mat<double> dash = Mat<double>::from_shape({L, m}), e = Mat<double>::from_shape({L, m});
    for (std::size_t i = 0; i < L; ++i) {
        double x2 = 0;
        for (std::size_t c = 0; c < d; ++c) x2 += X(i, c) * X(i, c);
        for (std::size_t j = 0; j < m; ++j) {
            double s = 0;
            for (std::size_t c = 0; c < d; ++c) s += W(j, c) * X(i, c);
            dash(i, j) = s;
            e(i, j) = s - x2 / 2;
        }
    }
    const Mat<double>& ref = wx ? dash : e;   // what the max is taken of
    double all = -INFINITY;
    for (double v : ref) all = std::max(all, v);
    Mat<double> phi = Mat<double>::from_shape({L, m});
    for (std::size_t i = 0; i < L; ++i) {
        double row = -INFINITY;
        for (std::size_t j = 0; j < m; ++j) row = std::max(row, ref(i, j));
        for (std::size_t j = 0; j < m; ++j)
            phi(i, j) = (std::exp(e(i, j) - (keys ? all : row)) + eps) / std::sqrt(double(m));
    }
    return phi;
}

// D^{-1} phiQ (phiK^T [V, 1]), causal or not, directly.
Mat<double> direct_attention(const Mat<double>& pq, const Mat<double>& pk, const Mat<double>& V, bool causal) {
    const std::size_t L = pq.shape(0), F = pq.shape(1), dv = V.shape(1);
    Mat<double> out = Mat<double>::from_shape({L, dv});
    for (std::size_t i = 0; i < L; ++i) {
        std::vector<double> num(dv, 0.0);
        double den = 0;
        for (std::size_t j = 0; j < pk.shape(0) && (!causal || j <= i); ++j) {
            double k = 0;
            for (std::size_t f = 0; f < F; ++f) k += pq(i, f) * pk(j, f);
            den += k;
            for (std::size_t c = 0; c < dv; ++c) num[c] += k * V(j, c);
        }
        for (std::size_t c = 0; c < dv; ++c) out(i, c) = num[c] / den;
    }
    return out;
}

// Worst over rows of max_c |a - b| / max_c |b|.
double worst_rel(const Mat<double>& a, const Mat<double>& b) {
    double w = 0;
    for (std::size_t i = 0; i < b.shape(0); ++i) {
        double diff = 0, scale = 0;
        for (std::size_t c = 0; c < b.shape(1); ++c) {
            diff = std::max(diff, std::fabs(a(i, c) - b(i, c)));
            scale = std::max(scale, std::fabs(b(i, c)));
        }
        w = std::max(w, diff / scale);
    }
    return w;
}

}  // namespace

TEST_CASE("epsilon placement: max_wx is the official formula, max_exponent favor's", "[epsilon]") {
    const bool causal = GENERATE(false, true);
    const std::string after = GENERATE(std::string("max_wx"), std::string("max_exponent"));
    CAPTURE(causal, after);
    const std::size_t L = 300, d = 16, m = 32;
    const double eps = 1e-4;
    const QKV in = random_inputs(31, L, d, 8, 1.5);
    const Mat<double> W = draw_projection(Projection("iid"), m, d, 31, 0);
    const Mat<double> X = scale_rows(in.q), Y = scale_rows(in.k);
    const bool wx = after == "max_wx";
    const Mat<double> ref = direct_attention(direct_features(X, W, eps, false, wx), direct_features(Y, W, eps, true, wx),
                                             in.v, causal);
    const FeatureMapPtr f = map_named("positive", {{"epsilon", eps}, {"epsilon_after", after}});
    REQUIRE(f->params()["epsilon_after"] == after);
    const Mat<double> out = favor_attention(fitted(f, W, in.q, in.k), in.q, in.k, in.v, causal).out;
    INFO("worst " << std::scientific << worst_rel(out, ref));
    REQUIRE(worst_rel(out, ref) < 1e-11);
    // The other placement gives other numbers.
    const Mat<double> other = direct_attention(direct_features(X, W, eps, false, !wx), direct_features(Y, W, eps, true, !wx),
                                               in.v, causal);
    REQUIRE(worst_rel(other, ref) > 1e-3);
}

TEST_CASE("epsilon_after is checked and applies to the exponential maps only", "[epsilon]") {
    auto error_of = [](nlohmann::json v) {
        return favor_test::error_of([&] { parse_variant(v, Field{"c.json", "variants[0]"}, false, ""); });
    };
    REQUIRE(error_of({{"features", "positive"}, {"epsilon_after", "max_w"}}).find("did you mean 'max_wx'") != std::string::npos);
    REQUIRE(error_of({{"features", "trig"}, {"epsilon_after", "max_wx"}})
                .find("epsilon_after: applies only to features 'positive', 'hyperbolic', 'oprf'") != std::string::npos);
    // The default is favor's placement; oprf keeps it through its fitted A*.
    REQUIRE(map_named("hyperbolic")->params()["epsilon_after"] == "max_exponent");
    const QKV in = random_inputs(1, 8, 4, 4, 1.0);
    const FeatureMapPtr o = map_named("oprf", {{"epsilon_after", "max_wx"}})->resolve(in.q, in.k);
    REQUIRE(o->params()["epsilon_after"] == "max_wx");
}
