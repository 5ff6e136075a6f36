#pragma once
// The JSON experiment config (docs/design.md section 5): the schema, strict validation with
// one-line errors that name the file and the field, the command-line overrides (`--set
// PATH=VALUE` and the run flags, typed), and the resolved form written to run.json. Every
// check of a config happens here, before any work. The JSON text itself is read by
// json_text.hpp, flag values by flag_values.hpp (both included for the callers).
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/core/flag_values.hpp"
#include "favor/core/half.hpp"
#include "favor/estimators/variant.hpp"
#include "favor/experiments/input_families.hpp"
#include "favor/io/json_text.hpp"

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
    std::string q, k, v;               // npy: PATH or PATH:NAME (.npy, .npz, .safetensors; resolved)
    std::string layout;                // npy: the files' axes ("BLHD"); empty: by rank (tensor_layout.hpp)
    std::string grad;                  // npy: the upstream gradient G of the gradient metrics ("": drawn)
    bool per_head = false;             // npy: also one errors.csv row per head
    // npy: `L` (optional) is the grid of row counts: each point takes the files' first L rows.
    bool npy() const { return source == "npy"; }
};

// "experiment": "approximation": attention errors against exact attention.
struct ApproximationSpec {
    std::vector<std::string> metrics;  // requested (metric_table.hpp)
    // Row-sampled metrics (docs/design.md 3.1): every metric on this many query rows of each
    // problem (all of them where L <= N); unset: all rows.
    std::optional<std::size_t> query_rows;
    bool wants(const std::string& metric) const;
    // Whether a problem of L query rows is sampled, and whether some table has the
    // <name>_row_sem columns: query_rows set and below some L (npy inputs: set).
    bool samples(std::size_t L) const { return query_rows && *query_rows < L; }
};
// "experiment": "kernel": pairs (x, y) of common length `norm` at angle `angle`, or, with
// "norm_x" and "norm_y" instead of "norm", |x| from `norm` and |y| from `norm_y` (two axes).
struct KernelSpec {
    std::vector<std::size_t> d;        // each >= 2
    std::vector<double> norm, angle;
    std::vector<double> norm_y;        // empty: |y| = |x| (the "norm" key)
    // "pairs": {"q", "k", "count"}: `pairs` pairs (q_i, k_j) sampled from the rows of two .npy
    // files (d their last dimension, which must be the one "d"); 0: none (norm/angle grid).
    std::string pairs_q, pairs_k;
    std::size_t pairs = 0;
    bool bias = false;                 // "bias": the rel_bias columns (docs/design.md section 6)
};
// "experiment": "timing": wall time of each variant.
struct TimingSpec {
    std::size_t repeats = 5, warmup = 1;
    double time_budget_s = 0.0;        // 0: none
    double min_time_s = 0.0;           // "min_time_s": more timed runs until they add up to it (0: repeats only)
    bool backward = false;             // "backward": also time each variant's backward pass
    // A cell's predicted wall time from one run's forward and backward seconds: the warm-up
    // runs of both, the timed forwards (repeats, or min_time_s when longer), the backward's.
    double cell_seconds(double forward_s, double backward_s) const {
        return double(warmup) * (forward_s + backward_s) + std::max(double(repeats) * forward_s, min_time_s) +
               double(repeats) * backward_s;
    }
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

    // Whether the approximation tables have <name>_row_sem columns (docs/design.md 3.1):
    // query_rows set and below the largest L (npy inputs: whenever set).
    bool has_row_sem() const;

    nlohmann::json resolved() const;   // the config with every default filled in
};

// What the command line changes in a config file before it is validated: the `--set`
// assignments in order, then the run flags' values, typed (each already checked whole by its
// flag, flag_values.hpp). They are set in the JSON document under the keys they stand for
// (`m`, `num_features`, `inputs.L`, `trials`, `seed`, `dtype`), so the schema checks them
// exactly as if the file held them and its errors name the same fields. `m` removes
// `num_features` and the other way round (the grid is over one of the two).
struct ConfigOverrides {
    std::vector<std::string> sets;                          // PATH=VALUE (json_text.hpp)
    std::optional<std::vector<std::uint64_t>> m, num_features, L;
    std::optional<std::uint64_t> trials, seed;
    std::optional<DType> dtype;
};
// Applies `o` to a config document (the sets first). Errors name the --set path.
void apply_overrides(nlohmann::json& j, const ConfigOverrides& o);

// Reads, overrides and validates. Relative paths written in the file (inputs q, k, v and
// output_dir) are taken relative to the file's folder; those given with --set (and --out)
// relative to the working directory; the default output_dir, results/<name>, too
// (docs/design.md section 5, "Paths").
Config load_config(const std::string& path, const ConfigOverrides& overrides);
Config load_config(const std::string& path, const std::vector<std::string>& sets = {});
// The same from the config's text, named `path` in messages; relative npy paths are taken
// relative to path's folder (the working directory for a bare name such as "config", as the
// Python module names a config given as a dict).
Config load_config_text(const std::string& text, const std::string& path, const ConfigOverrides& overrides);
Config parse_config(const nlohmann::json& j, const std::string& file);

// The budget axis (docs/design.md section 5: `m` or `num_features`) per variant.
// The m at which variant `v` has F feature columns in dimension d (Variant::num_features: a
// hybrid's exact keys count, 2w - 1 for a non-causal window), or nullopt when no m >= 1 gives
// F (an odd F for trig; F not above a hybrid's exact keys). A map whose F does not depend on m
// gives its own F.
std::optional<std::size_t> m_for_features(const Variant& v, std::size_t F, std::size_t d, bool causal);

// The m values variant `v` runs at in dimension d, in grid order (one for a fixed-F map
// under num_features).
std::vector<std::size_t> variant_m_values(const Config& cfg, std::size_t v, std::size_t d);

// Fails (Error naming the config field) unless every variant's map can run with every m of
// the grid in dimension d for L queries and Lk keys (FeatureMap::check_sizes; 0: not known).
// The config checks random inputs; runs on .npy inputs call it once the shapes are known.
void check_map_sizes(const Config& c, std::size_t d, std::size_t L, std::size_t Lk, std::size_t heads);

// The tensor files of an approximation config with npy inputs, as load_qkv reads them: the
// layout, and the largest L of the grid as the row limit (each point takes its first L rows).
struct QkvSource;   // tensor_io.hpp
QkvSource npy_source(const Config& c);

// Size limit of a config file: far above any real one (they are a few kB).
inline constexpr std::size_t kMaxConfigBytes = std::size_t(1) << 20;
// Limits of the grid values (config.cpp): far above any sensible experiment; a typo does not
// ask for terabytes.
inline constexpr std::size_t kMaxL = std::size_t(1) << 22, kMaxD = 4096, kMaxM = std::size_t(1) << 16,
                             kMaxTrials = 1000000;
// Timing: min_time_s at most an hour per cell, and at most kMaxTimedRuns timed runs (the
// limit of repeats) however short a run.
inline constexpr double kMaxMinTime = 3600.0;
inline constexpr std::size_t kMaxTimedRuns = 100000;
// input_seeds: at most kMaxInputSeeds draws, each seed at most kMaxInputSeed (exact as a double).
inline constexpr std::size_t kMaxInputSeeds = 10000;
inline constexpr std::uint64_t kMaxInputSeed = (std::uint64_t(1) << 32) - 1;

}  // namespace favor
