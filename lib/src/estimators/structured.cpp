#include "favor/estimators/structured.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <xtensor/xbuilder.hpp>
#include <xtensor-blas/xlinalg.hpp>

#include "favor/core/rng.hpp"

namespace favor {

Mat<double> orthogonal_block(std::uint64_t key, std::size_t d, bool sign_fix) {
    xt::xtensor<double, 2> g = xt::xtensor<double, 2>::from_shape({d, d});
    fill_normal(key, g.data(), g.size());
    auto qr = xt::linalg::qr(g);
    const auto& Q = std::get<0>(qr);
    const auto& R = std::get<1>(qr);
    // Rows of the block are the columns of Q (the paper's code transposes Q).
    Mat<double> block = Mat<double>::from_shape({d, d});
    for (std::size_t j = 0; j < d; ++j) {
        const double s = (sign_fix && R(j, j) < 0.0) ? -1.0 : 1.0;
        for (std::size_t c = 0; c < d; ++c) block(j, c) = s * Q(c, j);
    }
    return block;
}


namespace {
constexpr double kTwoPi = 6.283185307179586476925286766559;
}  // namespace

std::size_t next_pow2(std::size_t d) {
    std::size_t p = 1;
    while (p < d) p *= 2;
    return p;
}

void fwht(double* v, std::size_t p) {
    assert(p > 0 && (p & (p - 1)) == 0);
    // Butterflies of the Sylvester construction, then one 1/sqrt(p) for the normalised H.
    for (std::size_t h = 1; h < p; h *= 2)
        for (std::size_t i = 0; i < p; i += 2 * h)
            for (std::size_t k = i; k < i + h; ++k) {
                const double a = v[k], b = v[k + h];
                v[k] = a + b;
                v[k + h] = a - b;
            }
    const double s = 1.0 / std::sqrt(double(p));
    for (std::size_t k = 0; k < p; ++k) v[k] *= s;
}

SorfBlock sorf_block(std::uint64_t key, std::size_t p) {
    SorfBlock b;
    b.p = p;
    std::vector<double>* ds[3] = {&b.d1, &b.d2, &b.d3};
    for (std::size_t k = 0; k < 3; ++k) {
        ds[k]->resize(p);
        for (std::size_t i = 0; i < p; ++i) (*ds[k])[i] = uniform_at(key, k * p + i) < 0.5 ? -1.0 : 1.0;
    }
    return b;
}

void sorf_apply(const SorfBlock& b, const double* x, double* out) {
    const std::size_t p = b.p;
    // Right to left: D3, H, D2, H, D1, H, then sqrt(p) (Yu et al. 2016, eq. 4).
    for (std::size_t i = 0; i < p; ++i) out[i] = b.d3[i] * x[i];
    fwht(out, p);
    for (std::size_t i = 0; i < p; ++i) out[i] *= b.d2[i];
    fwht(out, p);
    for (std::size_t i = 0; i < p; ++i) out[i] *= b.d1[i];
    fwht(out, p);
    const double s = std::sqrt(double(p));
    for (std::size_t i = 0; i < p; ++i) out[i] *= s;
}

Mat<double> sorf_rows(const SorfBlock& b, std::size_t d) {
    assert(d <= b.p);
    Mat<double> rows = Mat<double>::from_shape({b.p, d});
    std::vector<double> col(b.p);
    for (std::size_t j = 0; j < d; ++j) {
        std::fill(col.begin(), col.end(), 0.0);
        col[j] = 1.0;
        sorf_apply(b, col.data(), col.data());
        for (std::size_t r = 0; r < b.p; ++r) rows(r, j) = col[r];
    }
    return rows;
}

std::vector<Givens> givens_rotations(std::uint64_t key, std::size_t d) {
    assert(d >= 2);
    std::size_t log2d = 0;
    while ((std::size_t(1) << log2d) < d) ++log2d;   // ceil(log2 d)
    const std::size_t K = d * log2d;
    std::vector<Givens> g(K);
    for (std::size_t t = 0; t < K; ++t) {
        // i uniform on [0, d); j uniform on the other d - 1 indices: i != j by construction.
        const std::size_t i = std::min(d - 1, std::size_t(uniform_at(key, 3 * t) * double(d)));
        std::size_t j = std::min(d - 2, std::size_t(uniform_at(key, 3 * t + 1) * double(d - 1)));
        if (j >= i) ++j;
        const double theta = kTwoPi * uniform_at(key, 3 * t + 2);
        g[t] = Givens{i, j, std::cos(theta), std::sin(theta)};
    }
    return g;
}

Mat<double> givens_block(std::uint64_t key, std::size_t d) {
    Mat<double> Q = xt::eye<double>(d);
    // Q <- Q G: mixes columns i and j of every row.
    for (const Givens& g : givens_rotations(key, d))
        for (std::size_t r = 0; r < d; ++r) {
            const double a = Q(r, g.i), b = Q(r, g.j);
            Q(r, g.i) = g.c * a - g.s * b;
            Q(r, g.j) = g.s * a + g.c * b;
        }
    return Q;
}

Mat<double> simplex_directions(std::size_t d) {
    assert(d >= 2);
    const double a = std::sqrt(double(d) / double(d - 1));
    Mat<double> S = Mat<double>::from_shape({d, d});
    for (std::size_t i = 0; i < d; ++i)
        for (std::size_t c = 0; c < d; ++c) S(i, c) = a * ((i == c ? 1.0 : 0.0) - 1.0 / double(d));
    return S;
}

Mat<double> simplex_block(std::uint64_t key, std::size_t d) {
    const Mat<double> R = orthogonal_block(key, d, true);
    // Row i of S R = sqrt(d/(d-1)) (R_i - mean_k R_k): O(d^2), no product needed.
    std::vector<double> mean(d, 0.0);
    for (std::size_t k = 0; k < d; ++k)
        for (std::size_t c = 0; c < d; ++c) mean[c] += R(k, c) / double(d);
    const double a = std::sqrt(double(d) / double(d - 1));
    Mat<double> B = Mat<double>::from_shape({d, d});
    for (std::size_t i = 0; i < d; ++i)
        for (std::size_t c = 0; c < d; ++c) B(i, c) = a * (R(i, c) - mean[c]);
    return B;
}

Mat<double> simplex_plus_directions(Mat<double> S, const double* w, std::size_t sweeps) {
    const std::size_t d = S.shape(0), n = S.shape(1);
    std::vector<double> T(n), v(n);
    for (std::size_t sweep = 0; sweep < sweeps; ++sweep) {
        // T = sum_j w_j s_j, recomputed per sweep (the in-sweep updates keep it current).
        std::fill(T.begin(), T.end(), 0.0);
        for (std::size_t j = 0; j < d; ++j)
            for (std::size_t c = 0; c < n; ++c) T[c] += w[j] * S(j, c);
        for (std::size_t i = 0; i < d; ++i) {
            double vv = 0.0;
            for (std::size_t c = 0; c < n; ++c) {
                v[c] = T[c] - w[i] * S(i, c);
                vv += v[c] * v[c];
            }
            if (!(vv > 0.0)) continue;
            const double inv = 1.0 / std::sqrt(vv);
            for (std::size_t c = 0; c < n; ++c) {
                S(i, c) = -v[c] * inv;
                T[c] = v[c] + w[i] * S(i, c);
            }
        }
    }
    return S;
}

}  // namespace favor
