#pragma once
// Command-line flag values parsed whole, with errors that name the flag: unsigned integers
// (digits only, in a range), comma lists of them (--m 16,32,64) and finite decimal numbers.
// The CLI and `apply`'s request resolution use these; nothing here knows the config schema.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace favor {

// Comma lists "16,32,64" for --m / --L: every item an integer in [lo, hi], digits only (no
// sign, no exponent, no empty item). Errors name `flag`.
std::vector<std::uint64_t> parse_uint_list_text(const std::string& flag, const std::string& text, std::uint64_t lo,
                                                std::uint64_t hi);
// The same list as JSON: one item gives a number, several a list.
nlohmann::json parse_list_flag(const std::string& flag, const std::string& text, std::uint64_t lo, std::uint64_t hi);
nlohmann::json parse_list_flag(const std::string& flag, const std::string& text);

// An unsigned integer flag value, parsed whole: digits only, in [lo, hi]. Errors name `flag`
// ("--m: must be an integer between 1 and 65536, got 0"); `expected` replaces the range in
// the message for an empty value.
std::uint64_t parse_uint_text(const std::string& flag, const std::string& text, std::uint64_t lo, std::uint64_t hi,
                              const std::string& expected = "");

// A number flag value, parsed whole: decimal notation, finite. Errors name `flag`.
double parse_number_text(const std::string& flag, const std::string& text);

}  // namespace favor
