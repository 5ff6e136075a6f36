#pragma once
// The JSON experiment config (design.md section 5): parsing, strict validation with one-line
// errors that name the file and the field, `--set PATH=VALUE` overrides, and the resolved
// form written to run.json.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "favor/feature_maps.hpp"
#include "favor/projections.hpp"

namespace favor {

enum class ExperimentKind { approximation, kernel, timing };
std::string experiment_name(ExperimentKind k);

struct Variant {
    std::string name;          // unique; defaults to <features>-<projection>, or "exact"
    bool exact = false;        // exact softmax attention (timing experiments)
    FeatureMap map;
    Projection projection = Projection::iid;
    std::string features_label() const { return exact ? "exact" : features_name(map.kind); }
    std::string projection_label() const { return exact ? "" : projection_name(projection); }
};

struct InputSpec {
    std::string source = "random";     // "random" | "npy"
    std::vector<std::size_t> L, d;     // random: grid values
    std::optional<std::size_t> d_v;    // random: defaults to d
    std::vector<double> scale{1.0};    // random: entries N(0, scale^2)
    std::string q, k, v;               // npy: paths (resolved)
    bool per_head = false;             // npy: also one errors.csv row per head
};

// Metric columns, in their fixed table order.
const std::vector<std::string>& metric_names();

struct Config {
    std::string file;                  // where it came from (for messages)
    std::string name;
    ExperimentKind experiment = ExperimentKind::approximation;
    std::uint64_t seed = 0;
    std::string dtype = "float64";     // "float32" | "float64"
    InputSpec inputs;
    std::vector<Variant> variants;
    std::vector<std::size_t> m;
    std::size_t trials = 1;
    std::vector<std::string> metrics;  // requested (approximation)
    std::string output_dir;
    bool causal = false;
    // kernel experiment
    std::vector<std::size_t> d;
    std::vector<double> norm, angle;
    // timing experiment
    std::size_t repeats = 5, warmup = 1;
    double time_budget_s = 0.0;        // 0: none

    bool wants(const std::string& metric) const;
    nlohmann::json resolved() const;   // the config with every default filled in
};

// `--set` and the flag overrides: a dotted path (`inputs.scale`, `variants.0.A`) and a JSON
// value (a bare word that is not JSON is taken as a string). Throws Error naming the path.
void apply_set(nlohmann::json& j, const std::string& assignment);
void set_path(nlohmann::json& j, const std::string& path, const nlohmann::json& value);

// Reads, overrides and validates. Relative npy paths in the file are taken relative to the
// file's folder; those given with --set relative to the working directory.
Config load_config(const std::string& path, const std::vector<std::string>& sets = {});
Config parse_config(const nlohmann::json& j, const std::string& file);

// Expands comma lists "16,32,64" for --m / --L.
nlohmann::json parse_list_flag(const std::string& flag, const std::string& text);

}  // namespace favor
