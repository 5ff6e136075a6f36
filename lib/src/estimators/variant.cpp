#include "favor/estimators/variant.hpp"

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"

namespace favor {

using nlohmann::json;

json Variant::resolved() const {
    json o{{"name", name}, {"features", features_label()}};
    if (!exact) {
        if (map->uses_projection()) o["projection"] = projection_label();
        o.update(map->params());
        if (!shift) o["shift"] = false;   // recorded only when not the default
        if (hybrid.window) o["window"] = hybrid.window;   // the hybrid keys only where set (2.8)
        if (hybrid.sinks) o["sinks"] = hybrid.sinks;
        if (hybrid.topk) o["support"] = "topk";
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
// The keys of a hybrid (docs/design.md section 2.8): "window", "sinks" (integers >= 0, at most
// the longest sequence a config takes) and "support" ("window", the default, or "topk").
HybridSupport parse_hybrid(const json& v, const Field& w) {
    HybridSupport h;
    constexpr std::uint64_t most = std::uint64_t(1) << 22;   // config.hpp's kMaxL
    if (v.contains("window")) h.window = read_uint(v["window"], w.at("window"), 0, most);
    if (v.contains("sinks")) h.sinks = read_uint(v["sinks"], w.at("sinks"), 0, most);
    if (v.contains("support")) {
        const std::string s = read_string(v["support"], w.at("support"));
        if (s != "window" && s != "topk")
            w.at("support").fail("must be \"window\" or \"topk\" (the oracle: each row's largest scores exact), got \"" + s +
                                 "\"" + suggestion(s, {"window", "topk"}));
        h.topk = s == "topk";
        if (h.topk && h.window == 0)
            w.at("window").fail("must be >= 1 with \"support\": \"topk\" (the number of exact keys per row)");
    }
    return h;
}

// The default name's suffix of a hybrid: "+w16", "+s4", "+top16" (the oracle), in that order.
std::string hybrid_suffix(const HybridSupport& h) {
    std::string s;
    if (h.window) s += (h.topk ? "+top" : "+w") + std::to_string(h.window);
    if (h.sinks) s += "+s" + std::to_string(h.sinks);
    return s;
}

// {"features": "none", ...}: the window and sinks alone (sliding-window softmax).
Variant parse_none_variant(const json& v, const Field& w) {
    check_keys(v, {"features", "name", "window", "sinks", "support"}, w);
    Variant out;
    out.map = make_none_map();
    out.hybrid = parse_hybrid(v, w);
    if (!out.hybrid.active())
        w.at("features").fail("'none' needs \"window\" or \"sinks\" >= 1 (it has no remainder, so a row would have no keys)");
    out.name = FieldObject{v, w}.string("name", "none" + hybrid_suffix(out.hybrid));
    check_variant_name(out.name, w.at("name"));
    return out;
}

Variant parse_exact_variant(const json& v, const Field& w) {
    check_keys(v, {"features", "name"}, w);
    Variant out;
    out.exact = true;
    out.name = v.contains("name") ? read_string(v["name"], w.at("name")) : "exact";
    check_variant_name(out.name, w.at("name"));
    return out;
}

// The keys a variant of map `entry` may hold; a key of other maps says which ones it belongs to.
void check_map_keys(const json& v, const Field& w, const FeatureMapEntry& entry) {
    std::vector<std::string> keys = {"features", "projection", "name", "epsilon", "window", "sinks", "support"};
    for (const auto& k : entry.keys) keys.push_back(k);
    for (const auto& [key, value] : v.items())
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
            std::string owners;
            for (const auto& e : feature_map_registry())
                if (std::find(e.keys.begin(), e.keys.end(), key) != e.keys.end())
                    owners += (owners.empty() ? "'" : ", '") + std::string(e.name) + "'";
            if (!owners.empty()) w.at(key).fail("applies only to features " + owners);
            w.at(key).fail("unknown key" + suggestion(key, keys));
        }
}
}  // namespace

Variant parse_variant(const json& v, const Field& w, bool exact_allowed, const std::string& exact_context) {
    if (!v.is_object()) w.fail("must be an object, got " + json_type_name(v));
    if (!v.contains("features")) w.at("features").fail("missing (one of exact, " + joined_feature_names() + ")");
    Variant out;
    const std::string features = read_string(v["features"], w.at("features"));
    if (features == "exact") {
        if (!exact_allowed) w.at("features").fail(exact_context);
        return parse_exact_variant(v, w);
    }
    if (features == "none") return parse_none_variant(v, w);
    const FeatureMapEntry* entry = find_feature_map(features);
    if (!entry) {
        std::vector<std::string> all = feature_names();
        all.push_back("exact");
        all.push_back("none");
        w.at("features").fail("unknown feature map '" + features + "'" + suggestion(features, all));
    }
    check_map_keys(v, w, *entry);
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
        const std::string why = out.map->projection_refusal(out.projection.name());
        if (!why.empty()) w.at("projection").fail(why);
    }
    out.hybrid = parse_hybrid(v, w);
    if (out.hybrid.active() && !out.map->row_normalised())
        w.at(v.contains("window") ? "window" : "sinks")
            .fail("does not apply to '" + features + "' (its phi(x).phi(y) are attention weights, not kernel values to "
                  "share a normaliser with exp(x.y))");
    out.name = fields.string("name", (out.map->uses_projection() ? features + "-" + out.projection.name() : features) +
                                         hybrid_suffix(out.hybrid));
    check_variant_name(out.name, w.at("name"));
    return out;
}

}  // namespace favor
