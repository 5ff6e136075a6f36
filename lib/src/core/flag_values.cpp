// Flag values parsed whole (flag_values.hpp): unsigned integers, comma lists of them, and
// finite decimal numbers, each error naming the flag.
#include "favor/core/flag_values.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "favor/core/error.hpp"

namespace favor {

using nlohmann::json;

json parse_list_flag(const std::string& flag, const std::string& text) {
    return parse_list_flag(flag, text, 1, std::numeric_limits<std::uint64_t>::max());
}

std::vector<std::uint64_t> parse_uint_list_text(const std::string& flag, const std::string& text, std::uint64_t lo,
                                                std::uint64_t hi) {
    if (text.empty()) throw Error(flag + ": empty value (expected a list like 16,32,64)");
    std::vector<std::uint64_t> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        out.push_back(parse_uint_text(flag, item, lo, hi, "a list like 16,32,64"));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

json parse_list_flag(const std::string& flag, const std::string& text, std::uint64_t lo, std::uint64_t hi) {
    const std::vector<std::uint64_t> items = parse_uint_list_text(flag, text, lo, hi);
    return items.size() == 1 ? json(items[0]) : json(items);
}

std::uint64_t parse_uint_text(const std::string& flag, const std::string& text, std::uint64_t lo, std::uint64_t hi,
                              const std::string& expected) {
    const std::string range = "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (text.empty())
        throw Error(flag + ": empty value (expected " + (expected.empty() ? range : expected) + ")");
    // Digits only: strtoull would take "-1" and wrap it to 2^64 - 1, and "1e3" or " 5" half.
    if (text.find_first_not_of("0123456789") != std::string::npos)
        throw Error(flag + ": '" + text + "' is not " + range);
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno == ERANGE || end != text.c_str() + text.size())
        throw Error(flag + ": '" + text + "' does not fit in 64 bits (expected " + range + ")");
    if (v < lo || v > hi) throw Error(flag + ": must be " + range + ", got " + text);
    return v;
}

double parse_number_text(const std::string& flag, const std::string& text) {
    if (text.empty()) throw Error(flag + ": empty value (expected a finite number)");
    // Decimal notation only: strtod would also take "inf", "nan", hex and leading spaces.
    if (text.find_first_not_of("0123456789+-.eE") != std::string::npos)
        throw Error(flag + ": '" + text + "' is not a finite number");
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) throw Error(flag + ": '" + text + "' is not a finite number");
    if (!std::isfinite(v) || errno == ERANGE)
        throw Error(flag + ": '" + text + "' is out of range (expected a finite number)");
    return v;
}

}  // namespace favor
