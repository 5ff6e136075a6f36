#include "favor/variant.hpp"

#include "favor/error.hpp"
#include "favor/names.hpp"

namespace favor {

using nlohmann::json;

json Variant::resolved() const {
    json o{{"name", name}, {"features", features_label()}};
    if (!exact) {
        if (map->uses_projection()) o["projection"] = projection_label();
        o.update(map->params());
        if (!shift) o["shift"] = false;   // recorded only when not the default
    }
    return o;
}

std::string variant_name_problem(const std::string& name) {
    if (name.empty()) return "must not be empty";
    for (unsigned char c : name) {
        if (c < 0x20 || c == 0x7f) return "must be printable (no newline, tab or other control character)";
        if (c == ',' || c == '"') return "must not contain a comma or a double quote (it is a CSV cell)";
        if (c == '|') return "must not contain '|' (it is a Markdown table cell)";
    }
    if (name == kBaselineName)
        return std::string("must not be '") + kBaselineName +
               "', favor compare's name for uniform attention, the baseline (rename the variant)";
    return "";
}

void check_variant_name(const std::string& name, const Field& where) {
    if (const std::string why = variant_name_problem(name); !why.empty()) where.fail(why);
}

namespace {
std::string joined_feature_names() {
    std::string s;
    for (const auto& n : feature_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
}
}  // namespace

Variant parse_variant(const json& v, const Field& w, bool exact_allowed, const std::string& exact_context) {
    if (!v.is_object()) w.fail("must be an object, got " + json_type_name(v));
    if (!v.contains("features")) w.at("features").fail("missing (one of exact, " + joined_feature_names() + ")");
    Variant out;
    const std::string features = read_string(v["features"], w.at("features"));
    if (features == "exact") {
        if (!exact_allowed) w.at("features").fail(exact_context);
        check_keys(v, {"features", "name"}, w);
        out.exact = true;
        out.name = v.contains("name") ? read_string(v["name"], w.at("name")) : "exact";
        check_variant_name(out.name, w.at("name"));
        return out;
    }
    const FeatureMapEntry* entry = find_feature_map(features);
    if (!entry) {
        std::vector<std::string> all = feature_names();
        all.push_back("exact");
        w.at("features").fail("unknown feature map '" + features + "'" + suggestion(features, all));
    }
    std::vector<std::string> keys = {"features", "projection", "name", "epsilon"};
    for (const auto& k : entry->keys) keys.push_back(k);
    for (const auto& [key, value] : v.items())
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
            // A key of other maps: say which ones it belongs to.
            std::string owners;
            for (const auto& e : feature_map_registry())
                if (std::find(e.keys.begin(), e.keys.end(), key) != e.keys.end())
                    owners += (owners.empty() ? "'" : ", '") + std::string(e.name) + "'";
            if (!owners.empty()) w.at(key).fail("applies only to features " + owners);
            w.at(key).fail("unknown key" + suggestion(key, keys));
        }
    const FieldObject fields{v, w};
    const double epsilon = fields.number("epsilon", 0.0);
    if (epsilon < 0) w.at("epsilon").fail("must be >= 0, got " + v["epsilon"].dump());
    out.map = entry->make(fields, epsilon);
    if (v.contains("shift")) {
        out.shift = read_bool(v["shift"], w.at("shift"));
        if (!out.shift && epsilon != 0)
            w.at("shift").fail("false needs epsilon 0 (epsilon is placed after a shift), got epsilon " + v["epsilon"].dump());
    }
    if (v.contains("projection")) {
        if (!out.map->uses_projection())
            w.at("projection").fail("does not apply to '" + features + "' (it uses no random projection)");
        const std::string p = read_string(v["projection"], w.at("projection"));
        try {
            out.projection = Projection(p);
        } catch (const Error& e) {
            w.at("projection").fail(e.what());
        }
    }
    out.name = fields.string("name", out.map->uses_projection() ? features + "-" + out.projection.name() : features);
    check_variant_name(out.name, w.at("name"));
    return out;
}

}  // namespace favor
