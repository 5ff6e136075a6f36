#include "favor/names.hpp"

#include <algorithm>

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

}  // namespace favor
