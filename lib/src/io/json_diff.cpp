#include "favor/io/json_diff.hpp"

#include <set>

namespace favor {

using nlohmann::json;

namespace {
std::string shown(const json* v) {
    if (!v) return "(absent)";
    std::string s = v->dump();
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
}
std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
}  // namespace

std::string json_difference(const json& a, const json& b, const std::string& path) {
    if (a == b) return "";
    const std::string where = path.empty() ? "(the whole document)" : path;
    if (a.is_object() && b.is_object()) {
        std::set<std::string> keys;
        for (const auto& [k, v] : a.items()) keys.insert(k);
        for (const auto& [k, v] : b.items()) keys.insert(k);
        for (const auto& k : keys) {
            const json* x = a.contains(k) ? &a.at(k) : nullptr;
            const json* y = b.contains(k) ? &b.at(k) : nullptr;
            if (!x || !y) return join(path, k) + ": " + shown(x) + " vs " + shown(y);
            const std::string d = json_difference(*x, *y, join(path, k));
            if (!d.empty()) return d;
        }
    }
    if (a.is_array() && b.is_array()) {
        if (a.size() != b.size())
            return where + ": " + std::to_string(a.size()) + " entries vs " + std::to_string(b.size()) + " (" +
                   shown(&a) + " vs " + shown(&b) + ")";
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::string d = json_difference(a[i], b[i], path + "[" + std::to_string(i) + "]");
            if (!d.empty()) return d;
        }
    }
    return where + ": " + shown(&a) + " vs " + shown(&b);
}

}  // namespace favor
