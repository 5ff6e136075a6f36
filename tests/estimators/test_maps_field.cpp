// The maps of issue 28's "rest of the field": aderf (FAVOR#'s asymmetric dense-exponential
// features), the discrete features poisson and geometric (Chefs' Random Tables), Based's
// taylor2 and the untrained hedgehog baseline. The registry's contract test
// (test_feature_map_contract.cpp) already checks unbiasedness and the closed-form MSE at the
// small-norm points; here: what is particular to each. Fixed seeds throughout.
#include <catch2/catch.hpp>
#include <cmath>

#include "helpers.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/theory.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/runs/cost_model.hpp"

using namespace favor;
using favor_test::map_named;
using nlohmann::json;

namespace {
// L x d standard normal entries times scale (random_inputs' queries).
Mat<double> normal(std::size_t L, std::size_t d, double scale, std::uint64_t seed) {
    return random_inputs(seed, L, d, 1, scale).q;
}

// L rows of d anisotropic, correlated columns (column c scaled by s[c], plus a shared part).
Mat<double> anisotropic(std::size_t L, const std::vector<double>& s, double shared, std::uint64_t seed) {
    const std::size_t d = s.size();
    Mat<double> X = normal(L, d, 1.0, seed);
    for (std::size_t i = 0; i < L; ++i) {
        const double common = X(i, 0);
        for (std::size_t c = 0; c < d; ++c) X(i, c) = s[c] * (X(i, c) + shared * common);
    }
    return X;
}

// Mean over all pairs of log E (f f)^2 = log(m MSE + SM^2), the objective the FAVOR# fits minimise.
double mean_log_second_moment(const FeatureMap& f, const Mat<double>& X, const Mat<double>& Y) {
    const std::size_t m = 1;
    const FeatureMap::PairMse mse = f.pair_mse_rows(X, Y, m);
    double s = 0.0;
    for (std::size_t i = 0; i < X.shape(0); ++i)
        for (std::size_t j = 0; j < Y.shape(0); ++j) {
            double xy = 0.0;
            for (std::size_t c = 0; c < X.shape(1); ++c) xy += X(i, c) * Y(j, c);
            s += std::log(mse(i, j, xy) + std::exp(2.0 * xy));
        }
    return s / double(X.shape(0) * Y.shape(0));
}

// The pair (row i of X, row j of Y) as a favor_test::Pair.
favor_test::Pair pair_of(const Mat<double>& X, std::size_t i, const Mat<double>& Y, std::size_t j) {
    const std::size_t d = X.shape(1);
    std::vector<double> x(d), y(d);
    for (std::size_t c = 0; c < d; ++c) {
        x[c] = X(i, c);
        y[c] = Y(j, c);
    }
    return favor_test::make_pair(x, y);
}
}  // namespace

TEST_CASE("aderf's fit attains the lower bound 2 tr Sig of its transform's objective", "[field][aderf]") {
    // For any invertible P, tr(P M1 P^T) + tr(P^-T M2 P^-1) >= 2 tr Sig (the nuclear norm of
    // M1^{1/2} M2^{1/2}); the fitted A is oprf's A* at rho = mean |Px + P^-T y|^2 / d, so
    // A_fitted = A*((2 tr Sig + 2 xbar.ybar) / d) exactly when P attains the bound (the ridge,
    // 1e-6 of the mean eigenvalue, moves it by about that).
    const Mat<double> X = anisotropic(200, {0.2, 0.5, 0.9, 0.3}, 0.7, 3), Y = anisotropic(200, {0.8, 0.1, 0.4, 0.6}, -0.5, 4);
    const FeatureMapPtr f = map_named("aderf")->resolve(X, Y);
    const json p = f->params();
    double tr = 0.0, xy = 0.0;
    for (double s : p["sigma"]) tr += s;
    for (std::size_t c = 0; c < 4; ++c) {
        double mx = 0.0, my = 0.0;
        for (std::size_t i = 0; i < 200; ++i) {
            mx += X(i, c) / 200.0;
            my += Y(i, c) / 200.0;
        }
        xy += mx * my;
    }
    CAPTURE(p.dump());
    REQUIRE(p["A_fitted"].get<double>() == Approx(oprf_optimal_A((2.0 * tr + 2.0 * xy) / 4.0)).epsilon(1e-5));
}

TEST_CASE("aderf's mean log second moment is below saderf's, gerf's and oprf's", "[field][aderf]") {
    // saderf (diagonal Psi), gerf (t I) and oprf (I) are aderf with a restricted P, each with
    // its own optimal A: aderf's optimum over all P can only be lower. Correlated columns make
    // it strictly lower (saderf cannot rotate).
    const Mat<double> X = anisotropic(100, {0.2, 0.5, 0.9, 0.3}, 0.8, 5), Y = anisotropic(100, {0.8, 0.1, 0.4, 0.6}, -0.6, 6);
    const double a = mean_log_second_moment(*map_named("aderf")->resolve(X, Y), X, Y);
    const double s = mean_log_second_moment(*map_named("saderf")->resolve(X, Y), X, Y);
    const double g = mean_log_second_moment(*map_named("gerf")->resolve(X, Y), X, Y);
    const double o = mean_log_second_moment(*map_named("oprf")->resolve(X, Y), X, Y);
    CAPTURE(a, s, g, o);
    REQUIRE(a < s - 1e-3);
    REQUIRE(s <= g + 1e-12);
    REQUIRE(g <= o + 1e-12);
}

TEST_CASE("aderf fitted to data is unbiased with its closed-form MSE, also at L < d (the ridge)", "[field][aderf][stats]") {
    // Fitted once to the rows (as the approximation runner fits it), then N = 20000 iid W
    // (m = 8) on two pairs of those rows: mean within 5 standard errors of SM, sample MSE
    // within 5 standard errors of the squared errors of the closed form. L = 3 < d = 6: M1, M2
    // are singular and the ridge keeps P invertible; unbiasedness holds for any invertible P.
    const std::size_t L = GENERATE(60, 3), d = L == 3 ? 6 : 4;
    std::vector<double> sx(d), sy(d);
    for (std::size_t c = 0; c < d; ++c) {
        sx[c] = 0.15 + 0.1 * double(c);
        sy[c] = 0.5 - 0.07 * double(c);
    }
    const Mat<double> X = anisotropic(L, sx, 0.6, 7), Y = anisotropic(L, sy, -0.4, 8);
    const FeatureMapPtr f = map_named("aderf")->resolve(X, Y);
    CAPTURE(L, f->params().dump());
    REQUIRE(f->params()["ridge"][0].get<double>() > 0.0);
    for (std::size_t i = 0; i < 2; ++i) {
        const favor_test::Pair pr = pair_of(X, i, Y, 2 - i);
        const std::vector<double> est = favor_test::kernel_estimates(*f, Projection("iid"), 8, pr, 20000, 40 + i, false);
        const favor_test::Sample s = favor_test::describe(est, pr.sm());
        const double theory = *pair_mse_at(*f, pr.x, pr.y, 8);
        CAPTURE(i, pr.sm(), s.mean, s.se, s.mse, s.mse_se, theory);
        REQUIRE(std::fabs(s.mean - pr.sm()) < 5.0 * s.se);
        REQUIRE(std::fabs(s.mse - theory) < 5.0 * s.mse_se);
    }
}

TEST_CASE("poisson and geometric with given parameters: unbiased, MSE the closed form", "[field][discrete][stats]") {
    // A pair of moderate norms (|x y| up to 0.4 per coordinate), N = 20000 iid W, m = 8.
    const favor_test::Pair pr = favor_test::make_pair({.6, -.4, .3, .5}, {.5, .7, -.2, .4});
    const json cfg = GENERATE(json{{"features", "poisson"}, {"lambda", 0.4}}, json{{"features", "geometric"}, {"p", 0.6}},
                              json{{"features", "poisson"}}, json{{"features", "geometric"}});
    const std::string name = cfg["features"];
    json extra = cfg;
    extra.erase("features");
    const FeatureMapPtr f = map_named(name, extra)->resolve(pr.x, pr.y);
    const std::vector<double> est = favor_test::kernel_estimates(*f, Projection("iid"), 8, pr, 20000, 60, false);
    const favor_test::Sample s = favor_test::describe(est, pr.sm());
    const double theory = *pair_mse_at(*f, pr.x, pr.y, 8);
    CAPTURE(cfg.dump(), f->params().dump(), pr.sm(), s.mean, s.se, s.mse, s.mse_se, theory);
    REQUIRE(std::fabs(s.mean - pr.sm()) < 5.0 * s.se);
    REQUIRE(std::fabs(s.mse - theory) < 5.0 * s.mse_se);
}

TEST_CASE("poisson's fitted lambda minimises the mean log second moment", "[field][discrete]") {
    // log E (f f)^2 = lambda d + S_ij / lambda: the mean over pairs is convex in lambda with its
    // minimum at sqrt(mean S / d); 5% either side is higher.
    const Mat<double> X = anisotropic(50, {0.2, 0.5, 0.9, 0.3}, 0.3, 9), Y = anisotropic(50, {0.8, 0.1, 0.4, 0.6}, 0.2, 10);
    const double lam = map_named("poisson")->resolve(X, Y)->params()["lambda_fitted"];
    const double at = mean_log_second_moment(*map_named("poisson", {{"lambda", lam}}), X, Y);
    CAPTURE(lam, at);
    REQUIRE(at < mean_log_second_moment(*map_named("poisson", {{"lambda", lam * 1.05}}), X, Y));
    REQUIRE(at < mean_log_second_moment(*map_named("poisson", {{"lambda", lam / 1.05}}), X, Y));
}

TEST_CASE("taylor2: phi(x).phi(y) = 1 + x.y + (x.y)^2/2 exactly, F = 1 + d + d(d+1)/2", "[field][taylor2]") {
    const std::size_t d = 5;
    const FeatureMapPtr f = map_named("taylor2");
    REQUIRE(f->num_features(7, d) == 1 + d + d * (d + 1) / 2);
    const Mat<double> X = normal(6, d, 1.3, 11), Y = normal(9, d, 0.9, 12);
    const Mat<double> W = xt::zeros<double>({std::size_t(7), d});
    const double xs = 0.7;   // the scaled rows are xs X, xs Y
    const Features<double> fx = compute_features(*f, X, xs, W, Side::query), fy = compute_features(*f, Y, xs, W, Side::key);
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 0; j < 9; ++j) {
            double xy = 0.0, dot = 0.0;
            for (std::size_t c = 0; c < d; ++c) xy += xs * X(i, c) * xs * Y(j, c);
            for (std::size_t k = 0; k < fx.phi.shape(1); ++k) dot += fx.phi(i, k) * fy.phi(j, k);
            dot *= std::exp(fx.log_scale[i] + fy.log_scale[j]);
            CAPTURE(i, j, xy, dot);
            REQUIRE(std::fabs(dot - (1.0 + xy + 0.5 * xy * xy)) <= 1e-14 * (1.0 + xy * xy));
        }
}

TEST_CASE("hedgehog: phi(x) = softmax([2x, -2x]), each row summing to 1", "[field][hedgehog]") {
    const std::size_t d = 4;
    const Mat<double> X = normal(5, d, 3.0, 13);   // large entries: the shift must hold
    const Mat<double> W = xt::zeros<double>({std::size_t(3), d});
    const Features<double> fx = compute_features(*map_named("hedgehog"), X, 1.0, W, Side::key);
    REQUIRE(fx.phi.shape(1) == 2 * d);
    for (std::size_t i = 0; i < 5; ++i) {
        double z = 0.0, sum = 0.0;
        for (std::size_t c = 0; c < d; ++c) z += std::exp(2.0 * X(i, c)) + std::exp(-2.0 * X(i, c));
        for (std::size_t c = 0; c < d; ++c) {
            REQUIRE(fx.phi(i, c) * std::exp(fx.log_scale[i]) == Approx(std::exp(2.0 * X(i, c)) / z).epsilon(1e-13));
            REQUIRE(fx.phi(i, d + c) * std::exp(fx.log_scale[i]) == Approx(std::exp(-2.0 * X(i, c)) / z).epsilon(1e-13));
            sum += fx.phi(i, c) + fx.phi(i, d + c);
        }
        REQUIRE(sum == Approx(1.0).epsilon(1e-14));
    }
}

TEST_CASE("the cost model counts aderf's d x d product per row", "[field][aderf][limits]") {
    // aderf and oprf differ only in feature_flops (both fitted, F = m): at d = 64, m = 16 the
    // product Px adds 2 d^2 = 8x the 2 m d of X W^T per row, so the estimated time is higher.
    auto seconds = [](const char* features) {
        const json j = {{"name", "c"}, {"inputs", {{"source", "random"}, {"L", 4096}, {"d", 64}}}, {"m", {16}},
                        {"variants", {{{"features", features}, {"projection", "orthogonal"}}}}, {"metrics", {"output_mse"}}};
        return estimate_run(parse_config(j, "c.json"), 1).seconds;
    };
    CAPTURE(seconds("aderf"), seconds("oprf"));
    REQUIRE(seconds("aderf") > seconds("oprf"));
}

TEST_CASE("poisson's gradient at a zero coordinate is the product of the other powers", "[field][discrete][backward]") {
    // Row x with x_2 = 0: features with k_2 = 1 are linear in x_2 there, with k_2 >= 2 flat.
    // The vjp (times exp(log scale): it is taken relative to the stabilised features) against
    // central differences of g . phi(x) of the unstabilised features, h = 1e-6 (error O(h^2)
    // relative to terms of order 1; 1e-7 allowed).
    const std::size_t d = 4, m = 64;
    const FeatureMapPtr f = map_named("poisson", {{"lambda", 0.8}});
    const Mat<double> W = normal(m, d, 1.0, 21), G = normal(1, m, 1.0, 22);
    Mat<double> x = Mat<double>::from_shape({1, d});
    x(0, 0) = 0.5, x(0, 1) = -0.7, x(0, 2) = 0.0, x(0, 3) = 0.9;
    auto gphi = [&](const Mat<double>& z) {
        const Features<double> fz = compute_features(*f, z, 1.0, W, Side::query);
        double s = 0.0;
        for (std::size_t j = 0; j < m; ++j) s += G(0, j) * fz.phi(0, j);
        return s * std::exp(fz.log_scale[0]);
    };
    const Features<double> fx = compute_features(*f, x, 1.0, W, Side::query);
    const Mat<double> dX = feature_vjp(*f, x, 1.0, W, Side::query, fx.phi, G);
    int hits = 0;   // features with k_2 = 1 (some must exist for the test to mean anything)
    for (std::size_t c = 0; c < d; ++c) {
        Mat<double> a = x, b = x;
        a(0, c) += 1e-6;
        b(0, c) -= 1e-6;
        const double fd = (gphi(a) - gphi(b)) / 2e-6, an = dX(0, c) * std::exp(fx.log_scale[0]);
        CAPTURE(c, fd, an);
        REQUIRE(std::fabs(fd - an) <= 1e-7 * std::max(1.0, std::fabs(fd)));
        if (c == 2 && std::fabs(an) > 1e-3) ++hits;
    }
    REQUIRE(hits == 1);
}
