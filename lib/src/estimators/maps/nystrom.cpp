// nystrom: the Nystromformer (Xiong et al. 2021, arXiv 2102.03902) as a feature map. With x, y
// the scaled rows (q / d^{1/4}, as the reference code scales Q and K), Q~, K~ the m segment
// means of the queries and keys (landmarks),
//   A_hat = softmax(X K~^T) pinv(softmax(Q~ K~^T)) softmax(Q~ Y^T),   Out_hat = A_hat V,
// softmax over the last axis, no row normalisation. Row-wise, A_hat_ij = phi_q(x_i) . phi_k(y_j):
//   phi_q(x) = softmax(x K~^T) P,  P = pinv(softmax(Q~ K~^T)),
//   phi_k(y)_l = exp(q~_l . y - log Z_l),  Z_l = sum_j exp(q~_l . y_j),
// so fit() computes Q~, K~, P and log Z from the inputs. Not an estimator of SM, nor of a
// kernel: A_hat approximates the attention matrix itself. No causal form (the landmarks and
// Z average over the whole sequence). The reference code's optional depthwise convolution of
// V is left out.
#include "favor/estimators/nystrom.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>
#include <xtensor-blas/xlinalg.hpp>

#include "favor/core/blas.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/feature_maps.hpp"

namespace favor {

Mat<double> segment_means(const Mat<double>& X, std::size_t m) {
    const std::size_t L = X.shape(0), d = X.shape(1);
    if (m == 0 || m > L) throw std::invalid_argument("segment_means: needs 1 <= m <= L");
    Mat<double> out = Mat<double>::from_shape({m, d});
    out.fill(0.0);
    for (std::size_t l = 0; l < m; ++l) {
        const std::size_t r0 = l * L / m, r1 = (l + 1) * L / m;
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = 0; c < d; ++c) out(l, c) += X(r, c);
        for (std::size_t c = 0; c < d; ++c) out(l, c) /= double(r1 - r0);
    }
    return out;
}

Mat<double> softmax_rows(Mat<double> S) {
    const std::size_t n = S.shape(0), k = S.shape(1);
    for (std::size_t i = 0; i < n; ++i) {
        double* s = S.data() + i * k;
        const double mx = *std::max_element(s, s + k);
        double z = 0.0;
        for (std::size_t j = 0; j < k; ++j) z += (s[j] = std::exp(s[j] - mx));
        for (std::size_t j = 0; j < k; ++j) s[j] /= z;
    }
    return S;
}

namespace {
// C = A B for square (m, m) matrices.
Mat<double> matmul(const Mat<double>& A, const Mat<double>& B) {
    const std::size_t m = A.shape(0);
    Mat<double> C = Mat<double>::from_shape({m, m});
    gemm<double>(false, false, m, m, m, 1.0, A.data(), m, B.data(), m, 0.0, C.data(), m);
    return C;
}
// c I - A.
Mat<double> shifted_identity(double c, const Mat<double>& A) {
    Mat<double> out = -A;
    for (std::size_t i = 0; i < A.shape(0); ++i) out(i, i) += c;
    return out;
}
}  // namespace

Mat<double> iterative_pinv(const Mat<double>& A, std::size_t iterations) {
    const std::size_t m = A.shape(0);
    double norm1 = 0.0, norm_inf = 0.0;   // max column sum, max row sum of |A|
    for (std::size_t j = 0; j < m; ++j) {
        double c = 0.0, r = 0.0;
        for (std::size_t i = 0; i < m; ++i) c += std::fabs(A(i, j)), r += std::fabs(A(j, i));
        norm1 = std::max(norm1, c);
        norm_inf = std::max(norm_inf, r);
    }
    Mat<double> Z = Mat<double>::from_shape({m, m});
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < m; ++j) Z(i, j) = A(j, i) / (norm1 * norm_inf);
    for (std::size_t it = 0; it < iterations; ++it) {
        const Mat<double> AZ = matmul(A, Z);
        const Mat<double> inner = shifted_identity(15.0, matmul(AZ, shifted_identity(7.0, AZ)));
        Z = matmul(Z, shifted_identity(13.0, matmul(AZ, inner)));
        Z *= 0.25;
    }
    return Z;
}

Mat<double> exact_pinv(const Mat<double>& A) {
    return Mat<double>(xt::linalg::pinv(A, 1e-15));
}

namespace {

constexpr std::size_t kNystromDefaultIterations = 6;   // the reference code's n_iter
constexpr std::uint64_t kNystromMaxIterations = 1000;

// What fit() computes from the inputs.
struct NystromFit {
    std::size_t m = 0, d = 0;
    Mat<double> q_land, k_land;   // Q~, K~ (m, d)
    Mat<double> P;                // pinv(softmax(Q~ K~^T)) (m, m)
    std::vector<double> log_z;    // log Z_l (m)
};

class NystromMap : public FeatureMapKernels<NystromMap> {
public:
    NystromMap(bool exact, std::size_t iterations, std::shared_ptr<const NystromFit> fit = nullptr)
        : FeatureMapKernels(0.0), exact_(exact), iterations_(iterations), fit_(std::move(fit)) {}
    std::string name() const override { return "nystrom"; }
    bool uses_projection() const override { return false; }
    bool row_normalised() const override { return false; }
    std::string gradient_refusal() const override {
        return "not row-normalised: its weights (landmarks, pseudo-inverse) depend on all of Q and K at once";
    }
    bool estimates_softmax() const override { return false; }
    bool is_kernel() const override { return false; }
    bool supports_causal() const override { return false; }
    bool data_dependent() const override { return true; }
    nlohmann::json params() const override {
        if (exact_) return {{"pinv", "exact"}};
        return {{"pinv", "iterative"}, {"iterations", iterations_}};
    }
    std::optional<SizeProblem> check_sizes(std::size_t m, std::size_t, std::size_t L, std::size_t Lk) const override {
        const std::size_t n = std::min(L == 0 ? Lk : L, Lk == 0 ? L : Lk);
        if (n > 0 && m > n)
            return SizeProblem{"m", "'nystrom' takes m landmarks, means of m segments of the rows, so m <= L; got m = " +
                                        std::to_string(m) + " with " + (L <= Lk ? "L = " : "Lk = ") + std::to_string(n)};
        return std::nullopt;
    }
    // Scores of queries and keys against the landmarks, the key normalisers in fit(), the
    // landmark matrix, the products by P, and the pseudo-inverse (4 products per iteration).
    double feature_flops(std::size_t L, std::size_t Lk, std::size_t m, std::size_t d) const override {
        const double M = double(m);
        return 2.0 * double(L + 2 * Lk) * M * double(d) + 2.0 * double(L) * M * M + 2.0 * M * M * double(d) +
               (exact_ ? 0.0 : 8.0 * double(iterations_) * M * M * M);
    }
    FeatureMapPtr resolve(const Mat<double>&, const Mat<double>&) const override {
        throw std::logic_error("nystrom: fitted by fit(X, Y, m), which knows m");
    }
    FeatureMapPtr fit(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const override;

    template <class T>
    void block_impl(const FeatureBlock<T>& b) const;
    template <class T>
    void finish_impl(T*, std::size_t, std::size_t, const double*, double) const {}

private:
    bool exact_;
    std::size_t iterations_;
    std::shared_ptr<const NystromFit> fit_;
};

FeatureMapPtr NystromMap::fit(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const {
    const std::size_t L = X.shape(0), Lk = Y.shape(0), d = X.shape(1);
    if (const auto p = check_sizes(m, d, L, Lk)) throw Error(p->message);
    auto f = std::make_shared<NystromFit>();
    f->m = m;
    f->d = d;
    f->q_land = segment_means(X, m);
    f->k_land = segment_means(Y, m);
    Mat<double> S = Mat<double>::from_shape({m, m});
    gemm<double>(false, true, m, m, d, 1.0, f->q_land.data(), d, f->k_land.data(), d, 0.0, S.data(), m);
    const Mat<double> kernel2 = softmax_rows(std::move(S));
    f->P = exact_ ? exact_pinv(kernel2) : iterative_pinv(kernel2, iterations_);
    // log Z_l = log sum_j exp(q~_l . y_j): a running max and sum over blocks of keys, in order.
    constexpr std::size_t kb = 2048;
    std::vector<double> mx(m, -std::numeric_limits<double>::infinity()), sum(m, 0.0), s(m * std::min(kb, Lk));
    for (std::size_t j0 = 0; j0 < Lk; j0 += kb) {
        const std::size_t n = std::min(kb, Lk - j0);
        gemm<double>(false, true, m, n, d, 1.0, f->q_land.data(), d, Y.data() + j0 * d, d, 0.0, s.data(), n);
        for (std::size_t l = 0; l < m; ++l) {
            const double* r = s.data() + l * n;
            const double bm = *std::max_element(r, r + n);
            if (bm > mx[l]) {
                sum[l] *= std::exp(mx[l] - bm);
                mx[l] = bm;
            }
            for (std::size_t j = 0; j < n; ++j) sum[l] += std::exp(r[j] - mx[l]);
        }
    }
    f->log_z.resize(m);
    for (std::size_t l = 0; l < m; ++l) f->log_z[l] = mx[l] + std::log(sum[l]);
    return std::make_shared<NystromMap>(exact_, iterations_, std::move(f));
}

// Both sides finished here (row_log = 0): queries softmax(x K~^T) P, keys exp(Q~ y - log Z).
template <class T>
void NystromMap::block_impl(const FeatureBlock<T>& b) const {
    if (!fit_) throw std::logic_error("nystrom: features asked for before fit()");
    const NystromFit& f = *fit_;
    const std::size_t m = f.m, d = b.d, rows = b.rows;
    if (b.F != m || d != f.d) throw std::logic_error("nystrom: fitted for other sizes");
    std::vector<double> x(rows * d), s(rows * m);
    for (std::size_t k = 0; k < rows * d; ++k) x[k] = b.xs * double(b.X[k]);
    const Mat<double>& land = b.side == Side::query ? f.k_land : f.q_land;
    gemm<double>(false, true, rows, m, d, 1.0, x.data(), d, land.data(), d, 0.0, s.data(), m);
    if (b.side == Side::query) {
        for (std::size_t i = 0; i < rows; ++i) {
            double* r = s.data() + i * m;
            const double mx = *std::max_element(r, r + m);
            double z = 0.0;
            for (std::size_t l = 0; l < m; ++l) z += (r[l] = std::exp(r[l] - mx));
            for (std::size_t l = 0; l < m; ++l) r[l] /= z;
        }
        std::vector<double> out(rows * m);
        gemm<double>(false, false, rows, m, m, 1.0, s.data(), m, f.P.data(), m, 0.0, out.data(), m);
        for (std::size_t k = 0; k < rows * m; ++k) b.out[k] = T(out[k]);
    } else {
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t l = 0; l < m; ++l) b.out[i * m + l] = T(std::exp(s[i * m + l] - f.log_z[l]));
    }
    std::fill(b.row_log, b.row_log + rows, 0.0);
}

}  // namespace

FeatureMapPtr make_nystrom(const FieldObject& v, double epsilon) {
    if (epsilon != 0.0)
        v.at("epsilon").fail("does not apply to 'nystrom' (its features are softmax weights; there is no stabiliser)");
    bool exact = false;
    if (v.has("pinv")) {
        const std::string p = read_string(v.value("pinv"), v.at("pinv"));
        if (p != "iterative" && p != "exact")
            v.at("pinv").fail("must be \"iterative\" (the Nystromformer's iteration, default) or \"exact\" (SVD), got \"" + p +
                              "\"");
        exact = p == "exact";
    }
    if (exact && v.has("iterations")) v.at("iterations").fail("applies only with \"pinv\": \"iterative\"");
    const std::size_t iterations = std::size_t(v.uint("iterations", kNystromDefaultIterations, 1, kNystromMaxIterations));
    return std::make_shared<NystromMap>(exact, iterations);
}

}  // namespace favor
