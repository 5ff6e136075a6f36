#include "exp_family.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <xtensor-blas/xlinalg.hpp>

#include "favor/core/blas.hpp"
#include "favor/core/names.hpp"
#include "favor/core/vmath.hpp"

namespace favor {

const char* epsilon_after_name(EpsilonAfter a) { return a == EpsilonAfter::max_wx ? "max_wx" : "max_exponent"; }

EpsilonAfter read_epsilon_after(const FieldObject& v) {
    const std::string s = v.string("epsilon_after", "max_exponent");
    if (s == "max_exponent") return EpsilonAfter::max_exponent;
    if (s == "max_wx") return EpsilonAfter::max_wx;
    v.at("epsilon_after").fail("must be \"max_exponent\" (after subtracting max(w.x - |x|^2/2), favor's) or "
                               "\"max_wx\" (after subtracting max(w.x), the official code's), got \"" + s + "\"" +
                               suggestion(s, {"max_exponent", "max_wx"}));
}

ExpFamilyMap::ExpFamilyMap(double epsilon, double A, bool mirrored, EpsilonAfter after)
    : FeatureMapKernels(epsilon), mirrored_(mirrored), after_(after) {
    shape_.A = A;
}

ExpFamilyMap::ExpFamilyMap(double epsilon, ExpShape shape, EpsilonAfter after)
    : FeatureMapKernels(epsilon), shape_(std::move(shape)), after_(after) {
    const std::size_t d = shape_.a.size();
    if (d == 0) return;
    if (shape_.U.size() != d * d) throw std::logic_error("ExpFamilyMap: eigenvectors of A must be d x d");
    // A = U diag(a) U^T, B = (I - 4A)^{1/2} = U diag(sqrt(1 - 4a)) U^T.
    A_mat_.assign(d * d, 0.0);
    B_.assign(d * d, 0.0);
    for (std::size_t l = 0; l < d; ++l) {
        const double al = shape_.a[l], bl = std::sqrt(1.0 - 4.0 * al);
        log_det_quarter_ += 0.25 * std::log1p(-4.0 * al);
        for (std::size_t r = 0; r < d; ++r)
            for (std::size_t c = 0; c < d; ++c) {
                const double uu = shape_.U[r * d + l] * shape_.U[c * d + l];
                A_mat_[r * d + c] += al * uu;
                B_[r * d + c] += bl * uu;
            }
    }
}

namespace {
// The rows a block multiplies by W^T: u_i = us * U_i, the input rows with G_s = scale_s diag_s
// applied (the scalar us folded into the products where it can be), and P = B u_i for a
// matrix A (else P = U).
template <class T>
struct ExpRows {
    const T* U;
    const T* P;
    double us;
    std::vector<T> ubuf, vbuf;
    ExpRows(const FeatureBlock<T>& b, const std::vector<double>& diag, const std::vector<double>& G, double scale,
            const std::vector<double>& B)
        : U(b.X), us(b.xs * scale) {
        const std::size_t rows = b.rows, d = b.d;
        if (!G.empty()) {   // u_i = us G X_i, accumulated in double
            ubuf.resize(rows * d);
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t r = 0; r < d; ++r) {
                    double t = 0.0;
                    for (std::size_t c = 0; c < d; ++c) t += G[r * d + c] * double(b.X[i * d + c]);
                    ubuf[i * d + r] = T(us * t);
                }
            U = ubuf.data();
            us = 1.0;
        } else if (!diag.empty()) {
            ubuf.resize(rows * d);
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t c = 0; c < d; ++c) ubuf[i * d + c] = T(us * diag[c] * double(b.X[i * d + c]));
            U = ubuf.data();
            us = 1.0;
        }
        P = U;
        if (!B.empty()) {
            std::vector<T> Bt(B.begin(), B.end());
            vbuf.resize(rows * d);
            gemm<T>(false, true, rows, d, d, T(us), U, d, Bt.data(), d, T(0), vbuf.data(), d);   // B symmetric
            P = vbuf.data();
        }
    }
    ExpRows(const ExpRows&) = delete;
    ExpRows& operator=(const ExpRows&) = delete;
};

// w_j^T A w_j for the m rows of W (m x d): for a matrix A (A_mat, d x d, non-empty) row j of
// (W A) . row j of W in double; for a scalar A != 0, A |w_j|^2; empty for A = 0 (no term).
template <class T>
std::vector<T> w_terms(const Mat<T>& W, std::size_t d, const std::vector<double>& A_mat, double A) {
    const std::size_t m = W.shape(0);
    std::vector<T> wterm;
    if (!A_mat.empty()) {
        wterm.assign(m, T(0));
        std::vector<double> Wd(W.begin(), W.end()), WA(m * d);
        gemm<double>(false, false, m, d, d, 1.0, Wd.data(), d, A_mat.data(), d, 0.0, WA.data(), d);
        for (std::size_t j = 0; j < m; ++j) {
            double q = 0.0;
            for (std::size_t c = 0; c < d; ++c) q += WA[j * d + c] * Wd[j * d + c];
            wterm[j] = T(q);
        }
    } else if (A != 0.0) {
        wterm.assign(m, T(0));
        for (std::size_t j = 0; j < m; ++j) {
            double w2 = 0.0;
            for (std::size_t c = 0; c < d; ++c) w2 += double(W(j, c)) * double(W(j, c));
            wterm[j] = T(A * w2);
        }
    }
    return wterm;
}
}  // namespace

template <class T>
void ExpFamilyMap::block_impl(const FeatureBlock<T>& b) const {
    const std::size_t m = b.W.shape(0), d = b.d, F = b.F, rows = b.rows;
    const int s = b.side == Side::query ? 0 : 1;
    const std::vector<double>& diag = shape_.diag[s];
    const bool dense = !B_.empty();
    const std::vector<double>& G = shape_.dense[s];
    if ((dense && A_mat_.size() != d * d) || (!diag.empty() && diag.size() != d) || (!G.empty() && G.size() != d * d))
        throw std::logic_error("ExpFamilyMap: parameters fitted for another dimension");
    const double A = shape_.A;
    // e_ij = w_j^T A w_j + w_j^T B u_i - |u_i|^2/2 + (1/4) log det(I - 4A), u_i = G_s x_i.
    // Scalar A: w_j^T B u_i = sqrt(1-4A) w_j.u_i (a multiply after the product).
    const T a = T(std::sqrt(1.0 - 4.0 * A));
    const double log_c = dense ? log_det_quarter_ : 0.25 * double(d) * std::log1p(-4.0 * A);
    const double norm = 1.0 / std::sqrt(double(F));
    const T eps = T(epsilon());
    // "max_wx": the shift leaves out the -|u|^2/2 term, so epsilon lands where the official
    // code puts it; with epsilon = 0 it would only lose range, so then it is not used.
    const bool wx = after_ == EpsilonAfter::max_wx && epsilon() != 0.0;
    const ExpRows<T> in(b, diag, G, shape_.scale[s], B_);
    const T* U = in.U;
    const double us = in.us, us2 = us * us;
    // P W^T straight into the feature rows, then the exponents and their row maxima;
    // queries (per-row shift) finish here, while the block is in cache.
    project_block(FeatureBlock<T>{in.P, rows, d, dense ? 1.0 : us, b.W, b.side, b.out, F, b.row_log, b.per_row, b.rounding, b.Wt});
    const std::vector<T> wterm = w_terms(b.W, d, A_mat_, A);   // A_mat_ is empty unless A is a matrix
    for (std::size_t i = 0; i < rows; ++i) {
        const double u2 = sum_squares(U + i * d, d) * us2;
        T* e = b.out + i * F;
        const T base = T(log_c - 0.5 * u2);
        if (!mirrored_ && !dense && A == 0.0 && b.finish_rows()) {
            // positive: the row constant goes into the shift instead of a pass over the row,
            // exp(e_j + base - shift) = exp(e_j - (shift - base)); max_j (e_j + base) rounds
            // to the same row log scale as before (rounding is monotonic).
            b.row_log[i] = double(T(max_of(e, F) + base)) + (wx ? 0.5 * u2 : 0.0);
            exp_shift_scale(e, F, T(double(T(b.row_log[i])) - double(base)), eps, T(norm));
            continue;
        }
        if (mirrored_)   // [exp(Wx), exp(-Wx)]
            for (std::size_t j = 0; j < m; ++j) e[m + j] = -e[j] + base;
        if (dense)
            for (std::size_t j = 0; j < m; ++j) e[j] = e[j] + wterm[j] + base;
        else if (A != 0.0)
            for (std::size_t j = 0; j < m; ++j) e[j] = a * e[j] + wterm[j] + base;
        else
            for (std::size_t j = 0; j < m; ++j) e[j] = e[j] + base;
        b.row_log[i] = double(max_of(e, F)) + (wx ? 0.5 * u2 : 0.0);
        if (b.finish_rows()) exp_shift_scale(e, F, T(b.row_log[i]), eps, T(norm));
    }
}

template <class T>
void ExpFamilyMap::finish_impl(T* out, std::size_t F, std::size_t rows, const double*, double shift) const {
    const double norm = 1.0 / std::sqrt(double(F));
    for (std::size_t i = 0; i < rows; ++i) exp_shift_scale(out + i * F, F, T(shift), T(epsilon()), T(norm));
}

template void ExpFamilyMap::block_impl<float>(const FeatureBlock<float>&) const;
template void ExpFamilyMap::block_impl<double>(const FeatureBlock<double>&) const;
template void ExpFamilyMap::finish_impl<float>(float*, std::size_t, std::size_t, const double*, double) const;
template void ExpFamilyMap::finish_impl<double>(double*, std::size_t, std::size_t, const double*, double) const;

std::vector<double> ExpFamilyMap::side_norms2(const Mat<double>& Z, Side side) const {
    const int s = side == Side::query ? 0 : 1;
    const std::size_t n = Z.shape(0), d = Z.shape(1);
    const std::vector<double>& g = shape_.diag[s];
    const std::vector<double>& G = shape_.dense[s];
    std::vector<double> out(n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t r = 0; r < d; ++r) {
            double u = g.empty() ? Z(i, r) : g[r] * Z(i, r);
            if (!G.empty()) {
                u = 0.0;
                for (std::size_t c = 0; c < d; ++c) u += G[r * d + c] * Z(i, c);
            }
            u *= shape_.scale[s];
            out[i] += u * u;
        }
    return out;
}

std::vector<double> column_means(const Mat<double>& X) {
    const std::size_t L = X.shape(0), d = X.shape(1);
    std::vector<double> m(d, 0.0);
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t c = 0; c < d; ++c) m[c] += X(i, c) / double(L);
    return m;
}

std::vector<double> column_mean_squares(const Mat<double>& X) {
    const std::size_t L = X.shape(0), d = X.shape(1);
    std::vector<double> m(d, 0.0);
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t c = 0; c < d; ++c) m[c] += X(i, c) * X(i, c) / double(L);
    return m;
}

std::vector<double> second_moment(const Mat<double>& X) {
    const std::size_t L = X.shape(0), d = X.shape(1);
    std::vector<double> S(d * d, 0.0);
    if (L > 0) gemm<double>(true, false, d, d, L, 1.0 / double(L), X.data(), d, X.data(), d, 0.0, S.data(), d);
    // Exactly symmetric (the eigensolver reads one triangle).
    for (std::size_t r = 0; r < d; ++r)
        for (std::size_t c = 0; c < r; ++c) S[c * d + r] = S[r * d + c] = 0.5 * (S[r * d + c] + S[c * d + r]);
    return S;
}

void symmetric_eigen(const std::vector<double>& S, std::size_t d, std::vector<double>& values,
                     std::vector<double>& vectors) {
    xt::xtensor<double, 2> a = xt::xtensor<double, 2>::from_shape({d, d});
    std::copy(S.begin(), S.end(), a.begin());
    const auto eig = xt::linalg::eigh(a);
    const auto& w = std::get<0>(eig);
    const auto& v = std::get<1>(eig);
    values.assign(w.begin(), w.end());
    vectors.assign(d * d, 0.0);
    for (std::size_t r = 0; r < d; ++r)
        for (std::size_t c = 0; c < d; ++c) vectors[r * d + c] = v(r, c);
}

double quartic_root_ratio(double num, double den) {
    if (!(num > 0.0) && !(den > 0.0)) return 1.0;
    const double r = den > 0.0 ? num / den : 1e8;
    return std::pow(std::clamp(r, 1e-8, 1e8), 0.25);
}

}  // namespace favor
