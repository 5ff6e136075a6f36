#include "favor/core/half.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace favor {

const char* rounding_name(Rounding r) {
    switch (r) {
        case Rounding::none: return "none";
        case Rounding::fp16: return "float16";
        case Rounding::bf16: return "bfloat16";
    }
    return "?";
}

double rounding_max(Rounding r) {
    switch (r) {
        case Rounding::fp16: return 65504.0;
        case Rounding::bf16: return double(half_detail::float_of(0x7F7F0000u));   // (2 - 2^-7) 2^127
        case Rounding::none: break;
    }
    return double(std::numeric_limits<float>::max());
}

namespace {
// The loop body is branch-free over 32-bit words, so it vectorises.
template <std::uint32_t (*Bits)(std::uint32_t)>
std::size_t round_words(float* p, std::size_t n) {
    std::size_t inf = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t r = Bits(half_detail::bits_of(p[i]));
        inf += (r & 0x7FFFFFFFu) == 0x7F800000u;
        p[i] = half_detail::float_of(r);
    }
    return inf;
}

template <class T>
std::size_t count_inf(const T* p, std::size_t n) {
    std::size_t inf = 0;
    for (std::size_t i = 0; i < n; ++i) inf += std::isinf(p[i]);
    return inf;
}
}  // namespace

std::size_t round_to(Rounding r, float* p, std::size_t n) {
    switch (r) {
        case Rounding::fp16: return round_words<half_detail::fp16_bits>(p, n);
        case Rounding::bf16: return round_words<half_detail::bf16_bits>(p, n);
        case Rounding::none: break;
    }
    return count_inf(p, n);
}

std::size_t round_to(Rounding r, double* p, std::size_t n) {
    if (r != Rounding::none)
        throw std::logic_error(std::string("round_to: ") + rounding_name(r) + " rounding runs on the float32 path only");
    return count_inf(p, n);
}

}  // namespace favor
