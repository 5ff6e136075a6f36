// dpfp: the deterministic parameter-free projection of "Linear Transformers Are Secretly Fast
// Weight Programmers" (Schlag, Irie & Schmidhuber 2021, eq. 37):
//   r = relu([x, -x]) (2d),  phi(x) = [r * roll(r, 1), ..., r * roll(r, nu)],  F = 2 d nu,
// with roll as numpy / torch roll (roll(r, s)_i = r_{(i - s) mod 2d}), elementwise products,
// blocks in order s = 1..nu (the reference code's order). No random projection; applied to
// x = q / d^{1/4}. Not an estimator of SM: a baseline of linear attention.
#include <algorithm>
#include <vector>

#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

namespace {
class DpfpMap : public FinishedMapKernels<DpfpMap> {
public:
    DpfpMap(double epsilon, std::size_t nu) : FinishedMapKernels(epsilon), nu_(nu) {}
    std::string name() const override { return "dpfp"; }
    std::size_t num_features(std::size_t, std::size_t d) const override { return 2 * d * nu_; }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }
    nlohmann::json params() const override { return {{"epsilon", epsilon()}, {"nu", nu_}}; }
    // At d = 1 every product r_i r_{i-s} pairs relu(x) with relu(-x): all features 0. Shifts
    // s >= 2d repeat (or square) earlier ones.
    std::optional<SizeProblem> check_sizes(std::size_t, std::size_t d, std::size_t, std::size_t) const override {
        if (d == 0) return std::nullopt;
        if (d < 2) return SizeProblem{"", "'dpfp' needs d >= 2 (at d = 1 every feature is 0), the inputs have d = 1"};
        if (nu_ > 2 * d - 1)
            return SizeProblem{"nu", "must be <= 2d - 1 = " + std::to_string(2 * d - 1) + " (the distinct shifts of the " +
                                         std::to_string(2 * d) + "-vector relu([x, -x])) at d = " + std::to_string(d) +
                                         ", got " + std::to_string(nu_)};
        return std::nullopt;
    }

    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const std::size_t n = 2 * b.d;
        const T eps = T(epsilon());
        std::vector<T> r(n);
        for (std::size_t i = 0; i < b.rows; ++i) {
            const T* x = b.X + i * b.d;
            for (std::size_t c = 0; c < b.d; ++c) {
                const T v = T(b.xs * double(x[c]));
                r[c] = std::max(v, T(0));
                r[b.d + c] = std::max(-v, T(0));
            }
            T* e = b.out + i * b.F;
            for (std::size_t s = 1; s <= nu_; ++s)
                for (std::size_t k = 0; k < n; ++k) e[(s - 1) * n + k] = r[k] * r[(k + n - s % n) % n] + eps;
            b.row_log[i] = 0.0;
        }
    }
    // phi_{(s-1) n + k} = r_k r_{k-s} (n = 2d, indices mod n): dr_k gets g r_{k-s} from
    // feature (s, k) and g r_{k+s} from (s, k+s); then r = relu([x, -x]): dq_c = xs (1[x_c > 0]
    // dr_c - 1[x_c < 0] dr_{d+c}).
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const std::size_t d = g.d, n = 2 * d;
        std::vector<double> r(n), dr(n);
        for (std::size_t i = 0; i < g.rows; ++i) {
            for (std::size_t c = 0; c < d; ++c) {
                const double v = double(T(g.xs * double(g.X[i * d + c])));
                r[c] = std::max(v, 0.0);
                r[d + c] = std::max(-v, 0.0);
            }
            std::fill(dr.begin(), dr.end(), 0.0);
            for (std::size_t s = 1; s <= nu_; ++s)
                for (std::size_t k = 0; k < n; ++k) {
                    const std::size_t k2 = (k + n - s % n) % n;
                    const double gk = double(g.G[i * g.F + (s - 1) * n + k]);
                    dr[k] += gk * r[k2];
                    dr[k2] += gk * r[k];
                }
            for (std::size_t c = 0; c < d; ++c)
                g.dX[i * d + c] = T(g.xs * ((r[c] > 0.0 ? dr[c] : 0.0) - (r[d + c] > 0.0 ? dr[d + c] : 0.0)));
        }
    }

private:
    std::size_t nu_;
};
}  // namespace

// Largest nu accepted (the paper uses 1 to 3); the sizes check also asks nu <= 2d - 1.
constexpr std::uint64_t kDpfpMaxNu = 64;

FeatureMapPtr make_dpfp(const FieldObject& v, double epsilon) {
    return std::make_shared<DpfpMap>(epsilon, std::size_t(v.uint("nu", 1, 1, kDpfpMaxNu)));
}

}  // namespace favor
