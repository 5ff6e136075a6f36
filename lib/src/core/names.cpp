#include "favor/core/names.hpp"

#include <algorithm>
#include <cstdio>

namespace favor {

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
            diag = up;
        }
    }
    return row[b.size()];
}

std::string closest_name(const std::string& s, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_d = std::max<std::size_t>(2, s.size() / 3) + 1;
    for (const auto& c : candidates) {
        const std::size_t d = edit_distance(s, c);
        if (d < best_d) best_d = d, best = c;
    }
    return best;
}

std::string suggestion(const std::string& s, const std::vector<std::string>& candidates) {
    const std::string c = closest_name(s, candidates);
    if (!c.empty()) return ", did you mean '" + c + "'?";
    std::string all;
    for (const auto& n : candidates) all += (all.empty() ? "" : ", ") + n;
    return "; expected one of " + all;
}

std::string nul_problem(const std::string& s) {
    const std::size_t at = s.find('\0');
    if (at == std::string::npos) return "";
    return "holds a NUL character (\\u0000) at offset " + std::to_string(at) + "; no name or path can contain one";
}

std::string utf8_problem(const std::string& s) {
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    for (std::size_t i = 0; i < s.size();) {
        const unsigned c = b[i];
        // Lead byte: the sequence length and the least code point it may encode (no overlong).
        const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        unsigned cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
        bool ok = n > 0 && i + n <= s.size();
        for (std::size_t k = 1; ok && k < n; ++k) {
            ok = (b[i + k] & 0xc0) == 0x80;
            cp = (cp << 6) | (b[i + k] & 0x3f);
        }
        const unsigned least = n == 2 ? 0x80 : n == 3 ? 0x800 : n == 4 ? 0x10000 : 0;
        if (!ok || cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            char buf[48];
            std::snprintf(buf, sizeof buf, "byte 0x%02x at offset %zu", c, i);
            return buf;
        }
        i += n;
    }
    return "";
}

}  // namespace favor
