// The vectorised exp against std::exp: a stated error bound over the range favor uses.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "favor/core/vmath.hpp"

using namespace favor;

template <class T>
static double max_rel_error(T lo, T hi, std::size_t n) {
    std::vector<T> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = y[i] = lo + (hi - lo) * T(i) / T(n - 1);
    exp_shifted(y.data(), n, T(0));
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const long double ref = std::exp(static_cast<long double>(x[i]));
        worst = std::max(worst, double(std::fabs((static_cast<long double>(y[i]) - ref) / ref)));
    }
    return worst;
}

TEST_CASE("exp_shifted is within 4 ulp of exp", "[vmath]") {
    // Exponents after the max shift are <= 0; the range covers down to deep underflow-free values.
    REQUIRE(max_rel_error<double>(-700.0, 0.0, 100003) < 4 * 2.2205e-16);
    REQUIRE(max_rel_error<float>(-85.0f, 0.0f, 100003) < 4 * 1.1921e-7);
    std::vector<double> v = {1.0, 2.0, 3.0};
    exp_shifted(v.data(), v.size(), 3.0);
    REQUIRE(v[2] == 1.0);
    REQUIRE(v[0] == Approx(std::exp(-2.0)).epsilon(1e-15));
}
