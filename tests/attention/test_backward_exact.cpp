// The exact backward from saved statistics (favor/attention/backward_exact.hpp, docs/design.md section
// 2.7) at sizes that cross its tiles and chunks: against a dense float64 reference of the same
// formulas (the L x L matrices, test-only) and central differences of exact_attention; the
// saved forward's output bitwise equal to exact_attention's and its lse against a direct sum;
// the standalone backward equal to forward + saved backward; float32 against float64.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/backward_exact.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/core/error.hpp"

#include "backward_helpers.hpp"

using namespace favor;
using namespace favor_test;

namespace {

struct Problem {
    Mat<double> Q, K, V, G;
};
Problem problem(std::size_t L, std::size_t Lk, std::size_t d, std::size_t dv, std::uint64_t seed) {
    return {normal(L, d, 1.0, seed), normal(Lk, d, 1.0, seed + 1), normal(Lk, dv, 1.0, seed + 2),
            normal(L, dv, 1.0, seed + 3)};
}

// The gradient from the whole matrices: A = softmax(S) (causal mask), dV = A^T G,
// dS = A o (G V^T - rowsum(G o A V)), dQ = dS K / sqrt d, dK = dS^T Q / sqrt d; each row's lse.
Gradients<double> dense_backward(const Problem& p, bool causal, std::vector<double>& lse) {
    const std::size_t L = p.Q.shape(0), Lk = p.K.shape(0), d = p.Q.shape(1), dv = p.V.shape(1);
    const double a = 1.0 / std::sqrt(double(d));
    Mat<double> A = Mat<double>::from_shape({L, Lk}), dS = Mat<double>::from_shape({L, Lk});
    Gradients<double> g{Mat<double>::from_shape({L, d}), Mat<double>::from_shape({Lk, d}), Mat<double>::from_shape({Lk, dv})};
    g.dQ.fill(0), g.dK.fill(0), g.dV.fill(0);
    lse.assign(L, 0.0);
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t n = causal ? i + 1 : Lk;
        double mx = -INFINITY, sum = 0;
        for (std::size_t j = 0; j < Lk; ++j) {
            double s = 0;
            const double *qi = &p.Q(i, 0), *kj = &p.K(j, 0);
            for (std::size_t k = 0; k < d; ++k) s += qi[k] * kj[k];
            A(i, j) = j < n ? s * a : -INFINITY;
            mx = std::max(mx, A(i, j));
        }
        for (std::size_t j = 0; j < Lk; ++j) sum += (A(i, j) = std::exp(A(i, j) - mx));
        lse[i] = mx + std::log(sum);
        double delta = 0;
        for (std::size_t j = 0; j < Lk; ++j) {
            A(i, j) /= sum;
            double dp = 0;
            const double *gi = &p.G(i, 0), *vj = &p.V(j, 0);
            for (std::size_t c = 0; c < dv; ++c) dp += gi[c] * vj[c];
            dS(i, j) = dp;
            delta += A(i, j) * dp;   // = G_i . Out_i
        }
        for (std::size_t j = 0; j < Lk; ++j) dS(i, j) = A(i, j) * (dS(i, j) - delta);
    }
    for (std::size_t i = 0; i < L; ++i)   // raw rows: element access would dominate the test's time
        for (std::size_t j = 0; j < Lk; ++j) {
            const double aij = A(i, j), sij = dS(i, j) * a;
            const double *gi = &p.G(i, 0), *kj = &p.K(j, 0), *qi = &p.Q(i, 0);
            double *dv_j = &g.dV(j, 0), *dq_i = &g.dQ(i, 0), *dk_j = &g.dK(j, 0);
            for (std::size_t c = 0; c < dv; ++c) dv_j[c] += aij * gi[c];
            for (std::size_t k = 0; k < d; ++k) dq_i[k] += sij * kj[k], dk_j[k] += sij * qi[k];
        }
    return g;
}

}  // namespace

TEST_CASE("exact_attention_saved: exact_attention's output bitwise, and each row's log-sum-exp", "[backward]") {
    const bool causal = GENERATE(false, true);
    const std::size_t L = 300, Lk = causal ? 300 : 700;   // crosses exact_tile_keys in float64 and float32
    Problem p = problem(L, Lk, 8, 5, 61);
    std::vector<double> lse;
    dense_backward(p, causal, lse);
    CAPTURE(causal);
    const ExactForward<double> f = exact_attention_saved(p.Q, p.K, p.V, causal, 2);
    CHECK(f.out == exact_attention(p.Q, p.K, p.V, causal, 2));
    const ExactForward<float> f32 = exact_attention_saved(cast_mat<float>(p.Q), cast_mat<float>(p.K), cast_mat<float>(p.V), causal, 2);
    CHECK(f32.out == exact_attention(cast_mat<float>(p.Q), cast_mat<float>(p.K), cast_mat<float>(p.V), causal, 2));
    double e64 = 0, e32 = 0;
    for (std::size_t i = 0; i < L; ++i) {
        e64 = std::max(e64, std::abs(f.lse[i] - lse[i]));
        e32 = std::max(e32, std::abs(f32.lse[i] - lse[i]));
    }
    CAPTURE(e64, e32);
    CHECK(e64 < 1e-12);   // float64 rounding of |lse| < 20
    CHECK(e32 < 1e-5);    // float32 scores: |S| < 20 rounded at 2^-24 relative, a few roundings
}

TEST_CASE("exact backward from saved statistics matches the dense gradient across tiles and chunks", "[backward]") {
    struct Case { std::size_t L, Lk; bool causal; };
    // L = 1; sizes not multiples of the 128-row tiles; L != Lk; more key blocks (9) than chunks (8).
    const Case c = GENERATE(Case{1, 1, false}, Case{1, 1, true}, Case{1, 5, false}, Case{300, 200, false},
                            Case{200, 300, false}, Case{300, 300, true}, Case{200, 1100, false}, Case{1100, 1100, true});
    static_assert(kExactBackwardChunks * kExactBackwardKeys < 1100, "the 1100 cases should wrap the chunks");
    CAPTURE(c.L, c.Lk, c.causal);
    const Problem p = problem(c.L, c.Lk, 20, 12, 71);   // whole SIMD vectors and scalar tails
    std::vector<double> lse;
    const Gradients<double> ref = dense_backward(p, c.causal, lse);
    const ExactForward<double> f = exact_attention_saved(p.Q, p.K, p.V, c.causal, 2);
    const Gradients<double> g = exact_attention_backward_saved(p.Q, p.K, p.V, p.G, f.out, f.lse, c.causal, 2);
    // Both float64 over at most 1100 terms per entry: rounding ~1e-14 relative.
    CHECK(rel_diff(g.dQ, ref.dQ) < 1e-12);
    CHECK(rel_diff(g.dK, ref.dK) < 1e-12);
    CHECK(rel_diff(g.dV, ref.dV) < 1e-12);
    // The standalone backward is this forward and this backward, for any thread count.
    const Gradients<double> s = exact_attention_backward(p.Q, p.K, p.V, p.G, c.causal, 1);
    CHECK(s.dQ == g.dQ);
    CHECK(s.dK == g.dK);
    CHECK(s.dV == g.dV);
    // float32 to its rounding (tens of roundings of 2^-24 per entry, amplified by dS's cancellation).
    const Mat<float> Qf = cast_mat<float>(p.Q), Kf = cast_mat<float>(p.K), Vf = cast_mat<float>(p.V), Gf = cast_mat<float>(p.G);
    const Gradients<float> g32 = exact_attention_backward(Qf, Kf, Vf, Gf, c.causal, 2);
    CHECK(rel_diff(cast_mat<double>(g32.dQ), ref.dQ) < 1e-4);
    CHECK(rel_diff(cast_mat<double>(g32.dK), ref.dK) < 1e-4);
    CHECK(rel_diff(cast_mat<double>(g32.dV), ref.dV) < 1e-4);
    const Gradients<float> g32_3 = exact_attention_backward(Qf, Kf, Vf, Gf, c.causal, 3);   // bitwise for any threads
    CHECK(g32_3.dQ == g32.dQ);
    CHECK(g32_3.dK == g32.dK);
    CHECK(g32_3.dV == g32.dV);
}

TEST_CASE("exact backward across tiles equals finite differences", "[backward]") {
    const bool causal = GENERATE(false, true);
    Problem p = problem(140, causal ? 140 : 131, 3, 2, 81);
    CAPTURE(causal);
    const Gradients<double> g = exact_attention_backward(p.Q, p.K, p.V, p.G, causal, 2);
    auto fd = [&](Mat<double>& X) {   // d/dX of sum(G o exact_attention) by central differences
        Mat<double> d = Mat<double>::from_shape(X.shape());
        const double h = 1e-5;
        for (std::size_t i = 0; i < X.size(); ++i) {
            const double x0 = X.data()[i];
            X.data()[i] = x0 + h;
            const double up = xt::sum(p.G * exact_attention(p.Q, p.K, p.V, causal))();
            X.data()[i] = x0 - h;
            const double down = xt::sum(p.G * exact_attention(p.Q, p.K, p.V, causal))();
            X.data()[i] = x0;
            d.data()[i] = (up - down) / (2 * h);
        }
        return d;
    };
    // O(h^2) truncation and 1e-16 / h rounding: ~1e-10 relative, as test_backward.cpp's 1e-6.
    CHECK(rel_diff(g.dQ, fd(p.Q)) < 1e-6);
    CHECK(rel_diff(g.dK, fd(p.K)) < 1e-6);
    CHECK(rel_diff(g.dV, fd(p.V)) < 1e-6);
}

TEST_CASE("the saved backward refuses a saved forward of other sizes", "[backward]") {
    const Problem p = problem(8, 8, 4, 3, 91);
    const ExactForward<double> f = exact_attention_saved(p.Q, p.K, p.V);
    std::vector<double> short_lse(f.lse.begin(), f.lse.end() - 1);
    CHECK_THROWS_AS(exact_attention_backward_saved(p.Q, p.K, p.V, p.G, f.out, short_lse), Error);
    const Mat<double> narrow = normal(8, 2, 1.0, 92);
    CHECK_THROWS_AS(exact_attention_backward_saved(p.Q, p.K, p.V, p.G, narrow, f.lse), Error);
}
