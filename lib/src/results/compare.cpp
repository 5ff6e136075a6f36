#include "favor/results/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/core/rng.hpp"
#include "favor/metrics/metric_table.hpp"

namespace favor {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The plain mean of values already scaled (|x| <= 1, so no sum overflows).
double plain_mean(const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v;
    return s / double(x.size());
}

// Sample variance (n - 1 denominator), two passes for accuracy; x scaled as above.
double variance_of(const std::vector<double>& x, double mean) {
    double ss = 0;
    for (double v : x) ss += (v - mean) * (v - mean);
    return ss / double(x.size() - 1);
}

// A uniform index in [0, n) from number i of a stream.
std::size_t index_at(std::uint64_t key, std::uint64_t i, std::size_t n) {
    const auto j = static_cast<std::size_t>(uniform_at(key, i) * double(n));
    return j < n ? j : n - 1;
}

// |t| >= |t_obs| up to rounding: mathematically tied permutations must count.
bool as_extreme(double t, double t_obs) { return std::fabs(t) >= std::fabs(t_obs) * (1 - kTieTolerance); }

// x / y, with x / x = 1 (also 0 / 0): identical samples have ratio 1.
double ratio_of(double x, double y) { return x == y ? 1.0 : x / y; }

// C(n, k), or cap + 1 as soon as it exceeds cap.
std::uint64_t binomial_capped(std::size_t n, std::size_t k, std::uint64_t cap) {
    k = std::min(k, n - k);
    std::uint64_t r = 1;
    for (std::size_t i = 1; i <= k; ++i) {
        r = r * (n - k + i) / i;   // exact: r * (n - k + i) = i * C(n - k + i, i)
        if (r > cap) return cap + 1;
    }
    return r;
}

// Linear-interpolation quantile (numpy's default) of sorted values.
double quantile_sorted(const std::vector<double>& v, double q) {
    const double pos = q * double(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    const double frac = pos - double(lo);
    if (frac == 0 || v[lo] == v[hi]) return v[lo];
    if (!std::isfinite(v[lo]) || !std::isfinite(v[hi])) return frac < 0.5 ? v[lo] : v[hi];
    const double step = v[hi] - v[lo];   // overflows only for ratios near +-1.8e308 of both signs
    return std::isfinite(step) ? v[lo] + frac * step : (1 - frac) * v[lo] + frac * v[hi];
}

// The studentized statistics of values scaled into [-1, 1] (scaled_copy): every sum, square
// and difference is then finite and no square of a value above 2^-511 underflows to 0.
double t_of_scaled(const std::vector<double>& d) {
    const double m = plain_mean(d);
    if (m == 0) return 0.0;
    const double var = variance_of(d, m);
    if (var == 0) return m > 0 ? kInf : -kInf;
    return m / std::sqrt(var / double(d.size()));
}

double welch_of_scaled(const std::vector<double>& a, const std::vector<double>& b) {
    const double ma = plain_mean(a), mb = plain_mean(b);
    if (ma == mb) return 0.0;
    const double se2 = variance_of(a, ma) / double(a.size()) + variance_of(b, mb) / double(b.size());
    if (se2 == 0) return ma > mb ? kInf : -kInf;
    return (ma - mb) / std::sqrt(se2);
}

// x times 2^-e, exact (ldexp: no overflowing 2^-e when e is large and negative).
std::vector<double> times(const std::vector<double>& x, int e) {
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::ldexp(x[i], -e);
    return out;
}

}  // namespace

int scale_exponent(std::initializer_list<const std::vector<double>*> samples, double constant) {
    double top = std::isfinite(constant) ? std::fabs(constant) : 0.0;
    for (const auto* x : samples)
        for (double v : *x)
            if (std::isfinite(v)) top = std::max(top, std::fabs(v));
    int e = 0;
    if (top > 0) std::frexp(top, &e);   // top = f 2^e, f in [0.5, 1)
    return e;
}

double mean_of(const std::vector<double>& x) {
    const int e = scale_exponent({&x});
    return std::ldexp(plain_mean(times(x, e)), e);
}

std::vector<double> differences(const std::vector<double>& a, const std::vector<double>& b) {
    const int e = scale_exponent({&a, &b});
    std::vector<double> d(a.size());
    for (std::size_t t = 0; t < d.size(); ++t) d[t] = std::ldexp(a[t], -e) - std::ldexp(b[t], -e);
    return d;
}

std::vector<double> differences(const std::vector<double>& x, double c) {
    const int e = scale_exponent({&x}, c);
    std::vector<double> d(x.size());
    for (std::size_t t = 0; t < d.size(); ++t) d[t] = std::ldexp(x[t], -e) - std::ldexp(c, -e);
    return d;
}

double paired_t(const std::vector<double>& d) { return t_of_scaled(times(d, scale_exponent({&d}))); }

double welch_t(const std::vector<double>& a, const std::vector<double>& b) {
    const int e = scale_exponent({&a, &b});
    return welch_of_scaled(times(a, e), times(b, e));
}

// Sign-flip permutation test (Fisher's randomization test for paired data, studentized as
// in Janssen 1999): under H0 each d_t is as likely to be -d_t, so every sign pattern is
// equally likely; p is the share of patterns whose paired t is at least as extreme.
double paired_signflip_p(const std::vector<double>& d0, std::uint64_t key, const PermutationOptions& opt) {
    const std::size_t n = d0.size();
    if (n < 2) return kNaN;
    if (std::all_of(d0.begin(), d0.end(), [](double v) { return v == 0; })) return 1.0;
    const std::vector<double> d = times(d0, scale_exponent({&d0}));   // t is scale-free
    const double t_obs = t_of_scaled(d);
    std::vector<double> x(n);
    const bool exact = n < 63 && (std::uint64_t(1) << n) <= opt.exact_limit;
    if (exact) {
        const std::uint64_t patterns = std::uint64_t(1) << n;
        std::uint64_t count = 0;
        for (std::uint64_t s = 0; s < patterns; ++s) {
            for (std::size_t j = 0; j < n; ++j) x[j] = (s >> j) & 1 ? -d[j] : d[j];
            count += as_extreme(t_of_scaled(x), t_obs);
        }
        return double(count) / double(patterns);
    }
    std::uint64_t count = 0;
    for (std::uint64_t r = 0; r < opt.monte_carlo; ++r) {
        for (std::size_t j = 0; j < n; ++j) x[j] = uniform_at(key, r * n + j) < 0.5 ? -d[j] : d[j];
        count += as_extreme(t_of_scaled(x), t_obs);
    }
    return double(1 + count) / double(1 + opt.monte_carlo);
}

// Studentized permutation test for two samples (Janssen 1997): the Welch t over every way of
// splitting the pooled values into groups of the observed sizes. Under exchangeability all
// splits are equally likely (exact); studentizing keeps it valid for unequal variances.
double welch_permutation_p(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t key,
                           const PermutationOptions& opt) {
    const std::size_t na = a.size(), nb = b.size(), n = na + nb;
    if (na < 2 || nb < 2) return kNaN;
    const int e = scale_exponent({&a, &b});   // Welch's t is scale-free
    std::vector<double> pooled = times(a, e);
    for (double v : b) pooled.push_back(std::ldexp(v, -e));
    if (std::all_of(pooled.begin(), pooled.end(), [&](double v) { return v == pooled[0]; })) return 1.0;
    const double t_obs = welch_of_scaled(times(a, e), times(b, e));
    std::vector<double> ga(na), gb(nb);
    std::vector<char> in_a(n);
    // Welch t of the split `in_a`, each group in pooled order (the observed split gives t_obs).
    auto split_t = [&]() {
        std::size_t ia = 0, ib = 0;
        for (std::size_t j = 0; j < n; ++j) (in_a[j] ? ga[ia++] : gb[ib++]) = pooled[j];
        return welch_of_scaled(ga, gb);
    };
    const std::uint64_t splits = binomial_capped(n, na, opt.exact_limit);
    if (splits <= opt.exact_limit) {
        std::vector<std::size_t> idx(na);   // the chosen indices, in lexicographic order
        std::iota(idx.begin(), idx.end(), 0);
        std::uint64_t count = 0;
        while (true) {
            std::fill(in_a.begin(), in_a.end(), 0);
            for (std::size_t i : idx) in_a[i] = 1;
            count += as_extreme(split_t(), t_obs);
            std::size_t i = na;   // advance to the next combination
            while (i > 0 && idx[i - 1] == n - na + i - 1) --i;
            if (i == 0) break;
            ++idx[i - 1];
            for (std::size_t j = i; j < na; ++j) idx[j] = idx[j - 1] + 1;
        }
        return double(count) / double(splits);
    }
    std::vector<std::size_t> perm(n);
    std::uint64_t count = 0;
    for (std::uint64_t r = 0; r < opt.monte_carlo; ++r) {
        std::iota(perm.begin(), perm.end(), 0);   // partial Fisher-Yates: a uniform n_a-subset
        for (std::size_t j = 0; j < na; ++j) std::swap(perm[j], perm[j + index_at(key, r * na + j, n - j)]);
        std::fill(in_a.begin(), in_a.end(), 0);
        for (std::size_t j = 0; j < na; ++j) in_a[perm[j]] = 1;
        count += as_extreme(split_t(), t_obs);
    }
    return double(1 + count) / double(1 + opt.monte_carlo);
}

// Percentile bootstrap (Efron & Tibshirani 1993, ch. 13) of the ratio of means.
std::vector<double> ratio_bootstrap(const std::vector<double>& a0, const std::vector<double>& b0, bool paired,
                                    std::uint64_t key, std::size_t resamples) {
    const int e = scale_exponent({&a0, &b0});   // the ratio is scale-free; the sums then cannot overflow
    const std::vector<double> a = times(a0, e), b = times(b0, e);
    const std::size_t na = a.size(), nb = b.size();
    std::vector<double> ratios(resamples);
    for (std::size_t r = 0; r < resamples; ++r) {
        double sa = 0, sb = 0;
        if (paired) {
            for (std::size_t j = 0; j < na; ++j) {
                const std::size_t k = index_at(key, r * na + j, na);
                sa += a[k];
                sb += b[k];
            }
        } else {
            for (std::size_t j = 0; j < na; ++j) sa += a[index_at(key, r * (na + nb) + j, na)];
            for (std::size_t j = 0; j < nb; ++j) sb += b[index_at(key, r * (na + nb) + na + j, nb)];
        }
        ratios[r] = ratio_of(sa / double(na), sb / double(nb));
    }
    std::sort(ratios.begin(), ratios.end());
    return ratios;
}

std::vector<double> baseline_ratio_bootstrap(const std::vector<double>& x0, double baseline0, std::uint64_t key,
                                             std::size_t resamples) {
    const int e = scale_exponent({&x0}, baseline0);
    const std::vector<double> x = times(x0, e);
    const double baseline = std::ldexp(baseline0, -e);
    const std::size_t n = x.size();
    std::vector<double> ratios(resamples);
    for (std::size_t r = 0; r < resamples; ++r) {
        double s = 0;
        for (std::size_t j = 0; j < n; ++j) s += x[index_at(key, r * n + j, n)];
        ratios[r] = ratio_of(s / double(n), baseline);
    }
    std::sort(ratios.begin(), ratios.end());
    return ratios;
}

std::pair<double, double> percentile_interval(const std::vector<double>& sorted, double level) {
    return {quantile_sorted(sorted, (1 - level) / 2), quantile_sorted(sorted, (1 + level) / 2)};
}

std::pair<double, double> ratio_ci(const std::vector<double>& a, const std::vector<double>& b, bool paired,
                                   std::uint64_t key, std::size_t resamples) {
    return percentile_interval(ratio_bootstrap(a, b, paired, key, resamples), 0.95);
}

std::pair<double, double> baseline_ratio_ci(const std::vector<double>& x, double baseline, std::uint64_t key,
                                            std::size_t resamples) {
    return percentile_interval(baseline_ratio_bootstrap(x, baseline, key, resamples), 0.95);
}

double signflip_p_min(std::size_t n, const PermutationOptions& opt) {
    if (n < 2) return kNaN;
    if (n < 63 && (std::uint64_t(1) << n) <= opt.exact_limit) return 2.0 / double(std::uint64_t(1) << n);
    return 1.0 / double(1 + opt.monte_carlo);
}

double welch_p_min(std::size_t na, std::size_t nb, const PermutationOptions& opt) {
    if (na < 2 || nb < 2) return kNaN;
    const std::uint64_t splits = binomial_capped(na + nb, na, opt.exact_limit);
    if (splits <= opt.exact_limit) return (na == nb ? 2.0 : 1.0) / double(splits);
    return 1.0 / double(1 + opt.monte_carlo);
}

std::size_t trials_needed(std::size_t family, double alpha, bool signflip) {
    for (std::size_t n = 2; n <= 64; ++n)
        if (double(family) * (signflip ? signflip_p_min(n) : welch_p_min(n, n)) < alpha) return n;
    return 0;
}

std::string compare_power_warning(std::size_t cells, std::size_t variants, std::size_t trials, double alpha) {
    const std::size_t family = cells * (variants * (variants - 1) / 2 + variants);
    if (variants == 0 || (trials >= 2 && double(family) * signflip_p_min(trials) < alpha)) return "";
    auto shown = [](double v) { return short_number(format_number(v), 3); };
    const std::size_t need = trials_needed(family, alpha, true);
    return "with " + std::to_string(trials) + " trials no favor compare verdict is reachable: Holm over the " +
           std::to_string(family) + " comparisons per metric this run implies (" + std::to_string(cells) +
           " cells: every pair of " + std::to_string(variants) + " variants and each against uniform) needs p < " +
           shown(alpha / double(family)) + ", the smallest sign-flip p with " + std::to_string(trials) +
           " trials is " + (trials < 2 ? std::string("undefined") : shown(signflip_p_min(trials))) +
           (need ? "; " + std::to_string(need) + " trials would reach it" : "") +
           " (favor compare --against / --pairs test fewer)";
}

// Holm (1979): the i-th smallest of m p-values is multiplied by m - i + 1, then made
// monotone by a running maximum and capped at 1.
std::vector<double> holm(const std::vector<double>& p) {
    const std::size_t m = p.size();
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return p[i] < p[j]; });
    std::vector<double> adj(m);
    double running = 0;
    for (std::size_t i = 0; i < m; ++i) {
        running = std::max(running, std::min(1.0, double(m - i) * p[order[i]]));
        adj[order[i]] = running;
    }
    return adj;
}

const std::vector<std::string>& compare_metric_names() {
    static const std::vector<std::string> names = metric_names();
    return names;
}

}  // namespace favor
