#pragma once
// Features that are signed products of powers of a row's coordinates v (poisson, geometric:
// v = x; maclaurin: v = the projections w_{r,i} . x):
//   phi_j(v) = exp(log_c_j) prod_{(l, k) in powers_j} v_l^k,
// evaluated in log space, each row shifted by its largest exponent (docs/design.md section
// 2.3's row_log), and their vector-Jacobian product with respect to v.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace favor {

// The nonzero powers of one feature (coordinate, power) and its log constant.
struct Draw {
    std::vector<std::pair<std::size_t, int>> powers;
    double log_c = 0.0;
};

// One row's exponents: e_j = log_c_j + sum_l k_jl log|v_l| over the coordinates v_l != 0,
// sign_j = the parity of the powers of negative v_l, zeros_j = how many k_jl > 0 fall on a
// v_l = 0 (the feature is 0 unless none does), shift = max e_j over features with zeros_j = 0
// (0 when there is none): phi_j = sign_j exp(e_j - shift) exp(shift).
struct RowExponents {
    std::vector<double> v, la, e;
    std::vector<int> neg, zero, sign, zeros;
    double shift = 0.0;
    RowExponents(std::size_t d, std::size_t m) : v(d), la(d), e(m), neg(d), zero(d), sign(m), zeros(m) {}
    // The row v_l = xs x[l], l < d.
    template <class T>
    void compute(const std::vector<Draw>& ks, const T* x, double xs) {
        for (std::size_t l = 0; l < la.size(); ++l) {
            v[l] = xs * double(x[l]);
            zero[l] = v[l] == 0.0;
            neg[l] = v[l] < 0.0;
            la[l] = zero[l] ? 0.0 : std::log(std::fabs(v[l]));
        }
        double top = -INFINITY;
        for (std::size_t j = 0; j < ks.size(); ++j) {
            e[j] = ks[j].log_c;
            sign[j] = 0;
            zeros[j] = 0;
            for (const auto& [l, k] : ks[j].powers) {
                e[j] += k * la[l];
                sign[j] ^= neg[l] & k;
                zeros[j] += zero[l];
            }
            if (zeros[j] == 0) top = std::max(top, e[j]);
        }
        shift = std::isfinite(top) ? top : 0.0;
    }
    double value(std::size_t j) const {   // sign_j exp(e_j - shift), for zeros_j = 0
        const double val = std::exp(e[j] - shift);
        return sign[j] ? -val : val;
    }
    // The stabilised features of the row, + epsilon, into out (ks.size() entries).
    template <class T>
    void write(T* out, std::size_t F, double epsilon) const {
        for (std::size_t j = 0; j < F; ++j) out[j] = T((zeros[j] == 0 ? value(j) : 0.0) + epsilon);
    }
    // dv (d) = exp(-shift) J^T G for the row's gradient G (ks.size() entries): d phi_j / d v_l
    // = k_jl phi_j / v_l for v_l != 0; at v_l = 0 only k_jl = 1 with no other zero hit
    // contributes, the product of the other powers, sign_j exp(e_j - shift).
    template <class T>
    void vjp(const std::vector<Draw>& ks, const T* G, std::vector<double>& dv) const {
        std::fill(dv.begin(), dv.end(), 0.0);
        for (std::size_t j = 0; j < ks.size(); ++j) {
            const double Gj = double(G[j]);
            if (zeros[j] > 1 || Gj == 0.0) continue;
            const double val = value(j);
            for (const auto& [l, k] : ks[j].powers) {
                if (zeros[j] == 0) dv[l] += Gj * val * k / v[l];
                else if (zero[l] && k == 1) dv[l] += Gj * val;
            }
        }
    }
};

}  // namespace favor
