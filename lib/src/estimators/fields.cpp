#include "favor/estimators/fields.hpp"

#include <algorithm>
#include <cmath>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"

namespace favor {

using nlohmann::json;

Field Field::at(const std::string& key) const {
    return {file, path.empty() ? key_prefix + key : path + "." + key, key_prefix};
}
Field Field::at(std::size_t i) const { return {file, path + "[" + std::to_string(i) + "]", key_prefix}; }
void Field::fail(const std::string& msg) const { throw Error(file + ": " + path + ": " + msg); }

std::string json_type_name(const json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_array()) return "a list";
    if (v.is_object()) return "an object";
    return "null";
}

void check_keys(const json& obj, const std::vector<std::string>& allowed, const Field& f) {
    if (!obj.is_object()) f.fail("must be an object, got " + json_type_name(obj));
    for (const auto& [key, value] : obj.items())
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
            f.at(key).fail("unknown key" + suggestion(key, allowed));
}

std::uint64_t read_uint(const json& v, const Field& f, std::uint64_t lo, std::uint64_t hi) {
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
        const std::uint64_t x = v.get<std::uint64_t>();
        if (x < lo || x > hi)
            f.fail("must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(x));
        return x;
    }
    if (v.is_number_integer()) f.fail("must be >= " + std::to_string(lo) + ", got " + v.dump());
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && std::fabs(d) > 9.2e18) f.fail("does not fit in 64 bits: " + v.dump());
        f.fail("must be an integer, got " + v.dump());
    }
    f.fail("must be an integer, got " + json_type_name(v));
}

double read_number(const json& v, const Field& f) {
    if (!v.is_number()) f.fail("must be a number, got " + json_type_name(v));
    const double x = v.get<double>();
    if (!std::isfinite(x)) f.fail("must be finite");
    return x;
}

std::string read_string(const json& v, const Field& f) {
    if (!v.is_string()) f.fail("must be a string, got " + json_type_name(v));
    std::string s = v.get<std::string>();
    if (const std::string nul = nul_problem(s); !nul.empty()) f.fail(nul);   // names and paths alike
    return s;
}

bool read_bool(const json& v, const Field& f) {
    if (!v.is_boolean()) f.fail("must be true or false, got " + json_type_name(v));
    return v.get<bool>();
}

namespace {
template <class F>
auto read_list(const json& v, const Field& f, F one) {
    using T = decltype(one(v, f));
    std::vector<T> out;
    if (v.is_array()) {
        if (v.empty()) f.fail("must not be an empty list");
        for (std::size_t i = 0; i < v.size(); ++i) out.push_back(one(v[i], f.at(i)));
    } else {
        out.push_back(one(v, f));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}
}  // namespace

std::vector<std::size_t> read_uint_list(const json& v, const Field& f, std::size_t hi) {
    return read_list(v, f, [hi](const json& x, const Field& fx) { return std::size_t(read_uint(x, fx, 1, hi)); });
}

std::vector<double> read_positive_list(const json& v, const Field& f) {
    return read_list(v, f, [](const json& x, const Field& fx) {
        const double d = read_number(x, fx);
        if (d <= 0) fx.fail("must be > 0, got " + x.dump());
        return d;
    });
}

std::vector<double> read_number_list(const json& v, const Field& f) {
    return read_list(v, f, [](const json& x, const Field& fx) { return read_number(x, fx); });
}

double FieldObject::number(const std::string& key, double fallback) const {
    return has(key) ? read_number(obj.at(key), at(key)) : fallback;
}

std::uint64_t FieldObject::uint(const std::string& key, std::uint64_t fallback, std::uint64_t lo,
                                std::uint64_t hi) const {
    return has(key) ? read_uint(obj.at(key), at(key), lo, hi) : fallback;
}

std::string FieldObject::string(const std::string& key, const std::string& fallback) const {
    return has(key) ? read_string(obj.at(key), at(key)) : fallback;
}

}  // namespace favor
