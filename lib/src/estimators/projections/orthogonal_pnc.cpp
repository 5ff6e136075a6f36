// orthogonal-pnc, pairwise norm-coupled ORF (Reid, Markou, Choromanski, Turner & Weller,
// "Variance-reducing couplings for random features", arXiv 2405.16541, ICLR 2025, section 3:
// for two orthogonal frequencies the optimal-transport problem over their norms is solved by
// the negative monotone coupling, used pairwise for any m; docs/estimators.md section 2):
// ORF's Haar blocks (the `orthogonal` block stream), and within a block rows 2k and 2k+1 get
// the antithetic chi(d) norms F^-1(u_k), F^-1(1 - u_k), u_k uniform, F the chi(d) CDF (an
// odd d's last row: F^-1(u) alone). Each norm is chi(d) and independent of the Haar direction,
// so every row is exactly N(0, I_d); no training, one quantile per row.
#include <cmath>

#include "blocks.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

namespace {
// The regularised lower incomplete gamma P(a, x): the series for x < a + 1, else 1 - Q with
// Q by Lentz's continued fraction (both to float64 rounding; Abramowitz & Stegun 6.5.29, 6.5.31).
double gamma_p(double a, double x) {
    if (x <= 0.0) return 0.0;
    const double log_front = a * std::log(x) - x - std::lgamma(a);
    if (x < a + 1.0) {
        double term = 1.0 / a, sum = term;
        for (double n = 1.0; std::fabs(term) > 1e-17 * sum; n += 1.0) sum += term *= x / (a + n);
        return std::exp(log_front) * sum;
    }
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, dd = 1.0 / b, h = dd;
    for (double i = 1.0; i < 1000.0; i += 1.0) {
        const double an = -i * (i - a);
        b += 2.0;
        dd = an * dd + b;
        dd = 1.0 / (std::fabs(dd) < tiny ? tiny : dd);
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        const double delta = dd * c;
        h *= delta;
        if (std::fabs(delta - 1.0) < 1e-16) break;
    }
    return 1.0 - std::exp(log_front) * h;
}

// F^-1(u) of chi(d), F(r) = P(d/2, r^2/2): bisection on [0, hi] to the last bit (the CDF is
// monotone, so this cannot fail; ~60 steps).
double chi_quantile(double u, std::size_t d) {
    const double a = 0.5 * double(d);
    double lo = 0.0, hi = std::sqrt(double(d)) + 40.0;   // P(a, hi^2/2) = 1 to float64 at any d
    for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; ++it) {
        const double mid = 0.5 * (lo + hi);
        (gamma_p(a, 0.5 * mid * mid) < u ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}
}  // namespace

Mat<double> draw_orthogonal_pnc(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    const DrawKeys keys{seed, d, trial};
    const std::uint64_t norm_key = keys.whole("W-pnc-norms");
    return stack_blocks(
        m, d, d, [&](std::size_t b) { return orthogonal_block(keys.block("W-orthogonal-block", b), d, true); },
        [&](std::size_t r) {
            const std::size_t in_block = r % d, pair = r / d * d + in_block / 2 * 2;   // first row of its pair
            const double u = uniform_at(norm_key, pair);
            const bool second = in_block % 2 == 1;
            return chi_quantile(second ? 1.0 - u : u, d);
        });
}

}  // namespace favor
