// poisson, geometric: the discretely-induced random features of "Chefs' Random Tables" (arXiv
// 2205.15317, sec. 3.2), from the power series exp(x.y) = prod_l sum_k (x_l y_l)^k / k!. With
// k = (k_1..k_d) iid from a law p on {0, 1, ...} and f(k, x) = prod_l x_l^{k_l} / sqrt(k_l! p(k_l)),
//   E f(k, x) f(k, y) = prod_l sum_k p(k) (x_l y_l)^k / (k! p(k)) = exp(x.y):
// unbiased, same f on both sides, not positive (the sign of prod_l x_l^{k_l}).
//   poisson(lambda):  p(k) = e^{-lambda} lambda^k / k!,  f = e^{lambda d/2} prod_l (x_l / sqrt(lambda))^{k_l},
//     E (f f)^2 = exp(lambda d + S / lambda),  S = sum_l x_l^2 y_l^2;
//   geometric(p):     p(k) = p (1-p)^k,  E (f f)^2 = p^{-d} prod_l I_0(2 |x_l y_l| / sqrt(1-p)).
// The m features are phi_j = f(k_j, x) / sqrt(m), k_j drawn from row j of W: k_jl = F^{-1}(Phi(W_jl))
// (inverse-CDF of the law at the normal CDF of W's entry), so a W with N(0, I) rows gives iid
// k_j (iid W: all independent). The gradient holds W's draws, the fitted parameters and the
// shift fixed. "optimal" fits (docs/estimators.md): lambda* = sqrt(mean_{ij} S_ij / d),
// the minimiser of the mean over pairs of log E (f f)^2; p* the minimiser of that mean's
// homogeneity proxy -d log p + sum_l log I_0(2 s_l / sqrt(1-p)), s_l^2 = mean x_l^2 mean y_l^2.
// Cost: d normal CDFs and quantiles per row of W and block, then the nonzero k_jl (expected
// d (1 - p(0)) per feature) multiply-adds per feature and row.
#include <algorithm>
#include <cmath>

#include "exp_family.hpp"
#include "power_products.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
enum class Law { poisson, geometric };
// The fits' bounds: where x_l y_l = 0 for every l the objectives fall towards lambda = 0 or
// p = 1 (no power drawn, the estimate exactly 1 = SM); kept off them so that every draw is
// still random.
constexpr double kLambdaMin = 1e-3, kPMin = 1e-3;

class DiscreteMap : public FinishedMapKernels<DiscreteMap> {
public:
    DiscreteMap(double epsilon, Law law, double param, bool optimal, bool fitted = false)
        : FinishedMapKernels(epsilon), law_(law), param_(param), optimal_(optimal), fitted_(fitted) {}
    std::string name() const override { return law_ == Law::poisson ? "poisson" : "geometric"; }
    const char* key() const { return law_ == Law::poisson ? "lambda" : "p"; }
    nlohmann::json params() const override {
        nlohmann::json p = {{"epsilon", epsilon()}};
        p[key()] = optimal_ ? nlohmann::json("optimal") : nlohmann::json(param_);
        if (fitted_) p[std::string(key()) + "_fitted"] = param_;
        return p;
    }
    bool data_dependent() const override { return optimal_; }
    // Keys are finished per row like queries whatever epsilon (finish_impl is not used).
    bool blockwise_key_shift() const override { return true; }
    FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const override {
        if (!optimal_) return shared_from_this();
        const std::vector<double> sx = column_mean_squares(X), sy = column_mean_squares(Y);
        const std::size_t d = sx.size();
        double v = 0.0;
        if (law_ == Law::poisson) {
            for (std::size_t l = 0; l < d; ++l) v += sx[l] * sy[l];
            v = std::max(std::sqrt(v / double(d)), kLambdaMin);
        } else {
            std::vector<double> s(d);
            for (std::size_t l = 0; l < d; ++l) s[l] = std::sqrt(sx[l] * sy[l]);
            v = geometric_optimal_p(s);
        }
        return std::make_shared<DiscreteMap>(epsilon(), law_, v, true, true);
    }
    // E (f f)^2 - SM^2 over m, from the rows themselves (S_ij = sum_l x_il^2 y_jl^2).
    PairMse pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const override {
        return [X, Y, law = law_, a = param_, m](std::size_t i, std::size_t j, double xy) {
            const std::size_t d = X.shape(1);
            double second = 0.0;   // log E (f f)^2
            if (law == Law::poisson) {
                second = a * double(d);
                for (std::size_t l = 0; l < d; ++l) second += X(i, l) * X(i, l) * Y(j, l) * Y(j, l) / a;
            } else {
                second = -double(d) * std::log(a);
                for (std::size_t l = 0; l < d; ++l)
                    second += std::log(std::cyl_bessel_i(0.0, 2.0 * std::fabs(X(i, l) * Y(j, l)) / std::sqrt(1.0 - a)));
            }
            return (std::exp(second) - std::exp(2.0 * xy)) / double(m);
        };
    }

    template <class T>
    void block_impl(const FeatureBlock<T>& b) const;

private:
    friend class FinishedMapKernels<DiscreteMap>;   // calls vjp_impl
    Law law_;
    double param_;   // lambda or p
    bool optimal_, fitted_;

    // k = F^{-1}(Phi(w)) for the law.
    int quantile(double w) const {
        if (law_ == Law::geometric) {   // P(K >= k) = (1-p)^k: k = floor(log S / log(1-p)), S = 1 - Phi(w)
            const double S = 0.5 * std::erfc(w / std::sqrt(2.0));
            return int(std::min(std::floor(std::log(S) / std::log1p(-param_)), 1000.0));
        }
        const double u = 0.5 * std::erfc(-w / std::sqrt(2.0));
        double pk = std::exp(-param_), c = pk;
        int k = 0;
        while (u > c && k < 1000 && pk > 0.0) {
            ++k;
            pk *= param_ / k;
            c += pk;
        }
        return k;
    }
    template <class T>
    std::vector<Draw> draws(const Mat<T>& W) const {
        const std::size_t m = W.shape(0), d = W.shape(1);
        std::vector<Draw> out(m);
        for (std::size_t j = 0; j < m; ++j) {
            Draw& dr = out[j];
            dr.log_c = -0.5 * std::log(double(m)) + (law_ == Law::poisson ? 0.5 * param_ * double(d) : -0.5 * double(d) * std::log(param_));
            for (std::size_t l = 0; l < d; ++l) {
                const int k = quantile(double(W(j, l)));
                if (k == 0) continue;
                dr.powers.emplace_back(l, k);
                dr.log_c -= law_ == Law::poisson ? 0.5 * k * std::log(param_) : 0.5 * (std::lgamma(k + 1.0) + k * std::log1p(-param_));
            }
        }
        return out;
    }
    static double geometric_optimal_p(const std::vector<double>& s);
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const;
};

// Golden-section search of the (unimodal: a convex plus an increasing convex term) proxy on
// [kPMin, 1 - kPMin].
double DiscreteMap::geometric_optimal_p(const std::vector<double>& s) {
    auto g = [&](double p) {
        double v = -double(s.size()) * std::log(p);
        for (double sl : s) v += std::log(std::cyl_bessel_i(0.0, 2.0 * sl / std::sqrt(1.0 - p)));
        return v;
    };
    const double r = 0.5 * (std::sqrt(5.0) - 1.0);
    double a = kPMin, c = 1.0 - kPMin;
    for (int it = 0; it < 80; ++it) {
        const double x1 = c - r * (c - a), x2 = a + r * (c - a);
        if (g(x1) < g(x2)) c = x2;
        else a = x1;
    }
    return 0.5 * (a + c);
}

// phi_j(x) = sign_j exp(log_c_j + sum k_jl log|x_l|), each row shifted by its largest exponent
// (row_log); 0 where some x_l = 0 has k_jl > 0. Both sides finished here.
template <class T>
void DiscreteMap::block_impl(const FeatureBlock<T>& b) const {
    const std::vector<Draw> ks = draws(b.W);
    RowExponents r(b.d, ks.size());
    for (std::size_t i = 0; i < b.rows; ++i) {
        r.compute(ks, b.X + i * b.d, b.xs);
        b.row_log[i] = r.shift;
        r.write(b.out + i * b.F, ks.size(), epsilon());
    }
}

// d phi_j / d v_l = k_jl phi_j / v_l for v_l != 0; at v_l = 0 only k_jl = 1 with no other
// zero hit contributes: the product of the other powers, sign_j exp(e_j - shift). The shift
// (recomputed as block_impl computes it) and the fitted lambda or p are held fixed; dq = xs dv.
template <class T>
void DiscreteMap::vjp_impl(const FeatureGrad<T>& g) const {
    const std::vector<Draw> ks = draws(g.W);
    const std::size_t d = g.d;
    RowExponents r(d, ks.size());
    std::vector<double> dv(d);
    for (std::size_t i = 0; i < g.rows; ++i) {
        r.compute(ks, g.X + i * d, g.xs);
        r.vjp(ks, g.G + i * g.F, dv);
        for (std::size_t l = 0; l < d; ++l) g.dX[i * d + l] = T(g.xs * dv[l]);
    }
}

FeatureMapPtr make_discrete(const FieldObject& v, double epsilon, Law law) {
    const std::string key = law == Law::poisson ? "lambda" : "p";
    if (!v.has(key) || (v.value(key).is_string() && v.value(key).get<std::string>() == "optimal"))
        return std::make_shared<DiscreteMap>(epsilon, law, law == Law::poisson ? 1.0 : 0.5, true);
    const std::string want = law == Law::poisson ? "a number > 0" : "a number in (0, 1)";
    if (v.value(key).is_string()) v.at(key).fail("must be " + want + " or \"optimal\", got " + v.value(key).dump());
    const double a = v.number(key, 0.0);
    if (!(a > 0.0) || (law == Law::geometric && !(a < 1.0))) v.at(key).fail("must be " + want + ", got " + v.value(key).dump());
    return std::make_shared<DiscreteMap>(epsilon, law, a, false);
}
}  // namespace

FeatureMapPtr make_poisson(const FieldObject& v, double epsilon) { return make_discrete(v, epsilon, Law::poisson); }
FeatureMapPtr make_geometric(const FieldObject& v, double epsilon) { return make_discrete(v, epsilon, Law::geometric); }

}  // namespace favor
