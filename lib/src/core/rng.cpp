#include "favor/core/rng.hpp"

#include <cmath>

namespace favor {

namespace {
constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio
constexpr double kTwoPi = 6.283185307179586476925286766559;
}  // namespace

std::uint64_t stream_key(std::initializer_list<std::uint64_t> ids) {
    std::uint64_t h = 0x6A09E667F3BCC909ULL;
    for (std::uint64_t id : ids) h = mix64(h ^ mix64(id + kGamma));
    return h;
}

double uniform_at(std::uint64_t key, std::uint64_t i) {
    const std::uint64_t bits = mix64(key + (i + 1) * kGamma) >> 11;   // 53 bits
    return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

namespace {
// Box-Muller: the pair p of a stream gives two independent standard normals.
inline void normal_pair(std::uint64_t key, std::uint64_t p, double& z0, double& z1) {
    const double r = std::sqrt(-2.0 * std::log(uniform_at(key, 2 * p)));
    const double t = kTwoPi * uniform_at(key, 2 * p + 1);
    z0 = r * std::cos(t);
    z1 = r * std::sin(t);
}
}  // namespace

double normal_at(std::uint64_t key, std::uint64_t i) {
    double z0, z1;
    normal_pair(key, i / 2, z0, z1);
    return (i % 2 == 0) ? z0 : z1;
}

void fill_normal(std::uint64_t key, double* out, std::size_t n, std::uint64_t first) {
    std::size_t j = 0;
    if (first % 2 == 1 && n > 0) out[j++] = normal_at(key, first);
    for (; j + 1 < n; j += 2) normal_pair(key, (first + j) / 2, out[j], out[j + 1]);
    if (j < n) out[j] = normal_at(key, first + j);
}

double chi_at(std::uint64_t key, std::uint64_t i, std::size_t d) {
    const std::uint64_t sub = stream_key({key, i});
    double s = 0.0;
    for (std::size_t c = 0; c < d; ++c) {
        const double z = normal_at(sub, c);
        s += z * z;
    }
    return std::sqrt(s);
}

}  // namespace favor
