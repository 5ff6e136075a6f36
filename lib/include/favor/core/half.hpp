#pragma once
// Half precision emulated on float32 (docs/design.md section 2.6): a float rounded to the
// nearest float16 or bfloat16 value, kept in a float. Rounding is to nearest, ties to even;
// a value beyond the format's largest finite number becomes +-Inf; float16 keeps its
// subnormals (multiples of 2^-24 below 2^-14; bfloat16's are float32's own); NaN stays NaN
// with its sign (float16: numpy's payload rule; bfloat16: made quiet); -0 stays -0. Bit manipulation only (no FPU rounding mode, no
// F16C), so the results are the same on every platform. Tested bit-exactly against numpy's
// float16 and an independent bfloat16 rule (tests/test_half.cpp, scripts/half_values.py).
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace favor {

// The rounding a dtype adds to the float32 path: none (float32, float64), fp16, bf16.
enum class Rounding { none, fp16, bf16 };
const char* rounding_name(Rounding r);      // "none" | "float16" | "bfloat16"
double rounding_max(Rounding r);           // largest finite value (none: float32's)

namespace half_detail {
inline std::uint32_t bits_of(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
inline float float_of(std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
// float32 bits of the float16 value nearest to the float with bits w (branch-free, so the
// loops over arrays vectorise).
inline std::uint32_t fp16_bits(std::uint32_t w) {
    const std::uint32_t sign = w & 0x80000000u, a = w & 0x7FFFFFFFu, e = a >> 23;
    // Normal float16 range (|x| >= 2^-14, biased float32 exponent >= 113): keep 10 of the
    // 23 mantissa bits, ties to even; a carry may move to the next binade, and from 65520
    // on (the tie between 65504 and 65536) the value is beyond float16: Inf.
    std::uint32_t n = (a + 0x0FFFu + ((a >> 13) & 1u)) & 0xFFFFE000u;
    n = n >= 0x47800000u ? 0x7F800000u : n;
    // Subnormal float16 range (|x| < 2^-14): a multiple q of 2^-24, q = the significand
    // (implicit bit included) shifted right by s = 126 - e bits, ties to even; s >= 25
    // gives 0 (clamped there so the shifts stay defined; float32 subnormals are < 2^-126).
    const std::uint32_t s_full = 126u - (e < 112u ? e : 112u);   // >= 14
    const std::uint32_t s = s_full < 25u ? s_full : 25u;
    const std::uint32_t mant = (a & 0x007FFFFFu) | 0x00800000u;
    const std::uint32_t q = (mant + (1u << (s - 1u)) - 1u + ((mant >> s) & 1u)) >> s;
    const std::uint32_t sub = bits_of(float(q) * 0x1p-24f);   // exact: q <= 1024
    // NaN: sign and the payload's top 10 bits kept (what a float16 NaN holds), as numpy
    // does: a payload with only low bits set becomes the smallest one, so it stays a NaN
    // (numpy does not quiet a signalling NaN; arithmetic only makes quiet ones).
    const std::uint32_t top = a & 0xFFFFE000u;
    const std::uint32_t nan = top == 0x7F800000u ? 0x7F802000u : top;
    return sign | (e < 113u ? sub : a > 0x7F800000u ? nan : n);
}
// float32 bits of the bfloat16 value nearest to the float with bits w: the upper 16 bits,
// ties to even (a carry out of the largest finite binade gives Inf); NaN quiet, sign kept.
inline std::uint32_t bf16_bits(std::uint32_t w) {
    const std::uint32_t r = (w + 0x7FFFu + ((w >> 16) & 1u)) & 0xFFFF0000u;
    const std::uint32_t nan = (w | 0x00400000u) & 0xFFFF0000u;
    return (w & 0x7FFFFFFFu) > 0x7F800000u ? nan : r;
}
}  // namespace half_detail

// x rounded to float16 / bfloat16 and back to float.
inline float round_fp16(float x) { return half_detail::float_of(half_detail::fp16_bits(half_detail::bits_of(x))); }
inline float round_bf16(float x) { return half_detail::float_of(half_detail::bf16_bits(half_detail::bits_of(x))); }

// p[0..n) rounded in place; returns how many of them are +-Inf afterwards (overflow_fraction
// counts these). Rounding::none leaves p as it is and only counts. The double overload
// takes Rounding::none only (half dtypes run the float path) and throws std::logic_error
// otherwise.
std::size_t round_to(Rounding r, float* p, std::size_t n);
std::size_t round_to(Rounding r, double* p, std::size_t n);

}  // namespace favor
