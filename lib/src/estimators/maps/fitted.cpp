// The fitted maps: hedgehog and t2r with weights A (d x w) and b (w) per head and side, fitted
// to a capture's heads by scripts/fit_maps.py (attention transfer), applied to the scaled rows
// x = q / d^{1/4} like every map (the scale is part of what the fit learns around):
//   hedgehog (Zhang et al. 2024, arXiv 2402.04347, eq. 4): z = x A + b,
//     phi(x) = [softmax(z), softmax(-z)], each half normalised over its w entries, F = 2w;
//   t2r (Kasai et al. 2021, arXiv 2103.13076): phi(x) = relu(x A + b), F = w.
// Queries and keys have their own A, b (Side). Not estimators of SM; no projection, no m.
// With A = I, b = 0, hedgehog is softmax_dim (softmax_maps.cpp): the identity the tests use.
// t2r without weights is that identity, relu(x) with F = d (a fit's initial weights at w = d):
// the untrained t2r; no weights object then (w_ null), whatever d is.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "favor/core/blas.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/feature_grad.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/fitted_weights.hpp"
#include "softmax_rows.hpp"

namespace favor {

namespace {
enum class Fitted { hedgehog, t2r };

template <Fitted kind>
class FittedMap : public FinishedMapKernels<FittedMap<kind>> {
public:
    FittedMap(double epsilon, std::shared_ptr<const FittedWeights> w, std::size_t head)
        : FinishedMapKernels<FittedMap<kind>>(epsilon), w_(std::move(w)), head_(head) {
        for (int s = 0; s < 2 && w_; ++s) {   // this head's A and b, in both compute types
            const std::size_t dw = w_->d * w_->width;
            const double* A = w_->A[s].data() + head_ * dw;
            const double* b = w_->b[s].data() + head_ * w_->width;
            Ad_[s].assign(A, A + dw), bd_[s].assign(b, b + w_->width);
            Af_[s].assign(A, A + dw), bf_[s].assign(b, b + w_->width);
        }
    }
    std::string name() const override { return kind == Fitted::hedgehog ? "hedgehog" : "t2r"; }
    std::size_t num_features(std::size_t, std::size_t d) const override { return halves * (w_ ? w_->width : d); }
    bool uses_projection() const override { return false; }
    bool estimates_softmax() const override { return false; }
    bool uses_m() const override { return false; }
    std::optional<SizeProblem> check_sizes(std::size_t, std::size_t d, std::size_t, std::size_t) const override {
        if (!w_ || d == w_->d) return std::nullopt;
        return SizeProblem{"weights", "'" + w_->ref + "' is fitted to heads of d = " + std::to_string(w_->d) +
                                          ", the inputs have d = " + std::to_string(d)};
    }
    std::optional<SizeProblem> check_heads(std::size_t heads) const override {
        const std::size_t need = w_ ? w_->heads_required() : 0;
        if (need == 0 || need == heads) return std::nullopt;
        return SizeProblem{"weights", "'" + w_->ref + "' holds " + std::to_string(need) + " heads, the inputs have " +
                                          std::to_string(heads) + " (name one head: LAYER.headN)"};
    }
    FeatureMapPtr for_head(std::size_t h) const override {
        if (!w_) return this->shared_from_this();
        const std::size_t stored = w_->stored_head(h);
        if (stored >= w_->heads)
            throw Error("'" + w_->ref + "' holds " + std::to_string(w_->heads) + " heads, head " + std::to_string(h) +
                        " asked");
        if (stored == head_) return this->shared_from_this();
        return std::make_shared<FittedMap>(this->epsilon(), w_, stored);
    }
    std::string fitted_on_q_sha256() const override { return w_ ? w_->fitted_on_q_sha256 : ""; }
    nlohmann::json params() const override {
        if (!w_) return {{"epsilon", this->epsilon()}};
        return {{"epsilon", this->epsilon()}, {"weights", w_->ref}, {"width", w_->width}};
    }
    // x A + b (2 d w per row and side), then the exp, sum and division of the softmaxes (or
    // the relu's max).
    double feature_flops(std::size_t L, std::size_t Lk, std::size_t, std::size_t d) const override {
        const double w = double(w_ ? w_->width : d);
        return double(L + Lk) * w * ((w_ ? 2.0 * double(d) : 0.0) + (kind == Fitted::hedgehog ? 3.0 * halves : 1.0));
    }

    // z = xs X A + b (rounded as b.rounding says), then each row's map; finished on both
    // sides (row_log = 0), epsilon added after it.
    template <class T>
    void block_impl(const FeatureBlock<T>& b) const {
        const std::size_t w = w_ ? w_->width : b.d, s = side(b.side);
        thread_local std::vector<T> z;
        z.resize(b.rows * w);
        if (w_) {
            const T* bias = b_of<T>(s);
            for (std::size_t i = 0; i < b.rows; ++i) std::copy(bias, bias + w, z.data() + i * w);
            gemm<T>(false, false, b.rows, w, b.d, T(b.xs), b.X, b.d, A_of<T>(s), w, T(1), z.data(), w);
        } else {
            for (std::size_t i = 0; i < b.rows * w; ++i) z[i] = T(b.xs * double(b.X[i]));   // A = I, b = 0
        }
        round_to(b.rounding, z.data(), z.size());
        for (std::size_t i = 0; i < b.rows; ++i) {
            const T* zi = z.data() + i * w;
            T* e = b.out + i * b.F;
            if constexpr (kind == Fitted::hedgehog) {
                softmax_half(zi, w, 1.0, this->epsilon(), e);
                softmax_half(zi, w, -1.0, this->epsilon(), e + w);
            } else {
                for (std::size_t c = 0; c < w; ++c) e[c] = T(std::max(double(zi[c]), 0.0) + this->epsilon());
            }
            b.row_log[i] = 0.0;
        }
    }
    // dz from the map (hedgehog: each softmax's vjp, the second half with sign -1; t2r: the
    // relu's mask phi - epsilon > 0), then dX_i = xs A dz_i.
    template <class T>
    void vjp_impl(const FeatureGrad<T>& g) const {
        const std::size_t d = g.d, w = w_ ? w_->width : d, s = side(g.side);
        const std::vector<double>& A = Ad_[s];   // empty for the identity
        std::vector<double> dz(w);
        for (std::size_t i = 0; i < g.rows; ++i) {
            const T* G = g.G + i * g.F;
            const T* phi = g.phi + i * g.F;
            std::fill(dz.begin(), dz.end(), 0.0);
            if constexpr (kind == Fitted::hedgehog) {
                softmax_half_vjp(G, phi, w, this->epsilon(), 1.0, dz.data());
                softmax_half_vjp(G + w, phi + w, w, this->epsilon(), -1.0, dz.data());
            } else {
                for (std::size_t c = 0; c < w; ++c) dz[c] = double(phi[c]) - this->epsilon() > 0.0 ? double(G[c]) : 0.0;
            }
            for (std::size_t r = 0; r < d; ++r) {
                double acc = w_ ? 0.0 : dz[r];
                for (std::size_t c = 0; c < w && w_; ++c) acc += A[r * w + c] * dz[c];
                g.dX[i * d + r] = T(g.xs * acc);
            }
        }
    }

private:
    static constexpr std::size_t halves = kind == Fitted::hedgehog ? 2 : 1;
    static std::size_t side(Side s) { return s == Side::query ? 0 : 1; }
    template <class T>
    const T* A_of(std::size_t s) const {
        if constexpr (std::is_same_v<T, float>) return Af_[s].data();
        else return Ad_[s].data();
    }
    template <class T>
    const T* b_of(std::size_t s) const {
        if constexpr (std::is_same_v<T, float>) return bf_[s].data();
        else return bd_[s].data();
    }

    std::shared_ptr<const FittedWeights> w_;
    std::size_t head_;
    std::array<std::vector<double>, 2> Ad_, bd_;
    std::array<std::vector<float>, 2> Af_, bf_;
};
}  // namespace

namespace {
template <Fitted kind>
FeatureMapPtr make_fitted(const FieldObject& v, double epsilon, const char* name) {
    auto w = load_fitted_weights(v.string("weights", ""), name, v.at("weights"));
    const std::size_t head = w->stored_head(0);
    return std::make_shared<FittedMap<kind>>(epsilon, std::move(w), head);
}
}  // namespace

FeatureMapPtr make_fitted_hedgehog(const FieldObject& v, double epsilon) {
    return make_fitted<Fitted::hedgehog>(v, epsilon, "hedgehog");
}
FeatureMapPtr make_t2r(const FieldObject& v, double epsilon) {
    if (!v.has("weights")) return std::make_shared<FittedMap<Fitted::t2r>>(epsilon, nullptr, 0);   // relu(x)
    return make_fitted<Fitted::t2r>(v, epsilon, "t2r");
}

}  // namespace favor
