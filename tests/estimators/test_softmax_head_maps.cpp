// liger (softmax(x) over the head dimension) and softmax_dim (LoLCATs' [softmax(x),
// softmax(-x)], each half normalised on its own) against hand-written double loops: the
// features, the attention outputs (causal and not) to 1e-12 in float64, and the vjp against
// central finite differences. The contract test walks the registry for the rest.
#include <catch2/catch.hpp>
#include <cmath>

#include "helpers.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/experiments/inputs.hpp"

using namespace favor;
using favor_test::map_named;

namespace {
Mat<double> normal(std::size_t L, std::size_t d, double scale, std::uint64_t seed) {
    return random_inputs(seed, L, d, 1, scale).q;
}

// The reference features of row x (d), already scaled: liger softmax(x); softmax_dim
// [softmax(x), softmax(-x)]; both in the naive form (no shift: the inputs stay moderate).
std::vector<double> reference_phi(const std::string& name, const double* x, std::size_t d) {
    std::vector<double> out;
    for (double sign : name == "liger" ? std::vector<double>{1.0} : std::vector<double>{1.0, -1.0}) {
        double z = 0.0;
        for (std::size_t c = 0; c < d; ++c) z += std::exp(sign * x[c]);
        for (std::size_t c = 0; c < d; ++c) out.push_back(std::exp(sign * x[c]) / z);
    }
    return out;
}

// Out_i = sum_j (phi(q_i).phi(k_j)) v_j / sum_j phi(q_i).phi(k_j), j <= i when causal, with
// q and k scaled by d^{-1/4}.
Mat<double> reference_attention(const std::string& name, const Mat<double>& Q, const Mat<double>& K,
                                const Mat<double>& V, bool causal) {
    const std::size_t L = Q.shape(0), Lk = K.shape(0), d = Q.shape(1), dv = V.shape(1);
    const double xs = std::pow(double(d), -0.25);
    Mat<double> out = xt::zeros<double>({L, dv});
    for (std::size_t i = 0; i < L; ++i) {
        std::vector<double> q(d);
        for (std::size_t c = 0; c < d; ++c) q[c] = xs * Q(i, c);
        const std::vector<double> pq = reference_phi(name, q.data(), d);
        double den = 0.0;
        for (std::size_t j = 0; j < Lk && (!causal || j <= i); ++j) {
            std::vector<double> k(d);
            for (std::size_t c = 0; c < d; ++c) k[c] = xs * K(j, c);
            const std::vector<double> pk = reference_phi(name, k.data(), d);
            double a = 0.0;
            for (std::size_t f = 0; f < pq.size(); ++f) a += pq[f] * pk[f];
            den += a;
            for (std::size_t c = 0; c < dv; ++c) out(i, c) += a * V(j, c);
        }
        for (std::size_t c = 0; c < dv; ++c) out(i, c) /= den;
    }
    return out;
}
}  // namespace

TEST_CASE("liger and softmax_dim features equal a double loop", "[field][liger][softmax_dim]") {
    const std::string name = GENERATE(as<std::string>{}, "liger", "softmax_dim");
    CAPTURE(name);
    const std::size_t d = 5;
    const FeatureMapPtr f = map_named(name);
    REQUIRE(f->num_features(7, d) == (name == "liger" ? d : 2 * d));
    REQUIRE_FALSE(f->uses_projection());
    REQUIRE_FALSE(f->uses_m());
    REQUIRE_FALSE(f->estimates_softmax());
    const Mat<double> X = normal(6, d, 1.4, 41);
    const Mat<double> W = xt::zeros<double>({std::size_t(3), d});
    const double xs = 0.7;
    for (Side side : {Side::query, Side::key}) {
        const Features<double> fx = compute_features(*f, X, xs, W, side);
        for (std::size_t i = 0; i < 6; ++i) {
            std::vector<double> x(d);
            for (std::size_t c = 0; c < d; ++c) x[c] = xs * X(i, c);
            const std::vector<double> ref = reference_phi(name, x.data(), d);
            REQUIRE(fx.phi.shape(1) == ref.size());
            for (std::size_t k = 0; k < ref.size(); ++k)
                REQUIRE(std::fabs(fx.phi(i, k) * std::exp(fx.log_scale[i]) - ref[k]) <= 1e-12);
        }
    }
}

TEST_CASE("liger and softmax_dim hold large entries: each softmax is shifted by its own max", "[field][liger][softmax_dim]") {
    // Entries of order 800: exp overflows without the shift; each half still sums to 1.
    const std::string name = GENERATE(as<std::string>{}, "liger", "softmax_dim");
    CAPTURE(name);
    const std::size_t d = 4;
    const Mat<double> X = normal(3, d, 400.0, 43);
    const Mat<double> W = xt::zeros<double>({std::size_t(2), d});
    const Features<double> fx = compute_features(*map_named(name), X, 1.0, W, Side::key);
    for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t h = 0; h < fx.phi.shape(1) / d; ++h) {
            double sum = 0.0;
            for (std::size_t c = 0; c < d; ++c) {
                REQUIRE(std::isfinite(fx.phi(i, h * d + c)));
                sum += fx.phi(i, h * d + c);
            }
            REQUIRE(sum == Approx(1.0).epsilon(1e-14));
        }
}

TEST_CASE("softmax_dim is not hedgehog's joint softmax", "[field][softmax_dim][hedgehog]") {
    const std::size_t d = 4;
    const Mat<double> X = normal(2, d, 1.0, 45);
    const Mat<double> W = xt::zeros<double>({std::size_t(2), d});
    const Features<double> a = compute_features(*map_named("softmax_dim"), X, 0.5, W, Side::key);
    const Features<double> b = compute_features(*map_named("hedgehog"), X, 0.25, W, Side::key);
    // Same shapes, and hedgehog's halves at the same 2 (0.25 x) = 0.5 x; but each softmax_dim
    // half sums to 1, the two hedgehog halves together.
    REQUIRE(a.phi.shape(1) == b.phi.shape(1));
    double sa = 0.0, sb = 0.0;
    for (std::size_t f = 0; f < 2 * d; ++f) sa += a.phi(0, f), sb += b.phi(0, f);
    REQUIRE(sa == Approx(2.0).epsilon(1e-14));
    REQUIRE(sb == Approx(1.0).epsilon(1e-14));
}

TEST_CASE("liger and softmax_dim attention equals a double loop", "[field][liger][softmax_dim]") {
    const std::string name = GENERATE(as<std::string>{}, "liger", "softmax_dim");
    const bool causal = GENERATE(false, true);
    CAPTURE(name, causal);
    const std::size_t L = 9, Lk = causal ? 9 : 11, d = 6;
    const QKV in = random_inputs(47, L, d, 3, 1.2);
    const Mat<double> K = normal(Lk, d, 1.2, 48), V = normal(Lk, 3, 1.0, 49);
    const FeatureMapPtr f = map_named(name);
    const Estimator<double> est = favor_test::fitted(f, Mat<double>(xt::zeros<double>({std::size_t(4), d})), in.q, K);
    const Mat<double> out = favor_attention(est, in.q, K, V, causal).out;
    const Mat<double> ref = reference_attention(name, in.q, K, V, causal);
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t c = 0; c < 3; ++c) REQUIRE(std::fabs(out(i, c) - ref(i, c)) <= 1e-12);
}

TEST_CASE("liger and softmax_dim vjp equal central finite differences", "[field][liger][softmax_dim][backward]") {
    // g . phi(x) differentiated by central differences, h = 1e-6 (error O(h^2) relative to
    // terms of order 1; 1e-8 allowed), with epsilon 0.01 to check that it drops out.
    const std::string name = GENERATE(as<std::string>{}, "liger", "softmax_dim");
    CAPTURE(name);
    const std::size_t d = 5, rows = 3;
    const FeatureMapPtr f = map_named(name, {{"epsilon", 0.01}});
    const std::size_t F = f->num_features(4, d);
    const Mat<double> W = xt::zeros<double>({std::size_t(4), d});
    const Mat<double> X = normal(rows, d, 1.3, 51), G = normal(rows, F, 1.0, 52);
    const double xs = 0.8;
    const Features<double> fx = compute_features(*f, X, xs, W, Side::query);
    const Mat<double> dX = feature_vjp(*f, X, xs, W, Side::query, fx.phi, G);
    auto gphi = [&](const Mat<double>& z, std::size_t i) {
        const Features<double> fz = compute_features(*f, z, xs, W, Side::query);
        double s = 0.0;
        for (std::size_t k = 0; k < F; ++k) s += G(i, k) * fz.phi(i, k);
        return s * std::exp(fz.log_scale[i]);
    };
    const double h = 1e-6;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t c = 0; c < d; ++c) {
            Mat<double> up = X, down = X;
            up(i, c) += h, down(i, c) -= h;
            const double fd = (gphi(up, i) - gphi(down, i)) / (2.0 * h);
            CAPTURE(i, c, fd, dX(i, c));
            REQUIRE(std::fabs(dX(i, c) - fd) <= 1e-8);
        }
}
