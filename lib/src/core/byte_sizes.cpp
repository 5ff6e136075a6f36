// Byte counts as text: formatting for messages, parsing for size flags.
#include "favor/core/byte_sizes.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>
#include <vector>

#include "favor/core/error.hpp"

namespace favor {

std::string format_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (std::fabs(b) >= 1024 && u < 5) b /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : (b < 10 ? "%.2g %s" : "%.3g %s"), b, units[u]);
    // "%.2g" of 1.0 is "1": fine; of 9.96 "10": fine.
    return buf;
}

std::size_t parse_size_text(const std::string& flag, const std::string& text) {
    const std::string expected = "a size like 8G, 512M or 1000000 (bytes)";
    if (text.empty()) throw Error(flag + ": empty value (expected " + expected + ")");
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string num = text.substr(0, i), unit = text.substr(i);
    double v = 0;
    try {
        std::size_t used = 0;
        if (num.empty() || num.front() == '.') throw std::invalid_argument(text);
        v = std::stod(num, &used);
        if (used != num.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        throw Error(flag + ": '" + text + "' is not " + expected);
    }
    static const std::vector<std::pair<std::string, double>> units = {
        {"", 1}, {"B", 1}, {"K", 1024}, {"KB", 1024}, {"KiB", 1024}, {"M", kMiB}, {"MB", kMiB}, {"MiB", kMiB},
        {"G", 1024 * kMiB}, {"GB", 1024 * kMiB}, {"GiB", 1024 * kMiB}, {"T", kMiB * kMiB}, {"TB", kMiB * kMiB}, {"TiB", kMiB * kMiB}};
    for (const auto& [u, f] : units)
        if (unit == u) {
            const double bytes = v * f;
            if (!(bytes >= 1) || bytes > 1.8e19) throw Error(flag + ": must be at least 1 byte and fit in 64 bits, got '" + text + "'");
            return std::size_t(bytes);
        }
    throw Error(flag + ": unknown unit '" + unit + "' in '" + text + "' (expected " + expected + ")");
}

}  // namespace favor
