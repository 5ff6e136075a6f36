#pragma once
// Counter-based random numbers whose values are specified by this file alone (docs/design.md
// section 7): the same seed gives the same numbers with any compiler, library, thread count
// or order of work. A stream is a 64-bit key; element i of a stream is a pure function of
// (key, i), so any part of a tensor can be drawn independently.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace favor {

// SplitMix64 finalizer: a bijective 64-bit mixer (Steele, Lea & Flood, OOPSLA 2014).
constexpr std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// FNV-1a hash of a tag, so streams can be named ("W-iid", "inputs-q", ...).
constexpr std::uint64_t tag(std::string_view s) {
    std::uint64_t h = 0xCBF29CE484222325ULL;
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
    return h;
}

// Key of the stream identified by an ordered tuple of ids.
std::uint64_t stream_key(std::initializer_list<std::uint64_t> ids);

// Uniform in the open interval (0, 1): 53 random bits of mix64(key + (i+1) * golden gamma).
double uniform_at(std::uint64_t key, std::uint64_t i);

// Standard normal number i of a stream (Box-Muller on the uniforms 2*(i/2) and 2*(i/2)+1).
double normal_at(std::uint64_t key, std::uint64_t i);

// out[j] = normal_at(key, first + j) for j < n, computed two at a time.
void fill_normal(std::uint64_t key, double* out, std::size_t n, std::uint64_t first = 0);

// Norm of a d-dimensional standard normal vector, i.e. a chi(d) draw; number i of a stream.
double chi_at(std::uint64_t key, std::uint64_t i, std::size_t d);

}  // namespace favor
