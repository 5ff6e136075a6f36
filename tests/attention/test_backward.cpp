// The backward passes (favor/attention/backward_exact.hpp, backward_linear.hpp) against central finite differences of their own
// forwards (exact_attention, favor_attention) in float64, for every map with a gradient,
// causal and not; float32 against float64; 1 thread against 2 bitwise; the refusals.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_linear.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/estimator.hpp"

#include "backward_helpers.hpp"
#include "helpers.hpp"

using namespace favor;
using namespace favor_test;

namespace {

// d/dX of sum(G o forward(X)) by central differences, X one of the forward's inputs.
template <class Forward>
Mat<double> finite_difference(Mat<double>& X, const Mat<double>& G, Forward forward) {
    Mat<double> d = Mat<double>::from_shape(X.shape());
    const double h = 1e-5;
    for (std::size_t i = 0; i < X.size(); ++i) {
        const double x0 = X.data()[i];
        X.data()[i] = x0 + h;
        const double up = xt::sum(G * forward())();
        X.data()[i] = x0 - h;
        const double down = xt::sum(G * forward())();
        X.data()[i] = x0;
        d.data()[i] = (up - down) / (2 * h);
    }
    return d;
}

struct Problem {
    Mat<double> Q, K, V, G;
};

Problem problem(std::size_t L, std::size_t Lk, std::size_t d, std::size_t dv, double scale, std::uint64_t seed) {
    return {normal(L, d, scale, seed), normal(Lk, d, scale, seed + 1), normal(Lk, dv, 1.0, seed + 2),
            normal(L, dv, 1.0, seed + 3)};
}

// Each gradient against its finite differences; returns the largest relative error.
template <class Forward>
double check_fd(Problem& p, const Gradients<double>& g, Forward forward) {
    const double eq = rel_diff(g.dQ, finite_difference(p.Q, p.G, forward));
    const double ek = rel_diff(g.dK, finite_difference(p.K, p.G, forward));
    const double ev = rel_diff(g.dV, finite_difference(p.V, p.G, forward));
    CAPTURE(eq, ek, ev);
    CHECK(eq < 1e-6);
    CHECK(ek < 1e-6);
    CHECK(ev < 1e-6);
    return std::max({eq, ek, ev});
}

// The estimator of `name` with a Gaussian W (m, d) (a zero placeholder for maps without a
// projection), fitted to p's Q and K and then held fixed.
Estimator<double> estimator(const std::string& name, const Problem& p, std::size_t m, nlohmann::json extra = {}) {
    const FeatureMapPtr f = map_named(name, extra.is_null() ? nlohmann::json::object() : extra);
    Mat<double> W = f->uses_projection() ? normal(m, p.Q.shape(1), 1.0, 99) : Mat<double>(xt::zeros<double>({m, p.Q.shape(1)}));
    return fitted(f, W, p.Q, p.K);
}

const std::vector<std::string> kMaps = {"positive", "hyperbolic", "trig", "relu", "oprf",
                                        "gerf",     "sderf",      "saderf", "elu", "dpfp", "dark",
                                        "aderf",    "taylor2",    "hedgehog", "liger", "softmax_dim", "poisson", "geometric",
                                        "maclaurin"};   // t2r: relu(x) rows of zeros on random inputs; its gradient against torch in tests/python_module

}  // namespace

TEST_CASE("exact attention backward equals finite differences", "[backward]") {
    const bool causal = GENERATE(false, true);
    const std::size_t Lk = causal ? 10 : 7;
    Problem p = problem(10, Lk, 4, 3, 1.0, 7);
    CAPTURE(causal);
    const Gradients<double> g = exact_attention_backward(p.Q, p.K, p.V, p.G, causal);
    const double e = check_fd(p, g, [&] { return exact_attention(p.Q, p.K, p.V, causal); });
    WARN("exact causal=" << causal << " largest FD relative error " << e);
}

TEST_CASE("linear attention backward equals finite differences for every map", "[backward]") {
    const std::string name = GENERATE_REF(from_range(kMaps));
    const bool causal = GENERATE(false, true);
    const std::size_t Lk = causal ? 9 : 6;
    Problem p = problem(9, Lk, 4, 3, 0.8, 11);
    CAPTURE(name, causal);
    // dpfp's features are sparse: a causal row can see no key that shares one, D = 0; its
    // epsilon (no shift to hold) keeps D > 0 and checks epsilon's path.
    const nlohmann::json extra = name == "dpfp" ? nlohmann::json{{"nu", 2}, {"epsilon", 0.05}} : nlohmann::json{};
    const Estimator<double> est = estimator(name, p, 8, extra);
    const Gradients<double> g = favor_backward(est, p.Q, p.K, p.V, p.G, causal);
    const double e = check_fd(p, g, [&] { return favor_attention(est, p.Q, p.K, p.V, causal).out; });
    WARN(name << " causal=" << causal << " largest FD relative error " << e);
}

TEST_CASE("feature gradients hold for a key with a large log scale", "[backward]") {
    // One key 6x the others: its shift dominates M (non-causal) and P_i (causal).
    const bool causal = GENERATE(false, true);
    Problem p = problem(8, 8, 4, 3, 0.7, 23);
    for (std::size_t c = 0; c < 4; ++c) p.K(3, c) *= 6.0;
    const Estimator<double> est = estimator("positive", p, 8);
    const Gradients<double> g = favor_backward(est, p.Q, p.K, p.V, p.G, causal);
    check_fd(p, g, [&] { return favor_attention(est, p.Q, p.K, p.V, causal).out; });
}

TEST_CASE("causal backward over several chunks equals finite differences", "[backward]") {
    // L = 150: three chunks of the causal pass (backward_linear.cpp, 64 rows each, the last
    // partial; on 1 and on 2 threads, bitwise the same), with keys of large log scale in the second and third chunks so that the chunk
    // shifts rise twice and the state is rescaled between chunks, both ways.
    Problem p = problem(150, 150, 3, 2, 0.6, 41);
    for (std::size_t c = 0; c < 3; ++c) p.K(70, c) *= 5.0, p.K(140, c) *= 7.0;
    for (const char* name : {"positive", "hyperbolic"}) {
        CAPTURE(name);
        const Estimator<double> est = estimator(name, p, 6);
        const Gradients<double> g = favor_backward(est, p.Q, p.K, p.V, p.G, true, 1);
        check_fd(p, g, [&] { return favor_attention(est, p.Q, p.K, p.V, true).out; });
        const Gradients<double> g2 = favor_backward(est, p.Q, p.K, p.V, p.G, true, 2);   // chunks on 2 threads
        CHECK(g2.dQ == g.dQ);
        CHECK(g2.dK == g.dK);
        CHECK(g2.dV == g.dV);
    }
}

TEST_CASE("float32 backward agrees with float64 to its rounding", "[backward]") {
    const bool causal = GENERATE(false, true);
    const std::string name = GENERATE(as<std::string>{}, "exact", "positive", "trig", "sderf");
    CAPTURE(name, causal);
    Problem p = problem(64, 64, 8, 4, 1.0, 31);
    const Mat<float> Qf = cast_mat<float>(p.Q), Kf = cast_mat<float>(p.K), Vf = cast_mat<float>(p.V),
                     Gf = cast_mat<float>(p.G);
    Gradients<double> g64;
    Gradients<float> g32;
    if (name == "exact") {
        g64 = exact_attention_backward(p.Q, p.K, p.V, p.G, causal);
        g32 = exact_attention_backward(Qf, Kf, Vf, Gf, causal);
    } else {
        const Estimator<double> e = estimator(name, p, 16);
        const Estimator<float> ef = Estimator<float>{e.map, cast_mat<float>(e.W), true};
        g64 = favor_backward(e, p.Q, p.K, p.V, p.G, causal);
        g32 = favor_backward(ef, Qf, Kf, Vf, Gf, causal);
    }
    // Tens of float32 roundings (2^-24 each) per entry, amplified by cancellation in dS: 1e-4.
    CHECK(rel_diff(cast_mat<double>(g32.dQ), g64.dQ) < 1e-4);
    CHECK(rel_diff(cast_mat<double>(g32.dK), g64.dK) < 1e-4);
    CHECK(rel_diff(cast_mat<double>(g32.dV), g64.dV) < 1e-4);
}

TEST_CASE("backward numbers do not depend on the thread count", "[backward]") {
    const bool causal = GENERATE(false, true);
    SECTION("exact, 4 query and key blocks of 512 rows") {
        Problem p = problem(2048, 2048, 8, 4, 1.0, 41);
        const Gradients<double> a = exact_attention_backward(p.Q, p.K, p.V, p.G, causal, 1);
        const Gradients<double> b = exact_attention_backward(p.Q, p.K, p.V, p.G, causal, 2);
        CHECK(a.dQ == b.dQ);
        CHECK(a.dK == b.dK);
        CHECK(a.dV == b.dV);
    }
    SECTION("linear, 3 feature blocks") {
        Problem p = problem(600, 600, 8, 4, 1.0, 43);
        const Estimator<double> est = estimator("oprf", p, 16);
        const Gradients<double> a = favor_backward(est, p.Q, p.K, p.V, p.G, causal, 1);
        const Gradients<double> b = favor_backward(est, p.Q, p.K, p.V, p.G, causal, 2);
        CHECK(a.dQ == b.dQ);
        CHECK(a.dK == b.dK);
        CHECK(a.dV == b.dV);
    }
}

// The fused pass (backward_fused.cpp, what favor_backward runs non-causal) against the
// composition it replaces (both feature matrices, linear_attention_backward, feature_vjp),
// which the finite-difference test above checks on one block: sizes that are not multiples
// of the blocks (8 query and 8 key blocks of fused_backward_rows rows, the last ones partial), L != Lk,
// dv = 5 (not a multiple of the vector width). The saved path (favor_forward_saved, then
// favor_backward_saved) is the standalone one bit for bit, and its output favor_forward's.
template <class T>
Gradients<T> composed_backward(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V,
                               const Mat<T>& G) {
    const FeatureMap& f = *est.map;
    const double xs = 1.0 / std::pow(double(Q.shape(1)), 0.25);
    const Features<T> q = compute_features(f, Q, xs, est.W, Side::query);
    const Features<T> k = compute_features(f, K, xs, est.W, Side::key);
    FeatureGradients<T> fg = linear_attention_backward(q.phi, k.phi, k.log_scale, V, G);
    return {feature_vjp(f, Q, xs, est.W, Side::query, q.phi, fg.dphiQ),
            feature_vjp(f, K, xs, est.W, Side::key, k.phi, fg.dphiK), std::move(fg.dV)};
}

template <class T>
void check_fused(const Estimator<T>& est, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& G,
                 double tol) {
    REQUIRE(backward_saves(*est.map, est.rounding, false, K.shape(0)));
    const ForwardState<T> s = favor_forward_saved(est, Q, K, V, false, 2);
    REQUIRE(s.saved());
    CHECK(s.out == favor_forward(est, Q, K, V, false, 2));
    const Gradients<T> a = favor_backward(est, Q, K, V, G, false, 2);
    const Gradients<T> b = favor_backward_saved(est, Q, K, V, G, s, false, 1);
    CHECK(a.dQ == b.dQ);
    CHECK(a.dK == b.dK);
    CHECK(a.dV == b.dV);
    const Gradients<T> c = composed_backward(est, Q, K, V, G);
    const double eq = rel_diff(cast_mat<double>(a.dQ), cast_mat<double>(c.dQ));
    const double ek = rel_diff(cast_mat<double>(a.dK), cast_mat<double>(c.dK));
    const double ev = rel_diff(cast_mat<double>(a.dV), cast_mat<double>(c.dV));
    CAPTURE(eq, ek, ev);
    CHECK(eq < tol);
    CHECK(ek < tol);
    CHECK(ev < tol);
}

TEST_CASE("the fused backward equals the feature-matrix composition and the saved path", "[backward]") {
    const std::string name = GENERATE_REF(from_range(kMaps));
    CAPTURE(name);
    Problem p = problem(600, 450, 8, 5, 0.8, 61);
    const nlohmann::json extra = name == "dpfp" ? nlohmann::json{{"nu", 2}, {"epsilon", 0.05}} : nlohmann::json{};
    const Estimator<double> est = estimator(name, p, 16, extra);
    REQUIRE(fused_backward_rows(450, est.map->num_features(16, 8), 8, sizeof(double)) < 450 / 4);
    // Float64: the same formulas in another order of operations, a few hundred roundings of
    // 2^-53 each at most, amplified by the cancellation in dQ (hsum ~ 0): 1e-10.
    check_fused(est, p.Q, p.K, p.V, p.G, 1e-10);
    if (name == "positive" || name == "trig" || name == "sderf") {   // float32: its rounding, as above (1e-4)
        const Estimator<float> ef = Estimator<float>{est.map, cast_mat<float>(est.W), true};
        check_fused(ef, cast_mat<float>(p.Q), cast_mat<float>(p.K), cast_mat<float>(p.V), cast_mat<float>(p.G), 1e-4);
    }
}

TEST_CASE("maps without a gradient refuse with Error", "[backward]") {
    Problem p = problem(8, 8, 4, 3, 1.0, 51);
    const Estimator<double> nys = estimator("nystrom", p, 4);
    CHECK_THROWS_WITH(favor_backward(nys, p.Q, p.K, p.V, p.G), Catch::Contains("'nystrom' have no gradient"));
    const Estimator<double> eps = estimator("positive", p, 8, {{"epsilon", 1e-3}});
    CHECK_THROWS_WITH(favor_backward(eps, p.Q, p.K, p.V, p.G), Catch::Contains("no gradient (epsilon > 0"));
    const Problem bad = problem(8, 6, 4, 3, 1.0, 52);
    CHECK_THROWS_AS(exact_attention_backward(bad.Q, bad.K, bad.V, bad.G, true), Error);
}
