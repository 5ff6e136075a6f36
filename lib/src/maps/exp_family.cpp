#include "favor/exp_family.hpp"

#include <cmath>

#include "favor/names.hpp"
#include "favor/vmath.hpp"

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

template <class T>
void ExpFamilyMap::block_impl(const FeatureBlock<T>& b) const {
    const std::size_t m = b.W.shape(0), d = b.d, F = b.F;
    // e_ij = sqrt(1-4A) w_j.x_i + A |w_j|^2 - |x_i|^2/2 + (d/4) log(1-4A)
    const T a = T(std::sqrt(1.0 - 4.0 * A_));
    const double log_c = 0.25 * double(d) * std::log1p(-4.0 * A_);
    const double norm = 1.0 / std::sqrt(double(F));
    const T eps = T(epsilon());
    const double xs2 = b.xs * b.xs;
    // "max_wx": the shift leaves out the -|x|^2/2 term, so epsilon lands where the official
    // code puts it; with epsilon = 0 it would only lose range, so then it is not used.
    const bool wx = after_ == EpsilonAfter::max_wx && epsilon() != 0.0;
    // P = X W^T straight into the feature rows, then the exponents and their row maxima;
    // queries (per-row shift) finish here, while the block is in cache.
    project_block(b);
    std::vector<T> wterm;
    if (A_ != 0.0) {
        wterm.assign(m, T(0));
        for (std::size_t j = 0; j < m; ++j) {
            double w2 = 0.0;
            for (std::size_t c = 0; c < d; ++c) w2 += double(b.W(j, c)) * double(b.W(j, c));
            wterm[j] = T(A_ * w2);
        }
    }
    for (std::size_t i = 0; i < b.rows; ++i) {
        const double x2 = sum_squares(b.X + i * d, d) * xs2;
        T* e = b.out + i * F;
        const T base = T(log_c - 0.5 * x2);
        if (mirrored_)   // [exp(Wx), exp(-Wx)]
            for (std::size_t j = 0; j < m; ++j) e[m + j] = -e[j] + base;
        if (A_ != 0.0)
            for (std::size_t j = 0; j < m; ++j) e[j] = a * e[j] + wterm[j] + base;
        else
            for (std::size_t j = 0; j < m; ++j) e[j] = e[j] + base;
        b.row_log[i] = double(max_of(e, F)) + (wx ? 0.5 * x2 : 0.0);
        if (b.side == Side::query) exp_shift_scale(e, F, T(b.row_log[i]), eps, T(norm));
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

}  // namespace favor
