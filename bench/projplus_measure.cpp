// projplus_measure: the measurements behind the simplex-plus and qmc numbers of
// docs/estimators.md (not a test: it prints, it asserts nothing; the asserting checks are in
// tests/estimators/test_qmc_simplex_plus.cpp). The positive estimator's kernel MSE with simplex-plus, simplex and
// orthogonal W at the d = 4 small-norm points (N = 100000 trials, paired differences), and
// the slope of log MSE in log m for qmc against iid at d = 16, |x| = |y| = 0.5.
//
//   projplus_measure      (about a minute in a Release build)
#include <cstdio>
#include <vector>

#include "helpers.hpp"
#include "projplus_stats.hpp"

using namespace favor;
using namespace favor_test;

int main() {
    const auto pts = small_norm_points();
    std::printf("positive estimator, d = 4 points, N = 100000 trials: MSE +- se\n");
    for (std::size_t m : {4u, 8u})
        for (std::size_t i = 0; i < pts.size(); ++i) {
            const std::size_t N = 100000;
            const auto p = positive_estimates(Projection("simplex-plus"), m, pts[i], N, 9000 + i);
            const auto s = positive_estimates(Projection("simplex"), m, pts[i], N, 9000 + i);
            const auto o = positive_estimates(Projection("orthogonal"), m, pts[i], N, 9000 + i);
            const Sample sp = describe(p, pts[i].sm()), ss = describe(s, pts[i].sm()), so = describe(o, pts[i].sm());
            std::vector<double> diff(N);
            for (std::size_t t = 0; t < N; ++t) diff[t] = (p[t] - pts[i].sm()) * (p[t] - pts[i].sm()) - (s[t] - pts[i].sm()) * (s[t] - pts[i].sm());
            const auto [dm, dse] = mean_se(diff);
            std::printf("m %zu point %zu: orthogonal %.5f +- %.5f, simplex %.5f +- %.5f, simplex-plus %.5f +- %.5f, "
                        "paired diff %.5f +- %.5f; plus bias %.2e +- %.1e\n",
                        m, i, so.mse, so.mse_se, ss.mse, ss.mse_se, sp.mse, sp.mse_se, dm, dse, sp.mean - pts[i].sm(), sp.se);
        }
    const std::vector<std::size_t> ms = {4, 8, 16, 32, 64, 128, 256};
    for (double angle : {0.0, 0.5 * 3.14159265358979323846}) {
        const SlopeFit q = mse_by_m(Projection("qmc"), ms, 4000, angle, 41), iid = mse_by_m(Projection("iid"), ms, 4000, angle, 41);
        std::printf("d = 16, |x| = |y| = 0.5, angle %.4f, 4000 trials per m: slope qmc %.3f +- %.3f, iid %.3f +- %.3f\n", angle,
                    q.slope, q.slope_se, iid.slope, iid.slope_se);
        for (std::size_t k = 0; k < ms.size(); ++k)
            std::printf("  m %3zu: qmc %.4e +- %.1e   iid %.4e +- %.1e   ratio %.3f\n", ms[k], q.mse[k], q.mse_se[k], iid.mse[k],
                        iid.mse_se[k], q.mse[k] / iid.mse[k]);
    }
    // Non-powers of two (the net property holds only at m = 2^k).
    const std::vector<std::size_t> odd = {6, 12, 24, 48, 96, 192};
    const SlopeFit q = mse_by_m(Projection("qmc"), odd, 4000, 0.5 * 3.14159265358979323846, 43),
                   iid = mse_by_m(Projection("iid"), odd, 4000, 0.5 * 3.14159265358979323846, 43);
    std::printf("non-powers of two, angle pi/2: slope qmc %.3f +- %.3f, iid %.3f +- %.3f\n", q.slope, q.slope_se, iid.slope, iid.slope_se);
    for (std::size_t k = 0; k < odd.size(); ++k)
        std::printf("  m %3zu: qmc %.4e +- %.1e   iid %.4e +- %.1e   ratio %.3f\n", odd[k], q.mse[k], q.mse_se[k], iid.mse[k],
                    iid.mse_se[k], q.mse[k] / iid.mse[k]);
    return 0;
}
