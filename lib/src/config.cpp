#include "favor/config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "favor/error.hpp"
#include "favor/names.hpp"

namespace favor {

using nlohmann::json;
namespace fs = std::filesystem;

std::string experiment_name(ExperimentKind k) {
    switch (k) {
        case ExperimentKind::approximation: return "approximation";
        case ExperimentKind::kernel: return "kernel";
        case ExperimentKind::timing: return "timing";
    }
    return "?";
}

const std::vector<std::string>& metric_names() {
    static const std::vector<std::string> names = {
        "output_mse", "attention_mse", "kernel_mse", "kernel_mse_theory",
        "negative_fraction", "nonfinite", "seconds"};
    return names;
}

namespace {

// Limits that keep a typo from asking for terabytes; far above any sensible experiment.
constexpr std::size_t kMaxL = std::size_t(1) << 22, kMaxD = 4096, kMaxM = std::size_t(1) << 16,
                      kMaxTrials = 1000000;

// Where a value sits, for messages: "<file>: <path>: <what is wrong>".
struct Where {
    const std::string& file;
    std::string path;
    Where at(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
    Where at(std::size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
    [[noreturn]] void fail(const std::string& msg) const { throw Error(file + ": " + path + ": " + msg); }
};

std::string type_name(const json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_array()) return "a list";
    if (v.is_object()) return "an object";
    return "null";
}

void check_keys(const json& obj, const std::vector<std::string>& allowed, const Where& w) {
    if (!obj.is_object()) w.fail("must be an object, got " + type_name(obj));
    for (const auto& [key, value] : obj.items())
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
            w.at(key).fail("unknown key" + suggestion(key, allowed));
}

std::uint64_t as_uint(const json& v, const Where& w, std::uint64_t lo, std::uint64_t hi) {
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
        const std::uint64_t x = v.get<std::uint64_t>();
        if (x < lo || x > hi)
            w.fail("must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(x));
        return x;
    }
    if (v.is_number_integer()) w.fail("must be >= " + std::to_string(lo) + ", got " + v.dump());
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && std::fabs(d) > 9.2e18) w.fail("does not fit in 64 bits: " + v.dump());
        w.fail("must be an integer, got " + v.dump());
    }
    w.fail("must be an integer, got " + type_name(v));
}

double as_number(const json& v, const Where& w) {
    if (!v.is_number()) w.fail("must be a number, got " + type_name(v));
    const double x = v.get<double>();
    if (!std::isfinite(x)) w.fail("must be finite");
    return x;
}

std::string as_string(const json& v, const Where& w) {
    if (!v.is_string()) w.fail("must be a string, got " + type_name(v));
    return v.get<std::string>();
}

bool as_bool(const json& v, const Where& w) {
    if (!v.is_boolean()) w.fail("must be true or false, got " + type_name(v));
    return v.get<bool>();
}

// A number or a non-empty list of numbers; returned sorted, without repeats (grid order).
template <class F>
auto as_list(const json& v, const Where& w, F one) {
    using T = decltype(one(v, w));
    std::vector<T> out;
    if (v.is_array()) {
        if (v.empty()) w.fail("must not be an empty list");
        for (std::size_t i = 0; i < v.size(); ++i) out.push_back(one(v[i], w.at(i)));
    } else {
        out.push_back(one(v, w));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<std::size_t> uint_list(const json& v, const Where& w, std::size_t hi) {
    return as_list(v, w, [hi](const json& x, const Where& wx) { return std::size_t(as_uint(x, wx, 1, hi)); });
}

std::vector<double> positive_list(const json& v, const Where& w) {
    return as_list(v, w, [](const json& x, const Where& wx) {
        const double d = as_number(x, wx);
        if (d <= 0) wx.fail("must be > 0, got " + x.dump());
        return d;
    });
}

std::vector<double> number_list(const json& v, const Where& w) {
    return as_list(v, w, [](const json& x, const Where& wx) { return as_number(x, wx); });
}

Variant parse_variant(const json& v, const Where& w, ExperimentKind kind) {
    check_keys(v, {"features", "projection", "name", "epsilon", "A"}, w);
    if (!v.contains("features")) w.at("features").fail("missing (one of exact, " + [] {
        std::string s;
        for (const auto& n : feature_names()) s += (s.empty() ? "" : ", ") + n;
        return s;
    }() + ")");
    Variant out;
    const std::string features = as_string(v["features"], w.at("features"));
    if (features == "exact") {
        if (kind != ExperimentKind::timing)
            w.at("features").fail("'exact' is the reference in " + experiment_name(kind) + " experiments; list it only in timing experiments");
        for (const char* key : {"projection", "epsilon", "A"})
            if (v.contains(key)) w.at(key).fail("does not apply to the exact variant");
        out.exact = true;
        out.name = v.contains("name") ? as_string(v["name"], w.at("name")) : "exact";
        return out;
    }
    std::vector<std::string> all = feature_names();
    all.push_back("exact");
    try {
        out.map.kind = parse_features(features);
    } catch (const Error&) {
        w.at("features").fail("unknown feature map '" + features + "'" + suggestion(features, all));
    }
    if (v.contains("projection")) {
        const std::string p = as_string(v["projection"], w.at("projection"));
        try {
            out.projection = parse_projection(p);
        } catch (const Error& e) {
            w.at("projection").fail(e.what());
        }
    }
    if (v.contains("epsilon")) {
        out.map.epsilon = as_number(v["epsilon"], w.at("epsilon"));
        if (out.map.epsilon < 0) w.at("epsilon").fail("must be >= 0, got " + v["epsilon"].dump());
    }
    if (out.map.kind == FeatureKind::oprf) {
        const json A = v.contains("A") ? v["A"] : json("optimal");
        if (A.is_string()) {
            if (A.get<std::string>() != "optimal") w.at("A").fail("must be a number < 1/8 or \"optimal\", got " + A.dump());
            out.map.A_optimal = true;
        } else {
            out.map.A = as_number(A, w.at("A"));
            if (!(out.map.A < kOprfAMax)) w.at("A").fail("must be < 1/8 (0.125), got " + A.dump());
        }
    } else if (v.contains("A")) {
        w.at("A").fail("applies only to features 'oprf'");
    }
    out.name = v.contains("name") ? as_string(v["name"], w.at("name"))
                                  : features + "-" + projection_name(out.projection);
    if (out.name.empty()) w.at("name").fail("must not be empty");
    return out;
}

const std::vector<std::string> kTopKeys = {
    "name", "description", "experiment", "seed", "dtype", "inputs", "variants", "m", "trials",
    "metrics", "output_dir", "causal", "d", "norm", "angle", "repeats", "warmup", "time_budget_s"};

// Which top-level keys each experiment kind takes (besides the common ones).
bool key_applies(const std::string& key, ExperimentKind k) {
    static const std::set<std::string> kernel_only = {"d", "norm", "angle"};
    static const std::set<std::string> timing_only = {"repeats", "warmup", "time_budget_s"};
    static const std::set<std::string> with_inputs = {"inputs", "metrics", "causal"};
    if (kernel_only.count(key)) return k == ExperimentKind::kernel;
    if (timing_only.count(key)) return k == ExperimentKind::timing;
    if (key == "metrics") return k == ExperimentKind::approximation;
    if (with_inputs.count(key)) return k != ExperimentKind::kernel;
    return true;
}

InputSpec parse_inputs(const json& v, const Where& w) {
    check_keys(v, {"source", "L", "d", "d_v", "scale", "q", "k", "v", "per_head"}, w);
    InputSpec in;
    if (v.contains("source")) in.source = as_string(v["source"], w.at("source"));
    if (in.source == "random") {
        for (const char* key : {"q", "k", "v", "per_head"})
            if (v.contains(key)) w.at(key).fail("applies only to source \"npy\"");
        if (!v.contains("L")) w.at("L").fail("missing (sequence length, a number or a list)");
        if (!v.contains("d")) w.at("d").fail("missing (head dimension, a number or a list)");
        in.L = uint_list(v["L"], w.at("L"), kMaxL);
        in.d = uint_list(v["d"], w.at("d"), kMaxD);
        if (v.contains("d_v")) in.d_v = as_uint(v["d_v"], w.at("d_v"), 1, kMaxD);
        if (v.contains("scale")) in.scale = positive_list(v["scale"], w.at("scale"));
    } else if (in.source == "npy") {
        for (const char* key : {"L", "d", "d_v", "scale"})
            if (v.contains(key))
                w.at(key).fail(std::string("not allowed with source \"npy\" (the shapes come from the files)"));
        for (const char* key : {"q", "k", "v"}) {
            if (!v.contains(key)) w.at(key).fail("missing (path of the .npy file)");
            const std::string p = as_string(v[key], w.at(key));
            if (p.empty()) w.at(key).fail("must not be empty");
            (key[0] == 'q' ? in.q : key[0] == 'k' ? in.k : in.v) = p;
        }
        if (v.contains("per_head")) in.per_head = as_bool(v["per_head"], w.at("per_head"));
    } else {
        w.at("source").fail("must be \"random\" or \"npy\", got \"" + in.source + "\"" +
                            suggestion(in.source, {"random", "npy"}));
    }
    return in;
}

}  // namespace

bool Config::wants(const std::string& metric) const {
    return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

Config parse_config(const json& j, const std::string& file) {
    const Where root{file, ""};
    if (!j.is_object()) throw Error(file + ": the config must be a JSON object, got " + type_name(j));
    check_keys(j, kTopKeys, root);
    Config c;
    c.file = file;
    if (j.contains("experiment")) {
        const std::string e = as_string(j["experiment"], root.at("experiment"));
        const std::vector<std::string> kinds = {"approximation", "kernel", "timing"};
        if (e == "approximation") c.experiment = ExperimentKind::approximation;
        else if (e == "kernel") c.experiment = ExperimentKind::kernel;
        else if (e == "timing") c.experiment = ExperimentKind::timing;
        else root.at("experiment").fail("unknown experiment \"" + e + "\"" + suggestion(e, kinds));
    }
    for (const auto& [key, value] : j.items())
        if (!key_applies(key, c.experiment))
            root.at(key).fail("does not apply to \"" + experiment_name(c.experiment) + "\" experiments");

    c.name = j.contains("name") ? as_string(j["name"], root.at("name"))
                                : fs::path(file).stem().string();
    if (j.contains("seed")) c.seed = as_uint(j["seed"], root.at("seed"), 0, std::numeric_limits<std::uint64_t>::max());
    if (j.contains("dtype")) {
        c.dtype = as_string(j["dtype"], root.at("dtype"));
        if (c.dtype != "float32" && c.dtype != "float64")
            root.at("dtype").fail("must be \"float32\" or \"float64\", got \"" + c.dtype + "\"" +
                                  suggestion(c.dtype, {"float32", "float64"}));
    }
    if (!j.contains("variants")) root.at("variants").fail("missing (a non-empty list of {\"features\": ..., \"projection\": ...})");
    const json& vs = j["variants"];
    if (!vs.is_array()) root.at("variants").fail("must be a list, got " + type_name(vs));
    if (vs.empty()) root.at("variants").fail("must not be empty");
    std::set<std::string> names;
    for (std::size_t i = 0; i < vs.size(); ++i) {
        c.variants.push_back(parse_variant(vs[i], root.at("variants").at(i), c.experiment));
        if (!names.insert(c.variants.back().name).second)
            root.at("variants").at(i).at("name").fail("duplicate variant name \"" + c.variants.back().name + "\"");
    }
    const bool any_features = std::any_of(c.variants.begin(), c.variants.end(), [](const Variant& v) { return !v.exact; });
    if (j.contains("m")) c.m = uint_list(j["m"], root.at("m"), kMaxM);
    else if (any_features) root.at("m").fail("missing (number of random features, a number or a list)");
    if (j.contains("trials")) c.trials = as_uint(j["trials"], root.at("trials"), 1, kMaxTrials);
    if (j.contains("causal")) c.causal = as_bool(j["causal"], root.at("causal"));

    if (c.experiment == ExperimentKind::kernel) {
        for (const char* key : {"d", "norm", "angle"})
            if (!j.contains(key)) root.at(key).fail("missing (a number or a list)");
        c.d = uint_list(j["d"], root.at("d"), kMaxD);
        c.norm = positive_list(j["norm"], root.at("norm"));
        c.angle = number_list(j["angle"], root.at("angle"));
    } else {
        if (!j.contains("inputs")) root.at("inputs").fail("missing (e.g. {\"source\": \"random\", \"L\": 1024, \"d\": 16})");
        c.inputs = parse_inputs(j["inputs"], root.at("inputs"));
    }
    if (c.experiment == ExperimentKind::approximation) {
        c.metrics = {"output_mse", "attention_mse", "kernel_mse", "negative_fraction"};
        if (j.contains("metrics")) {
            const json& ms = j["metrics"];
            const Where w = root.at("metrics");
            if (!ms.is_array()) w.fail("must be a list, got " + type_name(ms));
            if (ms.empty()) w.fail("must not be empty");
            c.metrics.clear();
            for (std::size_t i = 0; i < ms.size(); ++i) {
                const std::string m = as_string(ms[i], w.at(i));
                if (std::find(metric_names().begin(), metric_names().end(), m) == metric_names().end())
                    w.at(i).fail("unknown metric \"" + m + "\"" + suggestion(m, metric_names()));
                c.metrics.push_back(m);
            }
        }
    }
    if (c.experiment == ExperimentKind::timing) {
        if (j.contains("repeats")) c.repeats = as_uint(j["repeats"], root.at("repeats"), 1, 100000);
        if (j.contains("warmup")) c.warmup = as_uint(j["warmup"], root.at("warmup"), 0, 100000);
        if (j.contains("time_budget_s")) {
            c.time_budget_s = as_number(j["time_budget_s"], root.at("time_budget_s"));
            if (c.time_budget_s <= 0) root.at("time_budget_s").fail("must be > 0");
        }
    }
    c.output_dir = j.contains("output_dir") ? as_string(j["output_dir"], root.at("output_dir"))
                                            : "results/" + c.name;
    if (c.output_dir.empty()) root.at("output_dir").fail("must not be empty");
    return c;
}

json Config::resolved() const {
    json j;
    j["name"] = name;
    j["experiment"] = experiment_name(experiment);
    j["seed"] = seed;
    j["dtype"] = dtype;
    json vs = json::array();
    for (const Variant& v : variants) {
        json o{{"name", v.name}, {"features", v.features_label()}};
        if (!v.exact) {
            o["projection"] = v.projection_label();
            o["epsilon"] = v.map.epsilon;
            if (v.map.kind == FeatureKind::oprf) o["A"] = v.map.A_optimal ? json("optimal") : json(v.map.A);
        }
        vs.push_back(o);
    }
    j["variants"] = vs;
    if (!m.empty()) j["m"] = m;
    j["trials"] = trials;
    if (experiment == ExperimentKind::kernel) {
        j["d"] = d;
        j["norm"] = norm;
        j["angle"] = angle;
    } else {
        json in{{"source", inputs.source}};
        if (inputs.source == "random") {
            in["L"] = inputs.L;
            in["d"] = inputs.d;
            if (inputs.d_v) in["d_v"] = *inputs.d_v;
            in["scale"] = inputs.scale;
        } else {
            in["q"] = inputs.q;
            in["k"] = inputs.k;
            in["v"] = inputs.v;
            in["per_head"] = inputs.per_head;
        }
        j["inputs"] = in;
        j["causal"] = causal;
    }
    if (experiment == ExperimentKind::approximation) j["metrics"] = metrics;
    if (experiment == ExperimentKind::timing) {
        j["repeats"] = repeats;
        j["warmup"] = warmup;
        if (time_budget_s > 0) j["time_budget_s"] = time_budget_s;
    }
    j["output_dir"] = output_dir;
    return j;
}

void set_path(json& j, const std::string& path, const json& value) {
    if (path.empty()) throw Error("--set: empty path");
    json* cur = &j;
    std::stringstream ss(path);
    std::string part;
    std::vector<std::string> parts;
    while (std::getline(ss, part, '.')) parts.push_back(part);
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        if (p.empty()) throw Error("--set " + path + ": empty path component");
        const bool last = i + 1 == parts.size();
        if (cur->is_array()) {
            std::size_t idx = 0;
            try {
                std::size_t used = 0;
                idx = std::stoul(p, &used);
                if (used != p.size()) throw std::invalid_argument(p);
            } catch (const std::exception&) {
                throw Error("--set " + path + ": '" + p + "' is not a list index");
            }
            if (idx >= cur->size())
                throw Error("--set " + path + ": index " + p + " is past the end of a list of " + std::to_string(cur->size()));
            cur = &(*cur)[idx];
        } else {
            if (cur->is_null()) *cur = json::object();
            if (!cur->is_object()) throw Error("--set " + path + ": '" + p + "' is inside a value that is not an object");
            cur = &(*cur)[p];
        }
        if (last) *cur = value;
    }
}

void apply_set(json& j, const std::string& assignment) {
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
        throw Error("--set " + assignment + ": expected PATH=VALUE (e.g. inputs.scale=0.5)");
    const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    json value;
    try {
        value = json::parse(text);
    } catch (const json::parse_error&) {
        value = text;   // a bare word: a string
    } catch (const json::exception&) {
        throw Error("--set " + path + ": value '" + text + "' is out of range");
    }
    set_path(j, path, value);
}

json parse_list_flag(const std::string& flag, const std::string& text) {
    json out = json::array();
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            out.push_back(json::parse(item));
        } catch (const json::exception&) {
            throw Error(flag + ": '" + item + "' is not a number (expected a list like 16,32,64)");
        }
    }
    if (out.empty()) throw Error(flag + ": empty list");
    return out.size() == 1 ? out[0] : out;
}

Config load_config(const std::string& path, const std::vector<std::string>& sets) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open config file");
    std::stringstream buf;
    buf << in.rdbuf();
    json j;
    try {
        j = json::parse(buf.str(), nullptr, true, /*ignore_comments=*/true);
    } catch (const json::exception& e) {   // syntax errors, and numbers beyond double range
        std::string what = e.what();
        std::replace(what.begin(), what.end(), '\n', ' ');
        throw Error(path + ": invalid JSON: " + what);
    }
    // npy paths in the file are relative to the file's folder.
    if (j.is_object() && j.contains("inputs") && j["inputs"].is_object()) {
        const fs::path base = fs::path(path).parent_path();
        for (const char* key : {"q", "k", "v"}) {
            json& p = j["inputs"][key];
            if (p.is_string() && !p.get<std::string>().empty() && fs::path(p.get<std::string>()).is_relative())
                p = (base / p.get<std::string>()).lexically_normal().string();
            else if (p.is_null()) j["inputs"].erase(key);
        }
    }
    for (const std::string& s : sets) apply_set(j, s);
    return parse_config(j, path);
}

}  // namespace favor
