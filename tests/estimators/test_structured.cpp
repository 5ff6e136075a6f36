// Structured and coupled projections ("Beyond FAVOR+"): SimRF simplex blocks, SORF
// Hadamard blocks, products of Givens rotations. Fast paths against dense references, block
// geometry to 1e-12, seeding purity, and the estimators' statistics (tolerances are numbers
// of standard errors from the variance, exact or sample).
#include <catch2/catch.hpp>
#include <cmath>
#include <xtensor/xview.hpp>

#include "helpers.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/structured.hpp"

using namespace favor;
using favor_test::dot_rows;

namespace {


double cos_rows(const Mat<double>& W, std::size_t a, std::size_t b) {
    return dot_rows(W, a, b) / std::sqrt(dot_rows(W, a, a) * dot_rows(W, b, b));
}

// Naive reference: the normalised Sylvester-Hadamard matrix H_p / sqrt(p), built densely.
Mat<double> dense_hadamard(std::size_t p) {
    Mat<double> H = Mat<double>::from_shape({p, p});
    for (std::size_t i = 0; i < p; ++i)
        for (std::size_t j = 0; j < p; ++j) {
            // (H_p)_ij = (-1)^popcount(i & j)
            std::size_t b = i & j, bits = 0;
            for (; b; b >>= 1) bits += b & 1;
            H(i, j) = (bits % 2 ? -1.0 : 1.0) / std::sqrt(double(p));
        }
    return H;
}

Mat<double> matmul(const Mat<double>& A, const Mat<double>& B) {
    Mat<double> C = xt::zeros<double>({A.shape(0), B.shape(1)});
    for (std::size_t i = 0; i < A.shape(0); ++i)
        for (std::size_t k = 0; k < A.shape(1); ++k)
            for (std::size_t j = 0; j < B.shape(1); ++j) C(i, j) += A(i, k) * B(k, j);
    return C;
}

Mat<double> diag(const std::vector<double>& v) {
    Mat<double> D = xt::zeros<double>({v.size(), v.size()});
    for (std::size_t i = 0; i < v.size(); ++i) D(i, i) = v[i];
    return D;
}

// Dense sqrt(p) H D1 H D2 H D3 (Yu et al. 2016, eq. 4).
Mat<double> dense_sorf(const SorfBlock& b) {
    const Mat<double> H = dense_hadamard(b.p);
    Mat<double> M = matmul(matmul(matmul(matmul(matmul(H, diag(b.d1)), H), diag(b.d2)), H), diag(b.d3));
    return M * std::sqrt(double(b.p));
}

using favor_test::Pair;
using favor_test::Sample;

// N positive-feature estimates of SM at pair pr; trial t uses W(seed, p, m, d, t).
Sample sample_positive(Projection p, std::size_t m, const Pair& pr, std::size_t N, std::uint64_t seed) {
    return favor_test::sample(*favor_test::map_named("positive"), p, m, pr, N, seed);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Hadamard (SORF)

TEST_CASE("fwht equals the dense normalised Hadamard product", "[structured]") {
    const std::size_t p = GENERATE(1, 2, 4, 8, 64, 256);
    CAPTURE(p);
    const Mat<double> H = dense_hadamard(p);
    std::vector<double> x(p), fast(p);
    fill_normal(stream_key({1, p}), x.data(), p);
    fast = x;
    fwht(fast.data(), p);
    for (std::size_t i = 0; i < p; ++i) {
        double ref = 0;
        for (std::size_t j = 0; j < p; ++j) ref += H(i, j) * x[j];
        REQUIRE(std::fabs(fast[i] - ref) < 1e-12);
    }
    fwht(fast.data(), p);   // H is an involution
    for (std::size_t i = 0; i < p; ++i) REQUIRE(std::fabs(fast[i] - x[i]) < 1e-12);
}

TEST_CASE("sorf_apply and sorf_rows equal the dense sqrt(p) H D1 H D2 H D3", "[structured]") {
    const std::size_t d = GENERATE(1, 3, 4, 6, 16, 20, 64);
    const std::size_t p = next_pow2(d);
    CAPTURE(d, p);
    const SorfBlock b = sorf_block(stream_key({2, d}), p);
    const Mat<double> M = dense_sorf(b);
    std::vector<double> x(p), fast(p);
    fill_normal(stream_key({3, d}), x.data(), p);
    sorf_apply(b, x.data(), fast.data());
    for (std::size_t i = 0; i < p; ++i) {
        double ref = 0;
        for (std::size_t j = 0; j < p; ++j) ref += M(i, j) * x[j];
        REQUIRE(std::fabs(fast[i] - ref) < 1e-12);
    }
    // Rows for inputs zero-padded from d to p: the first d columns of M.
    const Mat<double> rows = sorf_rows(b, d);
    REQUIRE(rows.shape(0) == p);
    REQUIRE(rows.shape(1) == d);
    for (std::size_t i = 0; i < p; ++i)
        for (std::size_t j = 0; j < d; ++j) REQUIRE(std::fabs(rows(i, j) - M(i, j)) < 1e-12);
}

TEST_CASE("hadamard-fixed blocks: orthogonal rows of norm sqrt(d) for d = 2^k, orthogonal columns when padded", "[structured]") {
    const std::size_t d = GENERATE(4, 16, 64, 3, 6, 20);
    const std::size_t m = GENERATE(3, 16, 40, 128);
    const std::size_t p = next_pow2(d);
    CAPTURE(d, p, m);
    const Mat<double> W = draw_projection(Projection("hadamard-fixed"), m, d, 7, 3);
    REQUIRE(W.shape(0) == m);
    REQUIRE(W.shape(1) == d);
    for (std::size_t a = 0; a < m; ++a) {
        if (p == d) {   // rows within a block orthogonal, norm sqrt(d) exactly
            REQUIRE(std::fabs(std::sqrt(dot_rows(W, a, a)) - std::sqrt(double(d))) < 1e-12);
            for (std::size_t b = a + 1; b < m && b / p == a / p; ++b) REQUIRE(std::fabs(cos_rows(W, a, b)) < 1e-12);
        }
    }
    // Any d: the p rows of a full block are the first d columns of a p x p matrix with
    // orthogonal rows of norm sqrt(p), so the block's columns are orthogonal, norm^2 p.
    for (std::size_t b0 = 0; b0 + p <= m; b0 += p)
        for (std::size_t i = 0; i < d; ++i)
            for (std::size_t j = 0; j < d; ++j) {
                double s = 0;
                for (std::size_t r = b0; r < b0 + p; ++r) s += W(r, i) * W(r, j);
                REQUIRE(std::fabs(s - (i == j ? double(p) : 0.0)) < 1e-12 * double(p));
            }
}

TEST_CASE("hadamard rows: the hadamard-fixed rows rescaled by chi(p) / sqrt(p)", "[structured]") {
    const std::size_t d = GENERATE(4, 3, 20, 64);
    const std::size_t p = next_pow2(d), m = 4096;
    CAPTURE(d, p);
    const Mat<double> W = draw_projection(Projection("hadamard"), m, d, 7, 3);
    const Mat<double> F = draw_projection(Projection("hadamard-fixed"), m, d, 7, 3);
    // Row r of W is s_r times row r of F with s_r > 0, one factor for the whole row.
    std::vector<double> s;
    for (std::size_t r = 0; r < m; ++r) {
        std::size_t c0 = 0;   // the largest entry of F's row
        for (std::size_t c = 1; c < d; ++c)
            if (std::fabs(F(r, c)) > std::fabs(F(r, c0))) c0 = c;
        if (F(r, c0) == 0.0) {   // padding: the unit p-row can be +-e_j with j >= d
            for (std::size_t c = 0; c < d; ++c) REQUIRE(W(r, c) == 0.0);
            continue;
        }
        const double sr = W(r, c0) / F(r, c0);
        REQUIRE(sr > 0.0);
        for (std::size_t c = 0; c < d; ++c) REQUIRE(std::fabs(W(r, c) - sr * F(r, c)) < 1e-12 * sr * std::sqrt(double(p)));
        s.push_back(sr);
    }
    REQUIRE(s.size() > m / 2);
    // (sqrt(p) s_r)^2 = chi^2(p), independent of the direction: over n rows the mean of s_r^2
    // is 1 with standard error sqrt(2 / (p n)), and the mean of s_r^4 is E chi^4 / p^2 = 1 + 2/p.
    const double n = double(s.size());
    double m2 = 0, m4 = 0;
    for (double v : s) {
        m2 += v * v / n;
        m4 += v * v * v * v / n;
    }
    const double se2 = std::sqrt(2.0 / (double(p) * n));
    CAPTURE(m2, m4, se2);
    REQUIRE(std::fabs(m2 - 1.0) < 4.0 * se2);
    const double e4 = 1.0 + 2.0 / double(p);   // E chi^8 = p (p+2) (p+4) (p+6)
    const double var4 = double(p) * (p + 2) * (p + 4) * (p + 6) / std::pow(double(p), 4) - e4 * e4;
    REQUIRE(std::fabs(m4 - e4) < 4.0 * std::sqrt(var4 / n));
}

namespace {
// E exp(r t) for r ~ chi(k), by its power series: E r^n = 2^(n/2) Gamma((k+n)/2) / Gamma(k/2).
double chi_mgf(double t, std::size_t k) {
    double sum = 1.0;
    for (int n = 1; n < 400; ++n) {
        const double log_term = n * std::log(std::fabs(t)) + 0.5 * n * std::log(2.0) + std::lgamma(0.5 * double(k + n)) -
                                std::lgamma(0.5 * double(k)) - std::lgamma(double(n) + 1.0);
        const double term = ((t < 0 && n % 2) ? -1.0 : 1.0) * std::exp(log_term);
        sum += term;
        if (std::fabs(term) < 1e-18 * std::fabs(sum)) break;
    }
    return sum;
}

// The exact mean of the SORF positive estimator with m = p rows at pr: the block is fixed by
// 3p signs (all 2^(3p) patterns equally likely); with chi(p) norms each row contributes the
// chi MGF at t = u . z (u its unit direction, z = x + y), times exp(-(|x|^2 + |y|^2) / 2).
double exact_sorf_mean(const Mat<double>& x, const Mat<double>& y, std::size_t p, bool chi_norms) {
    const std::size_t d = x.shape(1), n_bits = 3 * p;
    double xx = 0, yy = 0;
    std::vector<double> z(d);
    for (std::size_t c = 0; c < d; ++c) {
        z[c] = x(0, c) + y(0, c);
        xx += x(0, c) * x(0, c);
        yy += y(0, c) * y(0, c);
    }
    double mean = 0;
    const double patterns = std::ldexp(1.0, int(n_bits)), shift = std::exp(-0.5 * (xx + yy));
    for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << n_bits); ++bits) {
        SorfBlock b;
        b.p = p;
        for (auto* v : {&b.d1, &b.d2, &b.d3}) v->resize(p);
        for (std::size_t k = 0; k < n_bits; ++k) ((k < p) ? b.d1 : (k < 2 * p) ? b.d2 : b.d3)[k % p] = (bits >> k) & 1 ? -1.0 : 1.0;
        const Mat<double> rows = sorf_rows(b, d);   // sqrt(p) u, truncated to d columns
        for (std::size_t r = 0; r < p; ++r) {
            double t = 0;
            for (std::size_t c = 0; c < d; ++c) t += rows(r, c) * z[c];
            const double e = chi_norms ? chi_mgf(t / std::sqrt(double(p)), p) : std::exp(t);
            mean += e * shift / (double(p) * patterns);
        }
    }
    return mean;
}
}  // namespace

TEST_CASE("hadamard positive estimator: unbiased within statistical error, hadamard-fixed biased", "[structured][stats]") {
    // d = 4 (and d = 3, padded to p = 4): a block is fixed by 12 signs, so the estimator's
    // exact mean is an average over the 4096 sign patterns (and, for chi norms, the chi MGF).
    // hadamard-fixed (Yu et al.'s fixed norm sqrt(p)) is biased like SMREG: -1.6%, -0.25%,
    // -0.97% at the three d = 4 points. With chi(p) norms what is left comes from the discrete
    // directions (4th order in z): |bias| < 0.3% at every point, below the 4 standard errors
    // (about 1%) of 20000 trials, so the sampled mean is unbiased within statistical error.
    const std::size_t d = GENERATE(4, 3), p = 4, N = 20000;
    const auto pts = favor_test::small_norm_points();
    for (std::size_t i = 0; i < pts.size(); ++i) {
        Pair pr = pts[i];
        if (d == 3)   // drop the last coordinate: exercises the zero padding
            pr = favor_test::make_pair({pr.x(0, 0), pr.x(0, 1), pr.x(0, 2)}, {pr.y(0, 0), pr.y(0, 1), pr.y(0, 2)});
        const double exact = exact_sorf_mean(pr.x, pr.y, p, true), exact_fixed = exact_sorf_mean(pr.x, pr.y, p, false);
        const Sample s = sample_positive(Projection("hadamard"), p, pr, N, 4000 + i);
        const Sample f = sample_positive(Projection("hadamard-fixed"), p, pr, N, 4000 + i);
        const double se = s.se, se_f = f.se;
        CAPTURE(d, i, pr.sm(), exact / pr.sm() - 1, exact_fixed / pr.sm() - 1, s.mean, se, f.mean, se_f);
        // The samplers follow their exact laws.
        REQUIRE(std::fabs(s.mean - exact) < 4.0 * se);
        REQUIRE(std::fabs(f.mean - exact_fixed) < 4.0 * se_f);
        // hadamard: unbiased within statistical error; the exact residual is small.
        REQUIRE(std::fabs(s.mean - pr.sm()) < 4.0 * se);
        REQUIRE(std::fabs(exact - pr.sm()) < 0.003 * pr.sm());
        // The fixed norm's bias is several times larger wherever it is not tiny.
        if (std::fabs(exact_fixed - pr.sm()) > 0.005 * pr.sm()) REQUIRE(std::fabs(exact_fixed - pr.sm()) > 3.0 * std::fabs(exact - pr.sm()));
    }
}

// ---------------------------------------------------------------------------------------
// Givens

TEST_CASE("givens rotations: d ceil(log2 d) of them, distinct index pairs, unit (c, s)", "[structured]") {
    const std::size_t d = GENERATE(2, 3, 4, 5, 16, 64);
    std::size_t log2d = 0;
    while ((std::size_t(1) << log2d) < d) ++log2d;
    CAPTURE(d);
    std::vector<std::size_t> hits(d * d, 0);
    for (std::uint64_t k = 0; k < 200; ++k) {
        const auto g = givens_rotations(stream_key({5, k}), d);
        REQUIRE(g.size() == d * log2d);
        for (const Givens& r : g) {
            REQUIRE(r.i != r.j);
            REQUIRE(r.i < d);
            REQUIRE(r.j < d);
            REQUIRE(std::fabs(r.c * r.c + r.s * r.s - 1.0) < 1e-15);
            ++hits[r.i * d + r.j];
        }
    }
    // Every ordered pair is reachable (the pair is uniform over the d (d - 1) choices).
    if (d <= 5)
        for (std::size_t i = 0; i < d; ++i)
            for (std::size_t j = 0; j < d; ++j) REQUIRE((hits[i * d + j] > 0) == (i != j));
}

TEST_CASE("givens and simplex blocks: geometry to 1e-12, independent blocks", "[structured]") {
    const std::size_t d = GENERATE(2, 4, 5, 16, 64);
    const std::size_t m = GENERATE(3, 16, 40, 128);
    CAPTURE(d, m);
    const Mat<double> G = draw_projection(Projection("givens"), m, d, 7, 3);
    const Mat<double> S = draw_projection(Projection("simplex"), m, d, 7, 3);
    REQUIRE(G.shape() == S.shape());
    REQUIRE(G.shape(0) == m);
    REQUIRE(G.shape(1) == d);
    const double simplex_dot = -1.0 / double(d - 1);
    for (std::size_t a = 0; a < m; ++a)
        for (std::size_t b = a + 1; b < m && b / d == a / d; ++b) {
            REQUIRE(std::fabs(cos_rows(G, a, b)) < 1e-12);
            REQUIRE(std::fabs(cos_rows(S, a, b) - simplex_dot) < 1e-12);
        }
    // A full simplex block's unit directions sum to zero (they lie in a (d-1)-dim subspace).
    if (m >= d)
        for (std::size_t c = 0; c < d; ++c) {
            double s = 0;
            for (std::size_t r = 0; r < d; ++r) s += S(r, c) / std::sqrt(dot_rows(S, r, r));
            REQUIRE(std::fabs(s) < 1e-12);
        }
    // Blocks are drawn from their own streams (the TF code reuses one seed per block).
    if (m >= 2 * d) {
        double diff = 0;
        for (std::size_t c = 0; c < d; ++c)
            diff += std::fabs(G(0, c) / std::sqrt(dot_rows(G, 0, 0)) - G(d, c) / std::sqrt(dot_rows(G, d, d)));
        REQUIRE(diff > 1e-6);
    }
}

TEST_CASE("simplex_directions: unit rows, pairwise dot -1/(d-1)", "[structured]") {
    const std::size_t d = GENERATE(2, 3, 4, 16);
    const Mat<double> S = simplex_directions(d);
    for (std::size_t a = 0; a < d; ++a) {
        REQUIRE(std::fabs(dot_rows(S, a, a) - 1.0) < 1e-12);
        for (std::size_t b = a + 1; b < d; ++b) REQUIRE(std::fabs(dot_rows(S, a, b) + 1.0 / double(d - 1)) < 1e-12);
    }
}

TEST_CASE("structured W: own streams, simplex rows at cosine -1/(d-1)", "[structured]") {
    // Purity, nesting in m, orthogonality of givens and power-of-two hadamard blocks and the
    // d limits: test_projection_contract.cpp, for every projection.
    const std::size_t d = GENERATE(16, 6);
    for (Projection p : {Projection("simplex"), Projection("hadamard"), Projection("hadamard-fixed"), Projection("givens")}) {
        CAPTURE(d, p.name());
        const Mat<double> a = draw_projection(p, 40, d, 11, 2);
        // Independent of the ORF draw with the same values (own stream tags).
        const bool other_proj = draw_projection(Projection("orthogonal"), 40, d, 11, 2) != a;
        REQUIRE(other_proj);
        // Rows are coupled within a block: simplex rows have cosine -1/(d-1) (iid rows would not).
        if (p == Projection("simplex")) {
            const double cos01 = dot_rows(a, 0, 1) / std::sqrt(dot_rows(a, 0, 0) * dot_rows(a, 1, 1));
            REQUIRE(cos01 == Approx(-1.0 / double(d - 1)).margin(1e-12));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Estimator statistics

TEST_CASE("SimRF: unbiased, and its MSE is below ORF's at the d = m = 4 reference point", "[structured][stats]") {
    // Reference (docs/estimators.md, SimRF): iid 0.207, ORF about 0.17, SimRF about 0.06. Measured here
    // (and with numpy, 1e5 trials): ORF 0.186, SimRF 0.078; Theorem 2 bounds ORF by 0.189.
    const std::size_t N = 20000, m = 4;
    const Pair pr = favor_test::small_norm_points()[0];
    const Sample sim = sample_positive(Projection("simplex"), m, pr, N, 5000);
    const Sample orf = sample_positive(Projection("orthogonal"), m, pr, N, 5001);
    CAPTURE(sim.mean, sim.mse, sim.mse_se, orf.mean, orf.mse, orf.mse_se);
    // SimRF rows are marginally N(0, I) (uniform direction, chi(d) norm): exactly unbiased.
    REQUIRE(std::fabs(sim.mean - pr.sm()) < 4.0 * sim.se);
    // Independent samples: the difference has standard error sqrt(se_1^2 + se_2^2).
    REQUIRE(sim.mse + 4.0 * std::hypot(sim.mse_se, orf.mse_se) < orf.mse);
}

TEST_CASE("SimRF below ORF at the other small-norm points, and for two blocks", "[structured][stats]") {
    const std::size_t N = 20000;
    const std::size_t m = GENERATE(4, 8);
    const auto pts = favor_test::small_norm_points();
    for (std::size_t i = 1; i < pts.size(); ++i) {
        const Sample sim = sample_positive(Projection("simplex"), m, pts[i], N, 5100 + i);
        const Sample orf = sample_positive(Projection("orthogonal"), m, pts[i], N, 5200 + i);
        CAPTURE(m, i, sim.mse, sim.mse_se, orf.mse, orf.mse_se);
        REQUIRE(std::fabs(sim.mean - pts[i].sm()) < 4.0 * sim.se);
        REQUIRE(sim.mse + 4.0 * std::hypot(sim.mse_se, orf.mse_se) < orf.mse);
    }
}

TEST_CASE("givens positive estimator is unbiased within 4 standard errors for full blocks", "[structured][stats]") {
    // Full blocks (m a multiple of d): the rows' second moments average to I exactly (each
    // random-angle rotation acts doubly stochastically on the squared coordinates), so the
    // bias is of higher order; measured with numpy at 4e5 trials: +0.35% at the first point,
    // about 1 standard error of this 20000-trial test. Single rows of a partial block (m < d)
    // have anisotropic second moments after only d ceil(log2 d) rotations.
    const std::size_t N = 20000, m = 4;
    const auto pts = favor_test::small_norm_points();
    for (std::size_t i = 0; i < pts.size(); ++i) {
        const Sample s = sample_positive(Projection("givens"), m, pts[i], N, 6000 + i);
        CAPTURE(i, pts[i].sm(), s.mean, s.mse, s.se);
        REQUIRE(std::fabs(s.mean - pts[i].sm()) < 4.0 * s.se);
    }
}
