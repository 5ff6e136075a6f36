// The float runs' reference rows (exact_rows.hpp, docs/design.md 3.1): float32 products with
// float64 sums across key tiles, against the float64 rows, within the bound derived in
// exact_rows.cpp; the same bits on any thread count; and the row-sampled metrics they give.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "favor/attention/exact_attention.hpp"
#include "favor/attention/exact_rows.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/core/rng.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/metrics/row_sample.hpp"
#include "favor/metrics/row_sampled_metrics.hpp"
#include "helpers.hpp"

using namespace favor;

namespace {
// L = 5000 keys: 10 key tiles of 512 (the last partial); 600 rows: 3 row blocks of 256 (the
// last partial).
constexpr std::size_t kL = 5000, kN = 600;

struct Rows {
    QKV in;
    Mat<float> q, k, v;
    RowSample s;
};

Rows problem(bool causal, std::size_t d, double scale) {
    Rows p{random_inputs(23, kL, d, d, scale), {}, {}, {}, draw_query_rows(23, 0, kL, kN, causal)};
    p.q = cast_mat<float>(p.in.q), p.k = cast_mat<float>(p.in.k), p.v = cast_mat<float>(p.in.v);
    return p;
}

// Per sampled row and column, exact_rows_f32_bound times mu = sum_j P_j |V_jc| (P: the row's
// float64 softmax weights over its visible keys).
Mat<double> entry_bounds(const Rows& p, bool causal) {
    const std::size_t d = p.in.q.shape(1);
    Mat<double> b = Mat<double>::from_shape({kN, d});
    const double alpha = 1.0 / std::sqrt(double(d));
    std::vector<double> x(kL);
    for (std::size_t r = 0; r < kN; ++r) {
        const std::size_t i = p.s.rows[r], keys = causal ? i + 1 : kL;
        double A = 0.0, xmax = -INFINITY, wsum = 0.0;
        const double* q = p.in.q.data() + i * d;
        for (std::size_t j = 0; j < keys; ++j) {
            const double* k = p.in.k.data() + j * d;
            double a = 0.0, s = 0.0;
            for (std::size_t c = 0; c < d; ++c) a += std::fabs(q[c] * k[c]), s += q[c] * k[c];
            A = std::max(A, alpha * a);
            x[j] = alpha * s;
            xmax = std::max(xmax, x[j]);
        }
        std::vector<double> mu(d, 0.0);
        for (std::size_t j = 0; j < keys; ++j) {
            const double w = std::exp(x[j] - xmax);
            wsum += w;
            for (std::size_t c = 0; c < d; ++c) mu[c] += w * std::fabs(p.in.v.data()[j * d + c]);
        }
        const double bound = exact_rows_f32_bound(d, A, kL);
        for (std::size_t c = 0; c < d; ++c) b(r, c) = bound * mu[c] / wsum;
    }
    return b;
}
}  // namespace

TEST_CASE("float32-product rows: within the derived bound of the float64 rows, the same bits on any thread count",
          "[exact_rows]") {
    for (const bool causal : {false, true}) {
        CAPTURE(causal);
        // Entries of scale 2 at d = 64: scores up to about +-15 (peaked rows).
        const std::size_t kD = 64;
        const Rows p = problem(causal, kD, 2.0);
        const Mat<double> f64 = exact_attention_rows(p.in.q, p.s.rows, p.in.k, p.in.v, causal);
        const Mat<double> f32 = exact_attention_rows_f32(p.q, p.s.rows, p.k, p.v, causal, 1);
        const Mat<double> bound = entry_bounds(p, causal);
        double worst = 0.0;   // the largest error as a fraction of its bound (measured 0.013)
        for (std::size_t e = 0; e < f64.size(); ++e)
            worst = std::max(worst, std::fabs(f32.data()[e] - f64.data()[e]) / bound.data()[e]);
        REQUIRE(worst <= 1.0);
        // Same bits on 2 and 3 threads (3 row blocks), and for a row whatever block it is in:
        // every other sampled row alone gives those rows' bits.
        for (const int t : {2, 3}) {
            const bool same = exact_attention_rows_f32(p.q, p.s.rows, p.k, p.v, causal, t) == f32;
            REQUIRE(same);
        }
        std::vector<std::size_t> odd;
        for (std::size_t r = 1; r < kN; r += 2) odd.push_back(p.s.rows[r]);
        const Mat<double> some = exact_attention_rows_f32(p.q, odd, p.k, p.v, causal, 2);
        bool same = true;
        for (std::size_t r = 0; r < odd.size(); ++r)
            for (std::size_t c = 0; c < kD; ++c) same = same && some(r, c) == f32(2 * r + 1, c);
        REQUIRE(same);
    }
}

TEST_CASE("float32-product rows: the row-sampled output metrics move far less than their row SEM", "[exact_rows]") {
    for (const bool causal : {false, true}) {
        CAPTURE(causal);
        // configs/long_context.json's inputs: d = 16, scale 1; m = 64.
        const std::size_t kD = 16;
        const Rows p = problem(causal, kD, 1.0);
        Mat<double> W = Mat<double>::from_shape({64, kD});
        fill_normal(stream_key({23, tag("test-W")}), W.data(), W.size());
        const Estimator<float> est = favor_test::fitted(favor_test::map_named("positive"), cast_mat<float>(W), p.q, p.k);
        const Mat<float> out = take_rows(favor_forward(est, p.q, p.k, p.v, causal), p.s.rows);
        const Mat<double> f64 = exact_attention_rows(p.in.q, p.s.rows, p.in.k, p.in.v, causal);
        const Mat<double> f32 = exact_attention_rows_f32(p.q, p.s.rows, p.k, p.v, causal);
        MetricValues a, b;
        sampled_values({"output_mse", "output_rel_error"}, f64, out, PairwiseRequest{}, {}, p.s, a);
        sampled_values({"output_mse", "output_rel_error"}, f32, out, PairwiseRequest{}, {}, p.s, b);
        // With e = out - f64 and delta = f32 - f64, |delta_k| <= beta_k (the derived bound):
        // mse moves by mean(delta^2 - 2 e delta), at most mean(2 |e| beta + beta^2); the ratio
        // |e|/|f64| becomes |e - delta|/|f64 + delta|, each norm moved by at most |beta|.
        const Mat<double> beta = entry_bounds(p, causal);
        double mse_tol = 0.0, e2 = 0.0, r2 = 0.0, b2 = 0.0;
        for (std::size_t k = 0; k < beta.size(); ++k) {
            const double e = double(out.data()[k]) - f64.data()[k], bk = beta.data()[k];
            mse_tol += 2.0 * std::fabs(e) * bk + bk * bk;
            e2 += e * e, r2 += f64.data()[k] * f64.data()[k], b2 += bk * bk;
        }
        mse_tol /= double(beta.size());
        const double en = std::sqrt(e2), rn = std::sqrt(r2), bn = std::sqrt(b2), rel = en / rn;
        const double rel_tol = std::max((en + bn) / (rn - bn) - rel, rel - (en - bn) / (rn + bn));
        CAPTURE(*a["output_mse"], *b["output_mse"], mse_tol, *a["output_mse_row_sem"]);
        CAPTURE(*a["output_rel_error"], *b["output_rel_error"], rel_tol, *a["output_rel_error_row_sem"]);
        REQUIRE(std::fabs(*b["output_mse"] - *a["output_mse"]) <= mse_tol);
        REQUIRE(std::fabs(*b["output_rel_error"] - *a["output_rel_error"]) <= rel_tol);
        // The tolerances (worst cases: the observed moves are about 1e-3 of them) are an order
        // of magnitude below the sampling error the columns state.
        REQUIRE(mse_tol < 0.1 * *a["output_mse_row_sem"]);
        REQUIRE(rel_tol < 0.1 * *a["output_rel_error_row_sem"]);
    }
}
