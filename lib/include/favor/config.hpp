#pragma once
// The JSON experiment config (docs/design.md section 5): parsing, strict validation with
// one-line errors that name the file and the field, `--set PATH=VALUE` overrides, and the
// resolved form written to run.json. Every check of a config happens here, before any work.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "favor/error.hpp"
#include "favor/half.hpp"
#include "favor/input_families.hpp"
#include "favor/variant.hpp"

namespace favor {

enum class ExperimentKind { approximation, kernel, timing };
std::string experiment_name(ExperimentKind k);

// The compute precision. float16 and bfloat16 are emulated on the float32 path with a
// rounding policy (docs/design.md section 2.6): the same C++ type, values rounded to half.
enum class DType { float32, float64, float16, bfloat16 };
std::string dtype_name(DType t);
// "float32" | "float64" | "float16" | "bfloat16"; fails at `where` otherwise.
DType parse_dtype(const std::string& s, const Field& where);
// f(float{}) or f(double{}): the one place a dtype becomes a C++ type (half dtypes: float).
template <class F>
decltype(auto) with_dtype(DType t, F&& f) {
    return t == DType::float64 ? f(double{}) : f(float{});
}
// The rounding a dtype adds to its C++ type: fp16, bf16, or none.
Rounding dtype_rounding(DType t);
// Bytes per stored value: 8 for float64, 4 for the others (the emulation stores floats).
std::size_t dtype_bytes(DType t);

struct InputSpec {
    std::string source = "random";     // "random" | "npy"
    std::vector<std::size_t> L, d;     // random: grid values
    std::optional<std::size_t> d_v;    // random: defaults to d
    std::vector<double> scale{1.0};    // random: entries N(0, scale^2)
    InputFamily family;                // random: knobs of real heads (input_families.hpp)
    std::string q, k, v;               // npy: paths (resolved)
    bool per_head = false;             // npy: also one errors.csv row per head
    bool npy() const { return source == "npy"; }
};

// "experiment": "approximation": attention errors against exact attention.
struct ApproximationSpec {
    std::vector<std::string> metrics;  // requested (metrics.hpp's table)
    bool wants(const std::string& metric) const;
};
// "experiment": "kernel": pairs (x, y) of common length `norm` at angle `angle`.
struct KernelSpec {
    std::vector<std::size_t> d;        // each >= 2
    std::vector<double> norm, angle;
};
// "experiment": "timing": wall time of each variant.
struct TimingSpec {
    std::size_t repeats = 5, warmup = 1;
    double time_budget_s = 0.0;        // 0: none
};

struct Config {
    std::string file;                  // where it came from (for messages)
    std::string name;
    ExperimentKind experiment = ExperimentKind::approximation;
    std::uint64_t seed = 0;
    DType dtype = DType::float64;
    std::vector<Variant> variants;
    std::vector<std::size_t> m;
    // Approximation: the budget axis in feature columns F instead of m (exactly one of the
    // two; cells.hpp resolves the m of each variant).
    std::vector<std::size_t> num_features;
    std::size_t trials = 1;
    // Approximation, random inputs: the input draws of each cell (docs/design.md section 7);
    // {0}, the default, is the one draw of a run without the key.
    std::vector<std::uint64_t> input_seeds{0};
    bool input_seeds_set() const { return input_seeds != std::vector<std::uint64_t>{0}; }
    std::string output_dir;
    InputSpec inputs;                  // approximation and timing
    bool causal = false;               // approximation and timing
    ApproximationSpec approximation;
    KernelSpec kernel;
    TimingSpec timing;

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

// Fails (Error naming the config field) unless every variant's map can run with every m of
// the grid in dimension d for L queries and Lk keys (FeatureMap::check_sizes; 0: not known).
// The config checks random inputs; runs on .npy inputs call it once the shapes are known.
void check_map_sizes(const Config& c, std::size_t d, std::size_t L, std::size_t Lk);

// Expands comma lists "16,32,64" for --m / --L: every item an integer in [lo, hi], digits
// only (no sign, no exponent, no empty item); one item gives a number, several a list.
nlohmann::json parse_list_flag(const std::string& flag, const std::string& text, std::uint64_t lo, std::uint64_t hi);
nlohmann::json parse_list_flag(const std::string& flag, const std::string& text);

// An unsigned integer flag value, parsed whole: digits only, in [lo, hi]. Errors name `flag`
// ("--m: must be an integer between 1 and 65536, got 0"); `expected` replaces the range in
// the message for an empty value.
std::uint64_t parse_uint_text(const std::string& flag, const std::string& text, std::uint64_t lo, std::uint64_t hi,
                              const std::string& expected = "");

// A number flag value, parsed whole: decimal notation, finite. Errors name `flag`.
double parse_number_text(const std::string& flag, const std::string& text);

// Syntax errors of parse_json_text (an Error: exit 2).
class JsonSyntaxError : public Error {
public:
    using Error::Error;
};
// JSON text (comments allowed) as a config is read: a NUL byte, a repeated key in an object
// (JSON parsers keep one silently), nesting deeper than kMaxJsonDepth and syntax errors are
// errors naming `name` and the place. Every JSON favor reads (configs, --set values, journals,
// run.json in merge, apply's flag values) goes through here.
nlohmann::json parse_json_text(const std::string& text, const std::string& name);
// Deepest nesting of arrays and objects favor reads: real configs, run.json and journal
// headers nest 5 levels; nlohmann's dump and comparison recurse once per level, so a 100 KB
// text of '[' would overflow the stack. Checked by a scan without recursion first.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Size limit of a config file: far above any real one (they are a few kB).
inline constexpr std::size_t kMaxConfigBytes = std::size_t(1) << 20;
// Limits of the grid values (config.cpp): far above any sensible experiment; a typo does not
// ask for terabytes.
inline constexpr std::size_t kMaxL = std::size_t(1) << 22, kMaxD = 4096, kMaxM = std::size_t(1) << 16,
                             kMaxTrials = 1000000;
// input_seeds: at most kMaxInputSeeds draws, each seed at most kMaxInputSeed (exact as a double).
inline constexpr std::size_t kMaxInputSeeds = 10000;
inline constexpr std::uint64_t kMaxInputSeed = (std::uint64_t(1) << 32) - 1;

}  // namespace favor
