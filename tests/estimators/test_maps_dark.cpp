// dark: DARK's importance-weighted positive features (arXiv 2603.04127) with Sigma fitted to
// the queries' and keys' moments (docs/estimators.md, "dark"). Everything here is derived in
// the DARK form (W Sigma^{1/2}, the weight rho, the second moment with B = 2I - Sigma^{-1})
// independently of the library, which computes dark as sderf with A = (I - Sigma)/4.
#include <catch2/catch.hpp>
#include <cmath>
#include <xtensor-blas/xlinalg.hpp>

#include "helpers.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/projections.hpp"

using namespace favor;
using favor_test::map_named;
using favor_test::Pair;

namespace {

using Dense = xt::xtensor<double, 2>;

// n x d rows: coordinate c is N(mean[c], scale[c]^2), stream `key`.
Mat<double> gaussian_rows(std::uint64_t key, std::size_t n, const std::vector<double>& scale,
                          const std::vector<double>& mean) {
    const std::size_t d = scale.size();
    Mat<double> M = Mat<double>::from_shape({n, d});
    fill_normal(key, M.data(), M.size());
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < d; ++c) M(i, c) = mean[c] + scale[c] * M(i, c);
    return M;
}

// C = mean over all pairs (i, j) of z z^T, z = x_i + y_j, by its definition.
Dense pair_moment(const Mat<double>& X, const Mat<double>& Y) {
    const std::size_t d = X.shape(1);
    Dense C = xt::zeros<double>({d, d});
    const double n = double(X.shape(0) * Y.shape(0));
    for (std::size_t i = 0; i < X.shape(0); ++i)
        for (std::size_t j = 0; j < Y.shape(0); ++j)
            for (std::size_t a = 0; a < d; ++a)
                for (std::size_t b = 0; b < d; ++b) C(a, b) += (X(i, a) + Y(j, a)) * (X(i, b) + Y(j, b)) / n;
    return C;
}

// The stated minimiser of f(s) = (1/2) log s - (1/2) log(2 - 1/s) + 2 c s / (2 s - 1).
double sigma_of(double c) { return ((6 + 4 * c) + std::sqrt((6 + 4 * c) * (6 + 4 * c) - 32)) / 8; }

// Sigma = U diag(sigma_of(c)) U^T from C = U diag(c) U^T: Sigma, Sigma^{1/2}, log det Sigma.
struct Fit {
    Dense S, root;
    double log_det = 0;
    std::vector<double> c;
};
Fit fit_here(const Mat<double>& X, const Mat<double>& Y) {
    const auto e = xt::linalg::eigh(pair_moment(X, Y));
    const Dense& U = std::get<1>(e);
    const std::size_t d = X.shape(1);
    Fit f{xt::zeros<double>({d, d}), xt::zeros<double>({d, d}), 0.0, {}};
    for (std::size_t k = 0; k < d; ++k) {
        const double c = std::max(std::get<0>(e)(k), 0.0), s = sigma_of(c);
        f.c.push_back(c);
        f.log_det += std::log(s);
        for (std::size_t a = 0; a < d; ++a)
            for (std::size_t b = 0; b < d; ++b) {
                f.S(a, b) += s * U(a, k) * U(b, k);
                f.root(a, b) += std::sqrt(s) * U(a, k) * U(b, k);
            }
    }
    return f;
}

// phi_r(x) = m^{-1/2} exp(w'_r.x - |x|^2/2 + (1/4) log det Sigma - |w'_r|^2/4 + |w_r|^2/4),
// w'_r = Sigma^{1/2} w_r: a double loop per row and feature.
double dark_feature(const Fit& f, const Mat<double>& W, std::size_t r, const double* x) {
    const std::size_t d = W.shape(1), m = W.shape(0);
    double wx = 0, x2 = 0, wp2 = 0, w2 = 0;
    for (std::size_t a = 0; a < d; ++a) {
        double wp = 0;
        for (std::size_t b = 0; b < d; ++b) wp += f.root(a, b) * W(r, b);
        wx += wp * x[a];
        x2 += x[a] * x[a];
        wp2 += wp * wp;
        w2 += W(r, a) * W(r, a);
    }
    return std::exp(wx - x2 / 2 + f.log_det / 4 - wp2 / 4 + w2 / 4) / std::sqrt(double(m));
}

// E[Z^2] = det(Sigma)^{1/2} det(B)^{-1/2} exp(2 z^T B^{-1} z - |x|^2 - |y|^2), B = 2I - Sigma^{-1},
// z = x + y: the iid MSE of m features is (E[Z^2] - exp(2 x.y)) / m.
double dark_mse(const Fit& f, const double* x, const double* y, std::size_t d, std::size_t m) {
    const Dense B = 2.0 * xt::eye<double>(d) - xt::linalg::inv(f.S), Binv = xt::linalg::inv(B);
    double q = 0, x2 = 0, y2 = 0, xy = 0;
    for (std::size_t a = 0; a < d; ++a) {
        x2 += x[a] * x[a], y2 += y[a] * y[a], xy += x[a] * y[a];
        for (std::size_t b = 0; b < d; ++b) q += (x[a] + y[a]) * Binv(a, b) * (x[b] + y[b]);
    }
    const double log_ez2 = 0.5 * f.log_det - 0.5 * std::log(xt::linalg::det(B)) + 2 * q - x2 - y2;
    return (std::exp(log_ez2) - std::exp(2 * xy)) / double(m);
}

Pair row_pair(const Mat<double>& X, std::size_t i, const Mat<double>& Y, std::size_t j) {
    std::vector<double> x(X.shape(1)), y(X.shape(1));
    for (std::size_t c = 0; c < x.size(); ++c) x[c] = X(i, c), y[c] = Y(j, c);
    return favor_test::make_pair(x, y);
}

// Anisotropic d = 4 queries and keys (one direction 3-9x the others, key mean offset).
const std::vector<double> kQueryScale = {0.9, 0.1, 0.3, 0.15}, kKeyScale = {0.7, 0.2, 0.1, 0.25};
Mat<double> aniso_queries() { return gaussian_rows(stream_key({77, 1}), 12, kQueryScale, {0.1, 0, 0, 0}); }
Mat<double> aniso_keys() { return gaussian_rows(stream_key({77, 2}), 12, kKeyScale, {0.15, -0.05, 0, 0}); }

}  // namespace

TEST_CASE("dark's features are the DARK formula with the fitted Sigma", "[dark]") {
    const std::size_t d = 5, m = 7;
    const Mat<double> X = gaussian_rows(stream_key({78, 1}), 9, {1.2, 0.2, 0.4, 0.1, 0.6}, {0.2, 0, -0.1, 0, 0});
    const Mat<double> Y = gaussian_rows(stream_key({78, 2}), 6, {0.3, 0.9, 0.2, 0.5, 0.1}, {0, 0.1, 0, 0, 0.3});
    const Fit here = fit_here(X, Y);
    const FeatureMapPtr f = map_named("dark")->resolve(X, Y);
    REQUIRE(f->name() == "dark");
    for (const char* p : {"iid", "orthogonal"}) {
        const Mat<double> W = draw_projection(Projection(p), m, d, 78, 0);
        for (Side side : {Side::query, Side::key}) {
            const Mat<double>& Z = side == Side::query ? X : Y;
            const Features<double> F = compute_features(*f, Z, 1.0, W, side);
            for (std::size_t i = 0; i < Z.shape(0); ++i)
                for (std::size_t r = 0; r < m; ++r) {
                    const double want = dark_feature(here, W, r, &Z(i, 0));
                    const double got = F.phi(i, r) * std::exp(F.log_scale[i]);
                    CAPTURE(p, i, r, want, got);
                    REQUIRE(std::fabs(got - want) <= 1e-12 * want);
                }
        }
    }
    // The same estimator as sderf (Sigma = I - 4A): bit for bit the same features.
    const FeatureMapPtr s = map_named("sderf")->resolve(X, Y);
    const Mat<double> W = draw_projection(Projection("iid"), m, d, 78, 1);
    const bool same = compute_features(*f, X, 1.0, W, Side::query).phi == compute_features(*s, X, 1.0, W, Side::query).phi;
    REQUIRE(same);
}

TEST_CASE("dark's Sigma: the per-direction minimiser of the second moment, C by its definition", "[dark]") {
    for (double c : {0.0, 0.01, 0.3, 1.0, 4.0, 50.0}) {
        const double s = sigma_of(c);
        CAPTURE(c, s);
        REQUIRE(std::fabs(4 * s * s - (6 + 4 * c) * s + 2) < 1e-12 * (1 + c) * s);
        REQUIRE(s > 0.5);
        // The minimiser of f on (1/2, inf), by golden section in log(s - 1/2).
        auto f = [c](double v) {
            const double t = 0.5 + std::exp(v);
            return 0.5 * std::log(t) - 0.5 * std::log(2 - 1 / t) + 2 * c * t / (2 * t - 1);
        };
        double lo = -20, hi = 10;
        const double g = (std::sqrt(5.0) - 1) / 2;
        for (int it = 0; it < 200; ++it) {
            const double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
            (f(a) < f(b) ? hi : lo) = f(a) < f(b) ? b : a;
        }
        REQUIRE(std::fabs(0.5 + std::exp(0.5 * (lo + hi)) - s) < 1e-6 * s);
    }
    REQUIRE(sigma_of(0.0) == 1.0);
    REQUIRE(std::fabs(sigma_of(1e4) - 1e4 - 1.5) < 1e-3);
    // A hand-made X (3 x 2), Y (2 x 2): C = E x x^T + E y y^T + mu_x mu_y^T + mu_y mu_x^T.
    const Mat<double> X = {{1.0, 0.0}, {0.0, 2.0}, {1.0, 1.0}}, Y = {{0.5, -1.0}, {2.0, 0.0}};
    // By hand: E x x^T = [[2, 1], [1, 5]]/3, E y y^T = [[4.25, -0.5], [-0.5, 1]]/2,
    // mu_x = (2/3, 1), mu_y = (1.25, -0.5).
    const Dense C = pair_moment(X, Y);
    const double mx[2] = {2.0 / 3, 1.0}, my[2] = {1.25, -0.5};
    const double Exx[2][2] = {{2.0 / 3, 1.0 / 3}, {1.0 / 3, 5.0 / 3}}, Eyy[2][2] = {{2.125, -0.25}, {-0.25, 0.5}};
    for (std::size_t a = 0; a < 2; ++a)
        for (std::size_t b = 0; b < 2; ++b)
            REQUIRE(C(a, b) == Approx(Exx[a][b] + Eyy[a][b] + mx[a] * my[b] + my[a] * mx[b]).epsilon(1e-14));
    const nlohmann::json p = map_named("dark")->resolve(X, Y)->params();
    const std::vector<double> c = p.at("C_eigenvalues"), sigma = p.at("Sigma_eigenvalues");
    const auto e = xt::linalg::eigvalsh(C);
    for (std::size_t k = 0; k < 2; ++k) {
        REQUIRE(c[k] == Approx(e(k)).epsilon(1e-13));
        REQUIRE(sigma[k] == Approx(sigma_of(e(k))).epsilon(1e-13));
    }
}

TEST_CASE("dark is unbiased and its iid MSE is the closed form on anisotropic inputs", "[dark][stats]") {
    // Fitted to the anisotropic set and to the pair itself; pairs of small |x + y|^2 (the
    // squared error's own standard error exists there), 20000 trials of iid W, m = 8.
    const std::size_t N = 20000, m = 8, d = 4;
    const Mat<double> X = aniso_queries(), Y = aniso_keys();
    const std::vector<Pair> points = {row_pair(X, 0, Y, 0), row_pair(X, 3, Y, 5),
                                      favor_test::make_pair({.6, .05, -.1, .2}, {-.1, .35, .3, .05})};
    std::uint64_t seed = 9100;
    for (std::size_t pi = 0; pi < points.size(); ++pi)
        for (int to_pair : {0, 1}) {
            const Pair& pr = points[pi];
            const FeatureMapPtr f = to_pair ? map_named("dark")->resolve(pr.x, pr.y) : map_named("dark")->resolve(X, Y);
            const Fit here = to_pair ? fit_here(pr.x, pr.y) : fit_here(X, Y);
            const double theory = dark_mse(here, &pr.x(0, 0), &pr.y(0, 0), d, m);
            const double lib = *pair_mse_at(*f, pr.x, pr.y, m);
            const favor_test::Sample s = favor_test::sample(*f, Projection("iid"), m, pr, N, ++seed, false);
            CAPTURE(pi, to_pair, pr.z2(), pr.sm(), s.mean, s.se, theory, lib, s.mse, s.mse_se);
            REQUIRE(std::fabs(lib - theory) <= 1e-10 * theory);   // pair_mse_rows is this closed form
            REQUIRE(std::fabs(s.mean - pr.sm()) < 4.0 * std::sqrt(theory / double(N)));
            REQUIRE(std::fabs(s.mse - theory) < 4.0 * s.mse_se);
        }
    // Orthogonal W: unbiased too (each row is N(0, I_d)).
    const FeatureMapPtr f = map_named("dark")->resolve(X, Y);
    const double var = m * dark_mse(fit_here(X, Y), &points[1].x(0, 0), &points[1].y(0, 0), d, m);
    const double mean = favor_test::sample(*f, Projection("orthogonal"), d, points[1], 5000, ++seed, false).mean;
    CAPTURE(mean, points[1].sm(), var);
    REQUIRE(std::fabs(mean - points[1].sm()) < 4.0 * std::sqrt(var / double(d) / 5000.0));
}

TEST_CASE("dark's mean MSE is below positive's on anisotropic inputs", "[dark]") {
    // d = 16, 48 queries and 48 keys: coordinate 0 has scale 0.6 (queries) and 0.5 (keys),
    // the rest 0.15, key mean 0.1 on coordinate 0; m = 64; closed-form iid MSE averaged over
    // all pairs (measured: dark 0.0411, positive 0.161).
    const std::size_t d = 16, m = 64;
    std::vector<double> sq(d, 0.15), sk(d, 0.15), mq(d, 0.0), mk(d, 0.0);
    sq[0] = 0.6, sk[0] = 0.5, mk[0] = 0.1;
    const Mat<double> X = gaussian_rows(stream_key({79, 1}), 48, sq, mq), Y = gaussian_rows(stream_key({79, 2}), 48, sk, mk);
    auto mean_mse = [&](const FeatureMap& f) {
        const FeatureMap::PairMse mse = f.pair_mse_rows(X, Y, m);
        double s = 0;
        for (std::size_t i = 0; i < X.shape(0); ++i)
            for (std::size_t j = 0; j < Y.shape(0); ++j) {
                double xy = 0;
                for (std::size_t c = 0; c < d; ++c) xy += X(i, c) * Y(j, c);
                s += mse(i, j, xy);
            }
        return s / double(X.shape(0) * Y.shape(0));
    };
    const double dark = mean_mse(*map_named("dark")->resolve(X, Y)), positive = mean_mse(*map_named("positive"));
    CAPTURE(dark, positive);
    REQUIRE(dark < 0.5 * positive);
}
