// maclaurin: random Maclaurin features of exp(x.y) (Kar & Karnick, AISTATS 2012; SchoenbAt,
// arXiv 2505.12252), from exp(t) = sum_n a_n t^n, a_n = 1/n!, with no truncation. Feature r
// has a degree N_r, P(N = n) = 2^-(n+1), and N_r Rademacher vectors w_{r,i} in {-1, +1}^d:
//   phi_r(x) = sqrt(a_N / (P(N) m)) prod_{i=1..N} (w_{r,i} . x)   (the same on both sides),
//   E phi(x).phi(y) = sum_n P(n) (a_n / P(n)) E prod_i (w.x)(w.y) = sum_n (x.y)^n / n! = exp(x.y).
// Unbiased, signed (the sign of the product). One feature Z = m phi_r(x) phi_r(y) has
//   E Z^2 = sum_n (a_n^2 / P(n)) M^n = 2 sum_n (2M)^n / (n!)^2 = 2 I_0(2 sqrt(2M)),
//   M = E (w.x)^2 (w.y)^2 = |x|^2 |y|^2 + 2 (x.y)^2 - 2 sum_l x_l^2 y_l^2,
// so the m-feature MSE is (2 I_0(2 sqrt(2M)) - exp(2 x.y)) / m (pair_mse_rows).
// The draws come from W (docs/design.md section 7): feature r's alone from row r, through the
// counter-based streams of rng.hpp keyed by a hash of the row's entries rounded to float32 (so
// float32 and float64 runs draw the same): N_r = the trailing zero bits of the words
// stream_key(key_r, 0, j), j = 0, 1, ... (exactly geometric, no cap), and w_{r,i,c} = -1 where
// bit i d + c of the words stream_key(key_r, 1, j) is set. Features are independent for any W
// with distinct rows, nested in m and independent of blocks and threads. The projection only
// seeds the draws (its rows' directions play no part), so only `iid` is accepted: another
// projection would be this estimator with other seeds, not a coupled one.
// Evaluated in log space with a per-row shift on both sides, as poisson / geometric
// (power_products.hpp); the projections w_{r,i} . x by project_block (half rounding included).
// Gradient: d/dx prod_i (w_i.x) = sum_i w_i prod_{k != i} (w_k.x), through projection_vjp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "power_products.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {

// Every feature's Rademacher vectors stacked (S: sum_r N_r rows of +-1, feature r's rows
// consecutive) and each feature as a product of its rows' projections (power 1 each).
template <class T>
struct Vectors {
    Mat<T> S;
    std::vector<Draw> ks;
};

// Row r's stream key: its entries rounded to float32, hashed in order.
template <class T>
std::uint64_t row_key(const T* w, std::size_t d) {
    std::uint64_t h = tag("maclaurin-row");
    for (std::size_t c = 0; c < d; ++c) {
        const float f = float(w[c]);
        std::uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        h = stream_key({h, bits});
    }
    return h;
}

// N with P(N = n) = 2^-(n+1): the number of trailing zero bits of the stream's words.
int degree(std::uint64_t key) {
    int n = 0;
    for (std::uint64_t j = 0;; ++j) {
        std::uint64_t word = stream_key({key, 0, j});
        if (word == 0) {
            n += 64;
            continue;
        }
        while (!(word & 1)) {
            word >>= 1;
            ++n;
        }
        return n;
    }
}

template <class T>
Vectors<T> vectors(const Mat<T>& W) {
    const std::size_t m = W.shape(0), d = W.shape(1);
    std::vector<std::uint64_t> keys(m);
    std::vector<int> N(m);
    std::size_t total = 0;
    for (std::size_t r = 0; r < m; ++r) {
        keys[r] = row_key(W.data() + r * d, d);
        N[r] = degree(keys[r]);
        total += std::size_t(N[r]);
    }
    Vectors<T> v{Mat<T>::from_shape({total, d}), std::vector<Draw>(m)};
    std::size_t row = 0;
    for (std::size_t r = 0; r < m; ++r) {
        const double n = N[r];
        // log sqrt(a_N / (P(N) m)) = ((N + 1) log 2 - log N! - log m) / 2
        v.ks[r].log_c = 0.5 * ((n + 1.0) * std::log(2.0) - std::lgamma(n + 1.0) - std::log(double(m)));
        for (std::size_t i = 0; i < std::size_t(N[r]); ++i, ++row) {
            v.ks[r].powers.emplace_back(row, 1);
            for (std::size_t c = 0; c < d; ++c) {
                const std::size_t bit = i * d + c;
                const std::uint64_t word = stream_key({keys[r], 1, bit / 64});
                v.S(row, c) = (word >> (bit % 64)) & 1 ? T(-1) : T(1);
            }
        }
    }
    return v;
}

class MaclaurinMap : public FinishedMapKernels<MaclaurinMap> {
public:
    using FinishedMapKernels::FinishedMapKernels;
    std::string name() const override { return "maclaurin"; }
    // Keys are finished per row like queries whatever epsilon (finish_impl is not used).
    bool blockwise_key_shift() const override { return true; }
    std::string projection_refusal(const std::string& projection) const override {
        if (projection == "iid") return "";
        return "maclaurin takes only \"iid\": its Rademacher vectors are drawn from a hash of each row of W, so '" +
               projection + "' would be the same estimator with other seeds, not a structured one";
    }
    // (2 I_0(2 sqrt(2 M_ij)) - SM^2) / m with M_ij = |x_i|^2 |y_j|^2 + 2 (x_i.y_j)^2 - 2 sum_l x_il^2 y_jl^2.
    PairMse pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const override {
        return [X, Y, m](std::size_t i, std::size_t j, double xy) {
            double x2 = 0.0, y2 = 0.0, s = 0.0;
            for (std::size_t l = 0; l < X.shape(1); ++l) {
                const double a = X(i, l) * X(i, l), b = Y(j, l) * Y(j, l);
                x2 += a;
                y2 += b;
                s += a * b;
            }
            const double M = std::max(0.0, x2 * y2 + 2.0 * xy * xy - 2.0 * s);
            return (2.0 * std::cyl_bessel_i(0.0, 2.0 * std::sqrt(2.0 * M)) - std::exp(2.0 * xy)) / double(m);
        };
    }

    // phi_r(x) = sign_r exp(log_c_r + sum_i log|w_{r,i}.x|) with the row's shift (row_log);
    // 0 where a projection is 0. Both sides finished here.
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const Vectors<T> v = vectors(b.W);
        const std::size_t n = v.S.shape(0);
        std::vector<T> proj(b.rows * n);
        if (n > 0)
            project_block(FeatureBlock<T>{b.X, b.rows, b.d, b.xs, v.S, b.side, proj.data(), n, b.row_log, true, b.rounding});
        RowExponents r(n, v.ks.size());
        for (std::size_t i = 0; i < b.rows; ++i) {
            r.compute(v.ks, proj.data() + i * n, 1.0);
            b.row_log[i] = r.shift;
            r.write(b.out + i * b.F, v.ks.size(), epsilon());
        }
    }

private:
    friend class FinishedMapKernels<MaclaurinMap>;   // calls vjp_impl
    // dLoss/du for the projections u = S x (power_products.hpp; the shift, recomputed, held
    // fixed), then dX = xs S^T dLoss/du (projection_vjp with S for W).
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const Vectors<T> v = vectors(g.W);
        const std::size_t n = v.S.shape(0);
        if (n == 0) {   // every feature a constant
            std::fill(g.dX, g.dX + g.rows * g.d, T(0));
            return;
        }
        RowExponents r(n, v.ks.size());
        const FeatureGrad<T> gs{g.X, g.rows, g.d, g.xs, v.S, g.side, g.phi, g.G, g.F, g.dX};
        projection_vjp(gs, [&](std::size_t i, const std::vector<double>& u, std::vector<double>& coef, std::vector<double>&) {
            r.compute(v.ks, u.data(), 1.0);
            r.vjp(v.ks, g.G + i * g.F, coef);
        });
    }
};

}  // namespace

FeatureMapPtr make_maclaurin(const FieldObject&, double epsilon) { return std::make_shared<MaclaurinMap>(epsilon); }

}  // namespace favor
