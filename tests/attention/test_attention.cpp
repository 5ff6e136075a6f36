// Attention paths against naive references, the streamed metrics against full matrices,
// and the stabilisation against an unshifted long-double computation.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/attention/pairwise_pass.hpp"
#include "favor/core/half.hpp"
#include "favor/core/parallel.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/theory.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/metrics/output_metrics.hpp"

#include "helpers.hpp"

using namespace favor;
using namespace favor_test;

namespace {

using LMat = xt::xtensor<long double, 2>;

// Naive softmax attention with the full L x L matrix, in long double.
LMat naive_attention(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V, bool causal) {
    const std::size_t L = Q.shape(0), Lk = K.shape(0), d = Q.shape(1), dv = V.shape(1);
    LMat out = xt::zeros<long double>({L, dv});
    for (std::size_t i = 0; i < L; ++i) {
        std::vector<long double> a(Lk, 0.0L);
        long double z = 0;
        for (std::size_t j = 0; j < Lk && (!causal || j <= i); ++j) {
            long double s = 0;
            for (std::size_t c = 0; c < d; ++c) s += (long double)Q(i, c) * K(j, c);
            a[j] = std::exp(s / std::sqrt((long double)d));
            z += a[j];
        }
        for (std::size_t j = 0; j < Lk; ++j)
            for (std::size_t c = 0; c < dv; ++c) out(i, c) += a[j] / z * V(j, c);
    }
    return out;
}

// phi(x) without any shift, in long double (no overflow below e^11356).
LMat unshifted_features(const std::string& k, const Mat<double>& X, const Mat<double>& W) {
    const std::size_t L = X.shape(0), d = X.shape(1), m = W.shape(0);
    const std::size_t F = (k == std::string("positive")) ? m : 2 * m;
    LMat phi = LMat::from_shape({L, F});
    for (std::size_t i = 0; i < L; ++i) {
        long double x2 = 0;
        for (std::size_t c = 0; c < d; ++c) x2 += (long double)X(i, c) * X(i, c);
        for (std::size_t j = 0; j < m; ++j) {
            long double wx = 0;
            for (std::size_t c = 0; c < d; ++c) wx += (long double)W(j, c) * X(i, c);
            if (k == std::string("trig")) {
                phi(i, j) = std::exp(x2 / 2) * std::sin(wx) / std::sqrt((long double)m);
                phi(i, m + j) = std::exp(x2 / 2) * std::cos(wx) / std::sqrt((long double)m);
            } else if (k == std::string("positive")) {
                phi(i, j) = std::exp(wx - x2 / 2) / std::sqrt((long double)m);
            } else {
                phi(i, j) = std::exp(wx - x2 / 2) / std::sqrt(2.0L * m);
                phi(i, m + j) = std::exp(-wx - x2 / 2) / std::sqrt(2.0L * m);
            }
        }
    }
    return phi;
}

double max_abs_diff(const Mat<double>& a, const LMat& b) {
    double w = 0;
    for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, double(std::fabs(a.data()[i] - b.data()[i])));
    return w;
}

}  // namespace

TEST_CASE("exact attention matches a naive softmax, blocked or not, causal or not", "[attention]") {
    const std::size_t L = GENERATE(1, 37, 700);   // 700 rows span two row blocks
    const bool causal = GENERATE(false, true);
    CAPTURE(L, causal);
    const QKV in = random_inputs(3, L, 8, 5, 1.5);
    const LMat ref = naive_attention(in.q, in.k, in.v, causal);
    REQUIRE(max_abs_diff(exact_attention(in.q, in.k, in.v, causal, 1), ref) < 1e-12);
    const bool same_for_threads = exact_attention(in.q, in.k, in.v, causal, 2) == exact_attention(in.q, in.k, in.v, causal, 1);
    REQUIRE(same_for_threads);
}

// The tile kernels' edges (tile_kernels.hpp): keys not a multiple of the score panel and
// spanning several key tiles, d and dv that are and are not multiples of the vector width,
// row counts that leave every remainder of the row blocking, fewer keys than queries.
TEMPLATE_TEST_CASE("exact attention at the tile kernels' edges, float32 and float64", "[attention]", float, double) {
    using T = TestType;
    const auto [L, Lk, d, dv] = GENERATE(std::make_tuple(263, 1100, 64, 64), std::make_tuple(13, 77, 33, 17),
                                         std::make_tuple(700, 700, 16, 48), std::make_tuple(5, 2, 3, 1));
    const bool causal = GENERATE(false, true);
    CAPTURE(L, Lk, d, dv, causal);
    if (causal && Lk < L) return;   // causal attention needs a key for every query
    const QKV a = random_inputs(5, L, d, dv, 1.0), b = random_inputs(6, Lk, d, dv, 1.0);
    // Inputs exactly representable in T, so the reference sees what the kernel sees.
    const Mat<double> q = cast_mat<double>(cast_mat<T>(a.q)), k = cast_mat<double>(cast_mat<T>(b.k)),
                      v = cast_mat<double>(cast_mat<T>(b.v));
    const LMat ref = naive_attention(q, k, v, causal);
    const Mat<T> out = exact_attention(cast_mat<T>(q), cast_mat<T>(k), cast_mat<T>(v), causal, 1);
    // Rounding: scores with |s| <= ~10 carry ~|s| eps relative error into exp; the outputs
    // (weighted means of N(0,1) values) are O(1): 100 eps of T is a wide margin, 1e-12 and
    // 1e-5 in practice.
    const double tol = 100.0 * std::numeric_limits<T>::epsilon() * (std::is_same<T, float>::value ? 10.0 : 1.0);
    REQUIRE(max_abs_diff(cast_mat<double>(out), ref) < tol);
    const bool same_for_threads = exact_attention(cast_mat<T>(q), cast_mat<T>(k), cast_mat<T>(v), causal, 3) == out;
    REQUIRE(same_for_threads);
}

namespace {
// Row i of the explicit A_hat V: A_hat = rownormalize(phiQ diag(exp(lk)) phiK^T) (masked when
// causal) from a's features; the keys carry per-row log scales lk (shifted here by their max,
// which cancels).
std::vector<double> explicit_row(const Approximation<double>& a, const Mat<double>& V, std::size_t i, bool causal) {
    const std::size_t Lk = a.k.phi.shape(0), F = a.q.phi.shape(1), n = causal ? std::min(Lk, i + 1) : Lk;
    const double lmax = *std::max_element(a.k.log_scale.begin(), a.k.log_scale.end());
    std::vector<double> row(n, 0.0), o(V.shape(1), 0.0);
    double z = 0;
    for (std::size_t j = 0; j < n; ++j) {
        for (std::size_t c = 0; c < F; ++c) row[j] += a.q.phi(i, c) * a.k.phi(j, c);
        row[j] *= std::exp(a.k.log_scale[j] - lmax);
        z += row[j];
    }
    for (std::size_t c = 0; c < V.shape(1); ++c)
        for (std::size_t j = 0; j < n; ++j) o[c] += row[j] / z * V(j, c);
    return o;
}
}  // namespace

TEST_CASE("linear attention equals the explicit A_hat V", "[attention]") {
    const std::size_t L = GENERATE(5, 130, 700);
    const bool causal = GENERATE(false, true);
    const std::string kind = GENERATE(std::string("positive"), std::string("trig"));
    CAPTURE(L, causal, kind);
    const QKV in = random_inputs(4, L, 8, 6, 1.0);
    const FeatureMapPtr f = map_named(kind);
    const Mat<double> W = draw_projection(Projection("orthogonal"), 16, 8, 4, 0);
    const Approximation<double> a = favor_attention(fitted(f, W, in.q, in.k), in.q, in.k, in.v, causal);
    for (std::size_t i = 0; i < L; ++i) {
        const std::vector<double> o = explicit_row(a, in.v, i, causal);
        for (std::size_t c = 0; c < in.v.shape(1); ++c)
            REQUIRE(std::fabs(a.out(i, c) - o[c]) <= 1e-10 * std::max(1.0, std::fabs(o[c])));
    }
}

TEST_CASE("the streamed pairwise metrics equal those from full matrices", "[metrics]") {
    const std::size_t L = 700, d = 8, m = 16;
    const std::string kind = GENERATE(std::string("positive"), std::string("trig"), std::string("hyperbolic"));
    const bool causal = GENERATE(false, true);
    CAPTURE(kind, causal);
    const QKV in = random_inputs(5, L, d, d, 1.0);
    const FeatureMapPtr f = map_named(kind);
    const Mat<double> W = draw_projection(Projection("iid"), m, d, 5, 0);
    const Approximation<double> a = favor_attention(fitted(f, W, in.q, in.k), in.q, in.k, in.v, causal);
    const Mat<double> X = scale_rows(in.q), Y = scale_rows(in.k);
    PairwiseRequest req;
    req.attention_mse = req.kernel_mse = req.negative_fraction = true;
    req.theory = kernel_theory(f, X, Y, m);
    req.causal = causal;
    const PairwiseResult p1 = pairwise_metrics(X, Y, a.q, a.k, req, 1);
    const PairwiseResult p2 = pairwise_metrics(X, Y, a.q, a.k, req, 2);
    REQUIRE(p1.attention_mse == p2.attention_mse);   // bit-identical for any thread count
    REQUIRE(p1.kernel_mse == p2.kernel_mse);
    // Full matrices.
    const std::vector<double> x2 = row_norms2(X), y2 = row_norms2(Y);
    const LMat kq = unshifted_features(kind, X, W), kk = unshifted_features(kind, Y, W);
    long double att = 0, ker = 0, th = 0, neg = 0, pairs = 0;
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t n = causal ? i + 1 : L;
        std::vector<long double> s(n), k(n);
        long double zs = 0, zk = 0;
        for (std::size_t j = 0; j < n; ++j) {
            long double xy = 0, kv = 0;
            for (std::size_t c = 0; c < d; ++c) xy += (long double)X(i, c) * Y(j, c);
            for (std::size_t c = 0; c < kq.shape(1); ++c) kv += kq(i, c) * kk(j, c);
            s[j] = std::exp(xy);
            k[j] = kv;
            zs += s[j];
            zk += kv;
            ker += (s[j] - kv) * (s[j] - kv);
            th += *f->pair_mse(x2[i], y2[j], double(xy), m, d);
        }
        for (std::size_t j = 0; j < n; ++j) {
            att += (s[j] / zs - k[j] / zk) * (s[j] / zs - k[j] / zk);
            neg += (k[j] / zk < 0);
        }
        pairs += n;
    }
    REQUIRE(p1.attention_mse == Approx(double(att / pairs)).epsilon(1e-9));
    REQUIRE(p1.kernel_mse == Approx(double(ker / pairs)).epsilon(1e-9));
    REQUIRE(p1.kernel_mse_theory == Approx(double(th / pairs)).epsilon(1e-12));
    REQUIRE(p1.negative_fraction == double(neg / pairs));
    if (kind == std::string("trig")) REQUIRE(p1.negative_fraction > 0.0);
}

TEST_CASE("causal linear attention over several chunks equals the masked A_hat V, whatever the thread count",
          "[attention]") {
    // 2500 rows: chunks of 1024, 1024 and 452, the last step of each partial. Key norms grow
    // along the sequence, so the largest key log scale keeps growing inside every chunk: the
    // chunk starts, the running sums and the steps' own rows are all rescaled somewhere.
    const std::size_t L = 2500, d = 8, dv = 5;
    const std::string kind = GENERATE(std::string("positive"), std::string("hyperbolic"));
    CAPTURE(kind);
    QKV in = random_inputs(21, L, d, dv, 1.0);
    for (std::size_t j = 0; j < L; ++j)
        for (std::size_t c = 0; c < d; ++c) in.k(j, c) *= 0.2 + 0.8 * double(j) / double(L);
    const FeatureMapPtr f = map_named(kind);
    const Mat<double> W = draw_projection(Projection("orthogonal"), 16, d, 21, 0);
    const Estimator<double> est = fitted(f, W, in.q, in.k);
    const Approximation<double> a = favor_attention(est, in.q, in.k, in.v, true, 1);
    const bool same_threads = a.out == favor_attention(est, in.q, in.k, in.v, true, 3).out;
    REQUIRE(same_threads);
    const Mat<double> fused1 = favor_forward(est, in.q, in.k, in.v, true, 1);
    const bool same_fused = fused1 == favor_forward(est, in.q, in.k, in.v, true, 2);
    REQUIRE(same_fused);
    // The running max of the key log scales does grow in every chunk.
    for (std::size_t c0 = 1024; c0 < L; c0 += 1024) {
        const double before = *std::max_element(a.k.log_scale.begin(), a.k.log_scale.begin() + c0);
        REQUIRE(*std::max_element(a.k.log_scale.begin() + c0, a.k.log_scale.begin() + std::min(L, c0 + 1024)) > before);
    }
    double worst = 0, worst_fused = 0;
    for (std::size_t i = 0; i < L; i += 7) {   // every 7th row: all chunks, all step positions
        const std::vector<double> o = explicit_row(a, in.v, i, true);
        for (std::size_t c = 0; c < dv; ++c) {
            worst = std::max(worst, std::fabs(a.out(i, c) - o[c]) / std::max(1.0, std::fabs(o[c])));
            worst_fused = std::max(worst_fused, std::fabs(fused1(i, c) - o[c]) / std::max(1.0, std::fabs(o[c])));
        }
    }
    REQUIRE(worst <= 1e-10);
    REQUIRE(worst_fused <= 1e-10);
}

TEST_CASE("the max-shift stabilisation changes no output beyond rounding", "[attention][stability]") {
    const double scale = GENERATE(1.0, 3.0);
    const std::string kind = GENERATE(std::string("positive"), std::string("trig"), std::string("hyperbolic"));
    CAPTURE(scale, kind);
    const std::size_t L = 300, d = 16, m = 32;
    const QKV in = random_inputs(6, L, d, d, scale);
    const FeatureMapPtr f = map_named(kind);
    const Mat<double> W = draw_projection(Projection("orthogonal"), m, d, 6, 0);
    const Approximation<double> a = favor_attention(fitted(f, W, in.q, in.k), in.q, in.k, in.v);
    // Reference: unshifted features and linear attention in long double.
    const LMat pq = unshifted_features(kind, scale_rows(in.q), W), pk = unshifted_features(kind, scale_rows(in.k), W);
    const std::size_t F = pq.shape(1);
    std::vector<long double> ksum(F, 0), kv(F * d, 0);
    for (std::size_t j = 0; j < L; ++j)
        for (std::size_t c = 0; c < F; ++c) {
            ksum[c] += pk(j, c);
            for (std::size_t e = 0; e < d; ++e) kv[c * d + e] += pk(j, c) * in.v(j, e);
        }
    double worst = 0;
    for (std::size_t i = 0; i < L; ++i) {
        long double den = 0;
        for (std::size_t c = 0; c < F; ++c) den += pq(i, c) * ksum[c];
        for (std::size_t e = 0; e < d; ++e) {
            long double num = 0;
            for (std::size_t c = 0; c < F; ++c) num += pq(i, c) * kv[c * d + e];
            worst = std::max(worst, double(std::fabs(a.out(i, e) - num / den) / (1 + std::fabs(num / den))));
        }
    }
    // Rounding of the double path; trig denominators can be small, which magnifies it.
    REQUIRE(worst < (kind == std::string("trig") ? 1e-8 : 1e-11));
}

TEST_CASE("float32 features stay finite where the unshifted exp overflows float32", "[attention][stability]") {
    // Scale 4, d = 256: |x|^2/2 is about 128, so exp(|x|^2/2) (trig) overflows float32 (max e^88.7).
    const std::size_t L = 64, d = 256, m = 64;
    const QKV in = random_inputs(8, L, d, d, 4.0);
    for (std::string kind : {std::string("trig"), std::string("positive"), std::string("hyperbolic")}) {
        CAPTURE(kind);
        const FeatureMapPtr f = map_named(kind);
        const Mat<double> W = draw_projection(Projection("orthogonal"), m, d, 8, 0);
        if (kind == std::string("trig")) {
            const std::vector<double> x2 = row_norms2(scale_rows(in.q));
            REQUIRE(!std::isfinite(std::exp(float(x2[0] / 2))));
        }
        const Mat<float> q32 = cast_mat<float>(in.q), k32 = cast_mat<float>(in.k);
        const Approximation<float> a32 =
            favor_attention(fitted(f, cast_mat<float>(W), q32, k32), q32, k32, cast_mat<float>(in.v));
        const Approximation<double> a64 = favor_attention(fitted(f, W, in.q, in.k), in.q, in.k, in.v);
        REQUIRE(count_nonfinite(a32.out) == 0);
        if (kind != std::string("trig")) REQUIRE(output_mse(a64.out, a32.out) < 1e-8);
    }
}

TEST_CASE("the fused forward equals favor_attention and ignores the thread count", "[attention]") {
    const std::size_t L = GENERATE(1, 37, 1500, 3000);   // 1500 and 3000 span several key blocks
    const std::string kind = GENERATE(std::string("positive"), std::string("hyperbolic"), std::string("trig"), std::string("oprf"));
    const bool causal = GENERATE(false, true);   // causal: the prefix-sum pass, queries per chunk
    CAPTURE(L, kind, causal);
    const QKV in = random_inputs(12, L, 16, 8, 1.0);
    const FeatureMapPtr f = map_named(kind);   // oprf: "A": "optimal" by default
    const Mat<double> W = draw_projection(Projection("orthogonal"), 64, 16, 12, 0);
    const Mat<double> ref = favor_attention(fitted(f, W, in.q, in.k), in.q, in.k, in.v, causal).out;
    const Mat<double> one = favor_forward(fitted(f, W, in.q, in.k), in.q, in.k, in.v, causal, 1);
    const Mat<double> three = favor_forward(fitted(f, W, in.q, in.k), in.q, in.k, in.v, causal, 3);
    const bool same = one == three;
    REQUIRE(same);
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::fabs(ref.data()[i] - one.data()[i]));
        scale = std::max(scale, std::fabs(ref.data()[i]));
    }
    // Rounding only; trig outputs cancel (denominators near zero), which magnifies it.
    REQUIRE(worst <= (kind == std::string("trig") ? 1e-9 : 1e-13) * scale);
}

namespace {
// The pairwise metrics as they were defined on whole matrices (docs/design.md section 3),
// written out as double loops over favor_attention's features: A_hat_ij = K_ij w_ij / sum_j
// K_ij w_ij, w_ij = exp(lk_j - P_i), P_i the largest key log scale row i sees, or (maps that
// are not row-normalised) K_ij with the shifts undone.
PairwiseResult pairwise_by_loops(const Mat<double>& X, const Mat<double>& Y, const Features<double>& fq,
                                 const Features<double>& fk, bool causal, bool normalised) {
    const std::size_t L = X.shape(0), Lk = Y.shape(0), d = X.shape(1), F = fq.phi.shape(1);
    double att = 0, tv = 0, kl = 0, ker = 0, neg = 0, pairs = 0;
    bool kl_undefined = false;
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t n = causal ? std::min(Lk, i + 1) : Lk;
        std::vector<double> s(n), k(n);
        double mx = -INFINITY, P = -INFINITY, z = 0, D = 0, row_tv = 0;
        for (std::size_t j = 0; j < n; ++j) {
            for (std::size_t c = 0; c < d; ++c) s[j] += X(i, c) * Y(j, c);
            for (std::size_t c = 0; c < F; ++c) k[j] += fq.phi(i, c) * fk.phi(j, c);
            mx = std::max(mx, s[j]);
            P = std::max(P, fk.log_scale[j]);
        }
        for (std::size_t j = 0; j < n; ++j) z += std::exp(s[j] - mx), D += k[j] * std::exp(fk.log_scale[j] - P);
        for (std::size_t j = 0; j < n; ++j) {
            const double a = std::exp(s[j] - mx) / z;
            const double ah = normalised ? k[j] * std::exp(fk.log_scale[j] - P) / D
                                         : k[j] * std::exp(fq.log_scale[i] + fk.log_scale[j]);
            att += (a - ah) * (a - ah);
            row_tv += std::fabs(a - ah);
            neg += ah >= 0 ? 0 : 1;
            if (!(ah > 0)) kl_undefined = true;
            else if (a > 0) kl += a * (s[j] - mx - std::log(z) - std::log(ah));
            const double est = k[j] == 0 ? 0 : std::copysign(std::exp(fq.log_scale[i] + fk.log_scale[j] + std::log(std::fabs(k[j]))), k[j]);
            ker += (std::exp(s[j]) - est) * (std::exp(s[j]) - est);
        }
        tv += 0.5 * row_tv;
        pairs += double(n);
    }
    PairwiseResult r;
    r.attention_mse = att / pairs, r.attention_tv = tv / double(L), r.kernel_mse = ker / pairs;
    r.negative_fraction = neg / pairs;
    if (!kl_undefined) r.attention_kl = kl / double(L);
    return r;
}
}  // namespace

TEST_CASE("the streamed pass from an estimator equals the whole-matrix definition", "[metrics]") {
    // L not a multiple of the 256-row blocks and tiles; positive keys have differing log scales.
    const std::string kind = GENERATE(std::string("positive"), std::string("nystrom"));
    const bool causal = GENERATE(false, true);
    if (kind == "nystrom" && causal) return;   // nystrom has no causal form
    CAPTURE(kind, causal);
    const std::size_t L = 600, d = 8, m = 16;
    const QKV in = random_inputs(9, L, d, d, 1.5);
    const FeatureMapPtr f = map_named(kind);
    const Mat<double> W = kind == "nystrom" ? Mat<double>(xt::zeros<double>({m, d})) : draw_projection(Projection("iid"), m, d, 9, 0);
    const Estimator<double> est = fitted(f, W, in.q, in.k);
    const Approximation<double> a = favor_attention(est, in.q, in.k, in.v, causal);
    const Mat<double> X = scale_rows(in.q), Y = scale_rows(in.k);
    if (kind == "positive")
        REQUIRE(std::any_of(a.k.log_scale.begin(), a.k.log_scale.end(), [&](double v) { return v != a.k.log_scale[0]; }));
    PairwiseRequest req;
    req.attention_mse = req.attention_tv = req.attention_kl = req.negative_fraction = true;
    req.kernel_mse = f->is_kernel();
    req.causal = causal;
    req.row_normalised = f->row_normalised();
    auto streamed = [&](int threads) {
        return pairwise_metrics(X, Y, softmax_rows(X, Y, causal, threads), EstimatorRows<double>(est, in.q, Side::query),
                                EstimatorRows<double>(est, in.k, Side::key), req, threads);
    };
    const PairwiseResult p1 = streamed(1), p2 = streamed(2);
    for (auto field : {&PairwiseResult::attention_mse, &PairwiseResult::attention_tv, &PairwiseResult::attention_kl,
                       &PairwiseResult::kernel_mse, &PairwiseResult::negative_fraction})
        REQUIRE(std::memcmp(&(p1.*field), &(p2.*field), sizeof(double)) == 0);   // bitwise, NaN included
    // The key features kept from the key sweep (the default here) or made again for each of the
    // three query blocks: the same bits, per row too.
    REQUIRE(pairwise_keeps_keys(L, est.map->num_features(m, d)));
    PairwiseRequest remade = req;
    remade.keep_key_features = false;
    std::vector<PairwiseSums> rows_kept, rows_remade;
    const SoftmaxRows sm = softmax_rows(X, Y, causal, 2);
    const EstimatorRows<double> fq(est, in.q, Side::query), fk(est, in.k, Side::key);
    const PairwiseResult pk = pairwise_metrics(X, Y, sm, fq, fk, req, 2, &rows_kept);
    const PairwiseResult pr = pairwise_metrics(X, Y, sm, fq, fk, remade, 3, &rows_remade);
    for (auto field : {&PairwiseResult::attention_mse, &PairwiseResult::attention_tv, &PairwiseResult::attention_kl,
                       &PairwiseResult::kernel_mse, &PairwiseResult::negative_fraction})
        REQUIRE(std::memcmp(&(pk.*field), &(pr.*field), sizeof(double)) == 0);
    REQUIRE(rows_kept.size() == L);
    for (std::size_t i = 0; i < L; ++i) {
        REQUIRE(std::memcmp(&rows_kept[i].attention, &rows_remade[i].attention, sizeof(double)) == 0);
        REQUIRE(std::memcmp(&rows_kept[i].kl, &rows_remade[i].kl, sizeof(double)) == 0);
    }
    const PairwiseResult ref = pairwise_by_loops(X, Y, a.q, a.k, causal, f->row_normalised());
    REQUIRE(p1.attention_mse == Approx(ref.attention_mse).epsilon(1e-12));
    REQUIRE(p1.attention_tv == Approx(ref.attention_tv).epsilon(1e-12));
    REQUIRE(std::isnan(p1.attention_kl) == std::isnan(ref.attention_kl));
    if (!std::isnan(ref.attention_kl)) REQUIRE(p1.attention_kl == Approx(ref.attention_kl).epsilon(1e-10));
    REQUIRE(p1.negative_fraction == ref.negative_fraction);
    if (req.kernel_mse) REQUIRE(p1.kernel_mse == Approx(ref.kernel_mse).epsilon(1e-12));
    // The same from the whole matrices (MatrixRows): the same features, so the same bits.
    const PairwiseResult pm = pairwise_metrics(X, Y, a.q, a.k, req, 1);
    REQUIRE(std::memcmp(&pm.attention_mse, &p1.attention_mse, sizeof(double)) == 0);
    REQUIRE(std::memcmp(&pm.attention_tv, &p1.attention_tv, sizeof(double)) == 0);
}

TEST_CASE("feature_rows gives the bits of compute_features' rows", "[features]") {
    // A common key shift (epsilon > 0), half rounding, unshifted features; rows from offset 256.
    const std::size_t L = 700, d = 8, m = 16;
    const QKV in = random_inputs(4, L, d, d, 1.0);
    const Mat<float> q = cast_mat<float>(in.q), W = cast_mat<float>(draw_projection(Projection("iid"), m, d, 4, 0));
    const double xs = 1.0 / std::pow(double(d), 0.25);
    for (const auto& c : {std::tuple{"positive", 0.0, Rounding::none, true}, std::tuple{"positive", 1e-3, Rounding::none, true},
                          std::tuple{"hyperbolic", 1e-3, Rounding::fp16, true}, std::tuple{"positive", 0.0, Rounding::bf16, false}}) {
        const std::string name = std::get<0>(c);
        const double eps = std::get<1>(c);
        const Rounding rounding = std::get<2>(c);
        const bool shift = std::get<3>(c);
        CAPTURE(name, eps, shift);
        const FeatureMapPtr f = map_named(name, {{"epsilon", eps}});
        for (Side side : {Side::query, Side::key}) {
            const Features<float> whole = compute_features(*f, q, xs, W, side, 2, rounding, shift);
            const double ks = side == Side::key ? common_key_shift(*f, q, xs, W, 2, rounding) : 0.0;
            const std::size_t F = whole.phi.shape(1), r0 = 256, n = L - r0;
            std::vector<float> phi(n * F);
            std::vector<double> lg(n);
            feature_rows(*f, q, r0, n, xs, W, side, phi.data(), lg.data(), rounding, shift, ks);
            REQUIRE(std::memcmp(phi.data(), whole.phi.data() + r0 * F, n * F * sizeof(float)) == 0);
            REQUIRE(std::memcmp(lg.data(), whole.log_scale.data() + r0, n * sizeof(double)) == 0);
        }
    }
}

// Small calls run on the caller's thread alone (threads_for, parallel.hpp): the timing
// experiment's shapes (float32, d = dv = 64) from L = 64, where every region is below the
// threshold, to L = 512, where the key and query regions of m = 64 and exact attention get two
// threads; the outputs are the same bits for 1, 2 and 3 threads either way.
TEST_CASE("small forwards skip the thread pool and give the bits of any thread count", "[attention][threads]") {
    REQUIRE(threads_for(0.0, 4) == 1);
    REQUIRE(threads_for(1.9 * kParallelMinFlops, 4) == 1);
    REQUIRE(threads_for(2.5 * kParallelMinFlops, 4) == 2);
    REQUIRE(threads_for(1e15, 4) == 4);
    REQUIRE(threads_for(1e15, 1) == 1);
    const std::size_t d = 64, m = GENERATE(64, 256), L = GENERATE(64, 128, 512);
    CAPTURE(L, m);
    const double region = double(L) * (2.0 * double(m * d) + 2.0 * double(m * (d + 1)));   // keys: features + KV1
    const double exact = 2.0 * double(L * L) * double(2 * d);
    if (L == 64 && m == 64) REQUIRE((threads_for(region, 2) == 1 && threads_for(exact, 2) == 1));
    if (L == 512) REQUIRE((threads_for(region, 2) == 2 && threads_for(exact, 2) == 2));
    const QKV in = random_inputs(14, L, d, d, 1.0);
    const Mat<float> q = cast_mat<float>(in.q), k = cast_mat<float>(in.k), v = cast_mat<float>(in.v);
    const Mat<float> W = cast_mat<float>(draw_projection(Projection("orthogonal"), m, d, 14, 0));
    const Estimator<float> est = fitted(map_named("positive"), W, q, k);
    const Mat<float> f1 = favor_forward(est, q, k, v, false, 1), e1 = exact_attention(q, k, v, false, 1);
    for (int threads : {2, 3}) {
        const bool same = favor_forward(est, q, k, v, false, threads) == f1 && exact_attention(q, k, v, false, threads) == e1;
        REQUIRE(same);
    }
}

TEST_CASE("favor_feature_pass runs where the fused forward runs and refuses where it would not", "[attention]") {
    const QKV in = random_inputs(12, 300, 16, 8, 1.0);
    const Mat<double> W = draw_projection(Projection("orthogonal"), 64, 16, 12, 0);
    Estimator<double> e = fitted(map_named("positive"), W, in.q, in.k);
    REQUIRE_NOTHROW(favor_feature_pass(e, in.q, in.k, 2));
    e.shift = false;   // unshifted features: favor_forward takes favor_attention's path
    REQUIRE_FALSE(forward_fused(e.ready_map(), e.rounding, e.shift, false));
    REQUIRE_THROWS_AS(favor_feature_pass(e, in.q, in.k, 2), std::logic_error);
}
