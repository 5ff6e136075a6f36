// The query rows of row-sampled metrics and the standard error of the sampling
// (docs/design.md section 3.1).
#include "favor/metrics/row_sample.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "favor/core/rng.hpp"

namespace favor {

RowSample draw_query_rows(std::uint64_t seed, std::uint64_t input_seed, std::size_t L, std::size_t N, bool causal) {
    RowSample s;
    s.L = L;
    if (N >= L) {
        s.rows.resize(L);
        std::iota(s.rows.begin(), s.rows.end(), std::size_t(0));
        return s;
    }
    const std::uint64_t key = input_seed == 0 ? stream_key({seed, tag("query-rows"), L, N})
                                              : stream_key({seed, tag("query-rows"), L, N, input_seed});
    s.stratified = causal;
    if (causal) {
        for (std::size_t k = 0; k < N; ++k) {
            const std::size_t lo = k * L / N, hi = (k + 1) * L / N;
            s.rows.push_back(lo + std::min(hi - lo - 1, std::size_t(uniform_at(key, k) * double(hi - lo))));
        }
        return s;
    }
    std::vector<std::pair<double, std::size_t>> u(L);
    for (std::size_t i = 0; i < L; ++i) u[i] = {uniform_at(key, i), i};
    std::nth_element(u.begin(), u.begin() + std::ptrdiff_t(N), u.end());
    for (std::size_t k = 0; k < N; ++k) s.rows.push_back(u[k].second);
    std::sort(s.rows.begin(), s.rows.end());
    return s;
}

std::size_t row_groups(std::size_t N) { return std::min(N, kRowGroups); }

std::size_t group_begin(std::size_t g, std::size_t groups, std::size_t N) { return g * N / groups; }

namespace {
// k/(k-1) sum over the set of (p - mean)^2.
double collapsed(const double* p, std::size_t k) {
    const double mean = std::accumulate(p, p + k, 0.0) / double(k);
    double ss = 0.0;
    for (std::size_t i = 0; i < k; ++i) ss += (p[i] - mean) * (p[i] - mean);
    return double(k) / double(k - 1) * ss;
}
}  // namespace

double row_sem(double full, const std::vector<double>& deleted, const RowSample& s) {
    if (s.all()) return 0.0;
    const std::size_t G = deleted.size(), N = s.rows.size();
    if (G < 2 || !std::isfinite(full)) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> p(G);
    for (std::size_t g = 0; g < G; ++g) {
        if (!std::isfinite(deleted[g])) return std::numeric_limits<double>::quiet_NaN();
        p[g] = double(G) * full - double(G - 1) * deleted[g];
    }
    const double fpc = 1.0 - double(N) / double(s.L);
    double var = 0.0;
    if (!s.stratified) {
        var = collapsed(p.data(), G) / double(G) / double(G);   // s^2(p) / G, s^2 = collapsed / G
    } else {
        for (std::size_t g = 0; g < G; g += kCollapsed) {
            const std::size_t k = G - g < 2 * kCollapsed ? G - g : kCollapsed;   // the last set takes the rest
            var += collapsed(p.data() + g, k);
            if (k != kCollapsed) break;
        }
        var /= double(G) * double(G);
    }
    return std::sqrt(fpc * var);
}

}  // namespace favor
