#include "favor/estimators/qmc.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/core/rng.hpp"
#include "estimators/sobol_directions.hpp"

namespace favor {

static_assert(kSobolMaxDim == detail::kSobolTableDims, "qmc.hpp and the embedded table disagree");

double inverse_normal_cdf(double p) {
    // AS241 (Wichura 1988), PPND16: three rational approximations of degree 7.
    if (!(p >= 0.0 && p <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
    if (p == 0.0) return -std::numeric_limits<double>::infinity();
    if (p == 1.0) return std::numeric_limits<double>::infinity();
    const double q = p - 0.5;
    if (std::fabs(q) <= 0.425) {
        const double r = 0.180625 - q * q;
        const double num = (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r +
                                 6.7265770927008700853e+4) * r + 4.5921953931549871457e+4) * r +
                               1.3731693765509461125e+4) * r + 1.9715909503065514427e+3) * r +
                             1.3314166789178437745e+2) * r + 3.3871328727963666080e+0);
        const double den = (((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r +
                                 3.9307895800092710610e+4) * r + 2.1213794301586595867e+4) * r +
                               5.3941960214247511077e+3) * r + 6.8718700749205790830e+2) * r +
                             4.2313330701600911252e+1) * r + 1.0);
        return q * num / den;
    }
    double r = std::sqrt(-std::log(q < 0.0 ? p : 1.0 - p));
    double num, den;
    if (r <= 5.0) {
        r -= 1.6;
        num = (((((((7.7454501427834140764e-4 * r + 2.2723844989269184583e-2) * r +
                    2.4178072517745061177e-1) * r + 1.2704582524523683826e+0) * r +
                  3.6478483247632045960e+0) * r + 5.7694972214606914055e+0) * r +
                4.6303378461565452959e+0) * r + 1.4234371107496835773e+0);
        den = (((((((1.0507500716444168432e-9 * r + 5.4759380849953449460e-4) * r +
                    1.5198666563616457197e-2) * r + 1.4810397642748007459e-1) * r +
                  6.8976733498510000455e-1) * r + 1.6763848301838038494e+0) * r +
                2.0531916266377588219e+0) * r + 1.0);
    } else {
        r -= 5.0;
        num = (((((((2.0103343992922881327e-7 * r + 2.7115555687434875781e-5) * r +
                    1.2426609473880784386e-3) * r + 2.6532189526576123093e-2) * r +
                  2.9656057182850489123e-1) * r + 1.7848265399172913358e+0) * r +
                5.4637849111641143699e+0) * r + 6.6579046435011037772e+0);
        den = (((((((2.0442631033899397856e-15 * r + 1.4215117583164458887e-7) * r +
                    1.8463183175100546818e-5) * r + 7.8686913114561329059e-4) * r +
                  1.4875361290850614853e-2) * r + 1.3692988092273580531e-1) * r +
                5.9983220655588793769e-1) * r + 1.0);
    }
    const double x = num / den;
    return q < 0.0 ? -x : x;
}

namespace {
// Direction integers V_k (k = 0 .. 31, V_k = m_(k+1) 2^(31-k)) of every embedded dimension,
// by the Bratley & Fox recurrence for the primitive polynomial of degree s:
// V_k = a_1 V_(k-1) ^ ... ^ a_(s-1) V_(k-s+1) ^ V_(k-s) ^ (V_(k-s) >> s).
const std::vector<std::array<std::uint32_t, 32>>& directions() {
    static const std::vector<std::array<std::uint32_t, 32>> v = [] {
        std::vector<std::array<std::uint32_t, 32>> out(kSobolMaxDim);
        for (std::size_t k = 0; k < 32; ++k) out[0][k] = std::uint32_t(1) << (31 - k);   // van der Corput
        for (std::size_t j = 1; j < kSobolMaxDim; ++j) {
            const detail::SobolInit& e = detail::kSobolInit[j - 1];
            std::size_t s = 0;
            while ((e.poly >> (s + 1)) != 0) ++s;   // degree: the highest set bit
            auto& V = out[j];
            for (std::size_t k = 0; k < s && k < 32; ++k) V[k] = std::uint32_t(e.m[k]) << (31 - k);
            for (std::size_t k = s; k < 32; ++k) {
                std::uint32_t x = V[k - s] ^ (V[k - s] >> s);
                for (std::size_t t = 1; t < s; ++t)
                    if ((e.poly >> (s - t)) & 1u) x ^= V[k - t];
                V[k] = x;
            }
        }
        return out;
    }();
    return v;
}
}  // namespace

std::uint32_t sobol_int(std::uint64_t i, std::size_t j) {
    if (j >= kSobolMaxDim) throw Error("sobol_int: dimension " + std::to_string(j) + " >= " + std::to_string(kSobolMaxDim));
    if (i >> 32) throw Error("sobol_int: point index " + std::to_string(i) + " >= 2^32");
    const auto& V = directions()[j];
    std::uint64_t g = i ^ (i >> 1);
    std::uint32_t x = 0;
    for (std::size_t k = 0; g != 0; ++k, g >>= 1)
        if (g & 1u) x ^= V[k];
    return x;
}

std::uint32_t owen_scramble(std::uint32_t x, std::uint64_t key) {
    std::uint32_t out = 0;
    for (unsigned k = 0; k < 32; ++k) {   // digit k + 1; its node: 2^k + the k digits above it
        const std::uint64_t node = (std::uint64_t(1) << k) | (std::uint64_t(x) >> (32 - k));
        const std::uint32_t flip = uniform_at(key, node) < 0.5 ? 1u : 0u;
        out |= (((x >> (31 - k)) & 1u) ^ flip) << (31 - k);
    }
    return out;
}

double owen_uniform(std::uint32_t x, std::uint64_t key) {
    const double tail = std::floor(uniform_at(key, (std::uint64_t(1) << 32) + x) * 0x1.0p20);   // 20 bits
    return (static_cast<double>(owen_scramble(x, key)) * 0x1.0p20 + tail + 0.5) * 0x1.0p-52;
}

Mat<double> scrambled_sobol(std::size_t m, std::size_t d, std::uint64_t key) {
    if (d > kSobolMaxDim)
        throw Error("qmc: d = " + std::to_string(d) + " exceeds the " + std::to_string(kSobolMaxDim) +
                    " dimensions of the embedded Sobol direction numbers");
    if (std::uint64_t(m) > (std::uint64_t(1) << 32)) throw Error("qmc: m = " + std::to_string(m) + " exceeds 2^32 points");
    Mat<double> U = Mat<double>::from_shape({m, d});
    for (std::size_t j = 0; j < d; ++j) {
        const std::uint64_t kj = stream_key({key, j});
        for (std::size_t i = 0; i < m; ++i) U(i, j) = owen_uniform(sobol_int(i, j), kj);
    }
    return U;
}

Mat<double> qmc_gaussian(std::size_t m, std::size_t d, std::uint64_t key) {
    Mat<double> W = scrambled_sobol(m, d, key);
    for (double& v : W) v = inverse_normal_cdf(v);
    return W;
}

}  // namespace favor
