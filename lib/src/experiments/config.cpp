// The config schema (config.hpp): the typed reads of every key with the checks that name the
// file and the field, the resolved form for run.json, and the loading of a file with its
// command-line overrides. JSON text and --set parsing: json_text.cpp; flag values: flag_values.cpp.
#include "favor/experiments/config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/io/files.hpp"
#include "favor/io/sha256.hpp"
#include "favor/io/tensor_file.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/io/tensor_layout.hpp"
#include "favor/metrics/metric_table.hpp"

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

std::string dtype_name(DType t) {
    switch (t) {
        case DType::float32: return "float32";
        case DType::float64: return "float64";
        case DType::float16: return "float16";
        case DType::bfloat16: return "bfloat16";
    }
    return "?";
}

DType parse_dtype(const std::string& s, const Field& where) {
    for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16})
        if (s == dtype_name(t)) return t;
    where.fail("must be float32, float64, float16 or bfloat16, got \"" + s + "\"" +
               suggestion(s, {"float32", "float64", "float16", "bfloat16"}));
}

Rounding dtype_rounding(DType t) {
    return t == DType::float16 ? Rounding::fp16 : t == DType::bfloat16 ? Rounding::bf16 : Rounding::none;
}

std::size_t dtype_bytes(DType t) { return t == DType::float64 ? 8 : 4; }

bool Config::has_row_sem() const {
    if (experiment != ExperimentKind::approximation || !approximation.query_rows) return false;
    return inputs.npy() || (!inputs.L.empty() && approximation.samples(inputs.L.back()));
}

bool ApproximationSpec::wants(const std::string& metric) const {
    return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

namespace {


const std::vector<std::string> kTopKeys = {
    "name", "description", "experiment", "seed", "dtype", "inputs", "variants", "m", "num_features", "trials",
    "input_seeds", "metrics", "output_dir", "causal", "d", "norm", "angle", "repeats",
    "norm_x", "norm_y", "bias", "pairs", "warmup", "time_budget_s", "min_time_s", "query_rows", "backward"};

// Which top-level keys each experiment kind takes (besides the common ones).
bool key_applies(const std::string& key, ExperimentKind k) {
    static const std::set<std::string> kernel_only = {"d", "norm", "angle", "norm_x", "norm_y", "bias", "pairs"};
    static const std::set<std::string> timing_only = {"repeats", "warmup", "time_budget_s", "min_time_s", "backward"};
    static const std::set<std::string> with_inputs = {"inputs", "metrics", "causal"};
    if (kernel_only.count(key)) return k == ExperimentKind::kernel;
    if (timing_only.count(key)) return k == ExperimentKind::timing;
    if (key == "metrics" || key == "num_features" || key == "input_seeds" || key == "query_rows")
        return k == ExperimentKind::approximation;
    if (with_inputs.count(key)) return k != ExperimentKind::kernel;
    return true;
}

InputSpec parse_inputs(const json& v, const Field& w) {
    std::vector<std::string> keys = {"source", "L", "d", "d_v", "scale", "q", "k", "v", "per_head", "layout", "grad"};
    keys.insert(keys.end(), family_keys().begin(), family_keys().end());
    check_keys(v, keys, w);
    InputSpec in;
    if (v.contains("source")) in.source = read_string(v["source"], w.at("source"));
    if (in.source == "npy")
        for (const std::string& key : family_keys())
            if (v.contains(key)) w.at(key).fail("applies only to source \"random\" (an input family draws the inputs)");
    if (in.source == "random") {
        for (const char* key : {"q", "k", "v", "per_head", "layout", "grad"})
            if (v.contains(key)) w.at(key).fail("applies only to source \"npy\"");
        if (!v.contains("L")) w.at("L").fail("missing (sequence length, a number or a list)");
        if (!v.contains("d")) w.at("d").fail("missing (head dimension, a number or a list)");
        in.L = read_uint_list(v["L"], w.at("L"), kMaxL);
        in.d = read_uint_list(v["d"], w.at("d"), kMaxD);
        if (v.contains("d_v")) in.d_v = read_uint(v["d_v"], w.at("d_v"), 1, kMaxD);
        if (v.contains("scale")) in.scale = read_positive_list(v["scale"], w.at("scale"));
        in.family = parse_family(v, w);
        for (std::size_t d : in.d) check_family_dimension(in.family, d, w);
    } else if (in.source == "npy") {
        for (const char* key : {"d", "d_v", "scale"})
            if (v.contains(key))
                w.at(key).fail(std::string("not allowed with source \"npy\" (the shapes come from the files)"));
        for (const char* key : {"q", "k", "v"}) {
            if (!v.contains(key)) w.at(key).fail("missing (path of the tensor file: .npy, .npz or .safetensors)");
            const std::string p = read_string(v[key], w.at(key));
            if (p.empty()) w.at(key).fail("must not be empty");
            (key[0] == 'q' ? in.q : key[0] == 'k' ? in.k : in.v) = p;
        }
        if (v.contains("per_head")) in.per_head = read_bool(v["per_head"], w.at("per_head"));
        if (v.contains("L")) in.L = read_uint_list(v["L"], w.at("L"), kMaxL);   // the first L rows of the files
        if (v.contains("layout")) {
            in.layout = read_string(v["layout"], w.at("layout"));
            if (const std::string why = layout_problem(in.layout); !why.empty()) w.at("layout").fail(why);
        }
        if (v.contains("grad")) {
            in.grad = read_string(v["grad"], w.at("grad"));
            if (in.grad.empty()) w.at("grad").fail("must not be empty");
        }
    } else {
        w.at("source").fail("must be \"random\" or \"npy\", got \"" + in.source + "\"" +
                            suggestion(in.source, {"random", "npy"}));
    }
    return in;
}

ExperimentKind parse_experiment(const json& j, const Field& root) {
    if (!j.contains("experiment")) return ExperimentKind::approximation;
    const std::string e = read_string(j["experiment"], root.at("experiment"));
    for (ExperimentKind k : {ExperimentKind::approximation, ExperimentKind::kernel, ExperimentKind::timing})
        if (e == experiment_name(k)) return k;
    root.at("experiment").fail("unknown experiment \"" + e + "\"" + suggestion(e, {"approximation", "kernel", "timing"}));
}

void parse_variants(const json& j, const Field& root, Config& c) {
    if (!j.contains("variants")) root.at("variants").fail("missing (a non-empty list of {\"features\": ..., \"projection\": ...})");
    const json& vs = j["variants"];
    if (!vs.is_array()) root.at("variants").fail("must be a list, got " + json_type_name(vs));
    if (vs.empty()) root.at("variants").fail("must not be empty");
    const std::string why_not_exact = "'exact' is the reference in " + experiment_name(c.experiment) +
                                      " experiments; list it only in timing experiments";
    std::set<std::string> names;
    for (std::size_t i = 0; i < vs.size(); ++i) {
        const Field w = root.at("variants").at(i);
        c.variants.push_back(parse_variant(vs[i], w, c.experiment == ExperimentKind::timing, why_not_exact));
        if (!names.insert(c.variants.back().name).second)
            w.at("name").fail("duplicate variant name \"" + c.variants.back().name + "\"");
        // Hybrids (docs/design.md 2.8): approximation and timing experiments (the forward only:
        // no backward pass); a kernel experiment compares kernel values, which a support is not.
        const HybridSupport& h = c.variants.back().hybrid;
        const bool backward = c.experiment == ExperimentKind::timing && j.contains("backward") && j["backward"] == true;
        if (h.active() && c.experiment == ExperimentKind::kernel)
            w.at(h.window ? "window" : "sinks")
                .fail("hybrids (window, sinks) run in approximation and timing experiments only, not in " +
                      experiment_name(c.experiment) + " experiments");
        if (h.active() && backward)
            w.at(h.window ? "window" : "sinks").fail("hybrids have no backward pass: drop \"backward\" or the hybrid");
    }
}

// The dimensions d a run will draw W for must suit every projection (simplex, simplex-plus,
// givens: d >= 2; qmc: d <= 1024).
void check_dimensions(const Config& c, const std::vector<std::size_t>& ds, const Field& root) {
    for (std::size_t i = 0; i < c.variants.size(); ++i) {
        const Variant& v = c.variants[i];
        if (v.exact || !v.map->uses_projection()) continue;
        const ProjectionEntry& e = v.projection.entry();
        for (std::size_t d : ds)
            if (d < e.min_d)
                root.at("variants").at(i).at("projection").fail(
                    "'" + v.projection.name() + "' needs d >= " + std::to_string(e.min_d) +
                    ", the config has d = " + std::to_string(d));
            else if (d > e.max_d)
                root.at("variants").at(i).at("projection").fail(
                    "'" + v.projection.name() + "' needs d <= " + std::to_string(e.max_d) +
                    ", the config has d = " + std::to_string(d));
    }
}

// Maps that are no causal model (nystrom) in a causal config.
void check_causal(const Config& c, const Field& root) {
    if (!c.causal) return;
    for (std::size_t i = 0; i < c.variants.size(); ++i) {
        const Variant& v = c.variants[i];
        if (!v.exact && !v.map->supports_causal())
            root.at("causal").fail("'" + v.map->name() + "' (variants[" + std::to_string(i) +
                                   "]) has no causal form: its landmarks average over the whole sequence");
    }
}

std::vector<std::string> parse_metrics(const json& j, const Field& root) {
    if (!j.contains("metrics")) return default_metrics();
    const json& ms = j["metrics"];
    const Field w = root.at("metrics");
    if (!ms.is_array()) w.fail("must be a list, got " + json_type_name(ms));
    if (ms.empty()) w.fail("must not be empty");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < ms.size(); ++i) {
        const std::string m = read_string(ms[i], w.at(i));
        const MetricInfo* mi = find_metric(m);
        if (!mi) w.at(i).fail("unknown metric \"" + m + "\"" + suggestion(m, run_metric_names()));
        if (mi->source == MetricInfo::Source::model)
            w.at(i).fail("\"" + m + "\" is measured on a model with its attention swapped in (favor.swap_in, "
                         "scripts/swap_in.py), not by a run");
        out.push_back(m);
    }
    return out;
}

// The gradient metrics need float32 or float64; inputs.grad needs a metric that reads G; the
// metrics that read G need every query row.
void check_gradient_metrics(const Config& c, const Field& root) {
    const bool grads = any_gradient(c.approximation.metrics), reads_g = any_upstream(c.approximation.metrics);
    if (grads && dtype_rounding(c.dtype) != Rounding::none)
        root.at("metrics").fail("the gradient metrics need dtype float32 or float64 (\"" + dtype_name(c.dtype) +
                                "\" is emulated and has no backward pass)");
    if (grads && c.approximation.query_rows)   // dK, dV sum over every query row
        root.at("query_rows").fail("the gradient metrics need every query row (dK and dV sum over all of them): "
                                   "drop query_rows or the gradient metrics");
    if (reads_g && !grads && c.approximation.query_rows)   // loss_delta sums over every row
        root.at("query_rows").fail("loss_delta, loss_delta_abs and output_rel_error_read need every query row "
                                   "(they sum over the rows G reads): drop query_rows or those metrics");
    if (!reads_g && !c.inputs.grad.empty())
        root.at("inputs").at("grad").fail("given, but no metric reads it (loss_delta, loss_delta_abs, output_rel_error_read, "
                                          "grad_q_rel_error, grad_k_rel_error, grad_v_rel_error, grad_cosine, grad_bias_rel)");
}

// `m` or `num_features` (exactly one, when some variant has features). Every F must give each
// map that uses m a whole m <= kMaxM (m_for_features: F / 2 for trig and hyperbolic).
void parse_budget(const json& j, const Field& root, bool any_features, Config& c) {
    if (j.contains("m") && j.contains("num_features"))
        root.at("num_features").fail("give either m or num_features (feature columns per variant), not both");
    if (j.contains("m")) {
        c.m = read_uint_list(j["m"], root.at("m"), kMaxM);
        return;
    }
    if (!j.contains("num_features")) {
        if (any_features) root.at("m").fail("missing (number of random features, a number or a list; or num_features)");
        return;
    }
    const Field w = root.at("num_features");
    c.num_features = read_uint_list(j["num_features"], w, 2 * kMaxM);
    for (std::size_t v = 0; v < c.variants.size(); ++v) {
        const FeatureMap& map = *c.variants[v].map;
        if (!map.uses_m()) continue;
        const std::size_t support = c.variants[v].hybrid.columns(c.causal);   // a hybrid: named as it is (2.8)
        const std::string who = "'" + (support ? c.variants[v].name : map.name()) + "' (variants[" + std::to_string(v) + "])";
        const std::size_t per = map.num_features(1, 1);
        for (std::size_t F : c.num_features) {
            const std::optional<std::size_t> m = m_for_features(c.variants[v], F, 1, c.causal);
            if (!m && support)
                w.fail(std::to_string(F) + " columns: " + who + " spends " + std::to_string(support) +
                       " on its window and sinks" + (c.causal || c.variants[v].hybrid.topk || !c.variants[v].hybrid.window
                                                        ? std::string()
                                                        : " (a non-causal window of w holds 2w - 1 keys)") +
                       " and has " + std::to_string(per) +
                       " columns per random vector, so F must be " + std::to_string(support) + " + a positive multiple of " +
                       std::to_string(per));
            if (!m)
                w.fail(std::to_string(F) + " columns: " + who + " has " + std::to_string(per) +
                       " columns per random vector, so F must be a multiple of " + std::to_string(per));
            if (*m > kMaxM)
                w.fail(std::to_string(F) + " columns need m = " + std::to_string(*m) + " for " + who + ", above " +
                       std::to_string(kMaxM));
        }
    }
}

// `input_seeds`: N (the draws 0 .. N-1) or a list of seeds (sorted, without repeats).
void parse_input_seeds(const json& j, const Field& root, Config& c) {
    if (!j.contains("input_seeds")) return;
    const Field w = root.at("input_seeds");
    const json& v = j["input_seeds"];
    if (c.inputs.npy())
        w.fail("applies only to random inputs (npy inputs are one draw: the files)");
    if (v.is_array()) {
        if (v.empty()) w.fail("must not be empty");
        std::vector<std::uint64_t> s;
        for (std::size_t i = 0; i < v.size(); ++i) s.push_back(read_uint(v[i], w.at(i), 0, kMaxInputSeed));
        std::sort(s.begin(), s.end());
        s.erase(std::unique(s.begin(), s.end()), s.end());
        if (s.size() > kMaxInputSeeds) w.fail("at most " + std::to_string(kMaxInputSeeds) + " seeds");
        c.input_seeds = s;
        return;
    }
    if (!v.is_number()) w.fail("must be a number of draws or a list of seeds, got " + json_type_name(v));
    const std::uint64_t n = read_uint(v, w, 1, kMaxInputSeeds);
    c.input_seeds.clear();
    for (std::uint64_t s = 0; s < n; ++s) c.input_seeds.push_back(s);
}

// The kernel's norms: "norm" (|x| = |y|), or "norm_x" and "norm_y" (two axes), never both.
void parse_kernel_norms(const json& j, const Field& root, KernelSpec& k) {
    const bool split = j.contains("norm_x") || j.contains("norm_y");
    if (split && j.contains("norm"))
        root.at("norm").fail("give either \"norm\" (|x| = |y|) or \"norm_x\" and \"norm_y\", not both");
    if (!split) {
        if (!j.contains("norm")) root.at("norm").fail("missing (a number or a list; or \"norm_x\" and \"norm_y\")");
        k.norm = read_positive_list(j["norm"], root.at("norm"));
        return;
    }
    for (const char* key : {"norm_x", "norm_y"})
        if (!j.contains(key)) root.at(key).fail("missing (a number or a list; it goes with the other of norm_x, norm_y)");
    k.norm = read_positive_list(j["norm_x"], root.at("norm_x"));
    k.norm_y = read_positive_list(j["norm_y"], root.at("norm_y"));
}

// The kernel's "pairs": {"q": PATH, "k": PATH, "count": N}, instead of norms and angles, with
// one "d" (the files' last dimension, checked when the run reads them).
void parse_kernel_pairs(const json& j, const Field& root, KernelSpec& k) {
    const Field w = root.at("pairs");
    if (!j["pairs"].is_object()) w.fail("must be an object {\"q\": PATH, \"k\": PATH, \"count\": N}");
    for (const char* key : {"norm", "norm_x", "norm_y", "angle"})
        if (j.contains(key)) root.at(key).fail("not allowed with \"pairs\" (the pairs give the norms and angles)");
    const json& v = j["pairs"];
    check_keys(v, {"q", "k", "count"}, w);
    for (const char* key : {"q", "k"}) {
        if (!v.contains(key)) w.at(key).fail("missing (path of the .npy file)");
        const std::string p = read_string(v[key], w.at(key));
        if (p.empty()) w.at(key).fail("must not be empty");
        (key[0] == 'q' ? k.pairs_q : k.pairs_k) = p;
    }
    if (!v.contains("count")) w.at("count").fail("missing (how many (q_i, k_j) pairs to sample)");
    k.pairs = read_uint(v["count"], w.at("count"), 1, kMaxTrials);
    if (k.d.size() != 1) root.at("d").fail("must be one number with \"pairs\" (the files' last dimension)");
}

// The keys of one experiment kind, and the checks that need more than one field.
void parse_kind(const json& j, const Field& root, Config& c) {
    switch (c.experiment) {
    case ExperimentKind::kernel:
        for (const char* key : {"d", "angle"})
            if (!j.contains(key) && !(key[0] == 'a' && j.contains("pairs"))) root.at(key).fail("missing (a number or a list)");
        c.kernel.d = read_uint_list(j["d"], root.at("d"), kMaxD);
        if (c.kernel.d.front() < 2)
            root.at("d").fail("must be >= 2 for pairs at an angle, got " + std::to_string(c.kernel.d.front()));
        if (j.contains("pairs")) parse_kernel_pairs(j, root, c.kernel);
        else parse_kernel_norms(j, root, c.kernel);
        if (j.contains("bias")) c.kernel.bias = read_bool(j["bias"], root.at("bias"));
        if (!c.kernel.pairs) c.kernel.angle = read_number_list(j["angle"], root.at("angle"));
        for (std::size_t i = 0; i < c.variants.size(); ++i)
            if (!c.variants[i].map->is_kernel())
                root.at("variants").at(i).at("features").fail(
                    "'" + c.variants[i].map->name() +
                    "' approximates attention over whole sequences, not a kernel of one pair: not in kernel experiments");
        check_dimensions(c, c.kernel.d, root);
        for (std::size_t d : c.kernel.d) check_map_sizes(c, d, 0, 0, 1);
        return;
    case ExperimentKind::approximation:
    case ExperimentKind::timing:
        if (!j.contains("inputs")) root.at("inputs").fail("missing (e.g. {\"source\": \"random\", \"L\": 1024, \"d\": 16})");
        c.inputs = parse_inputs(j["inputs"], root.at("inputs"));
        check_causal(c, root);
        check_dimensions(c, c.inputs.d, root);
        for (std::size_t d : c.inputs.d)
            for (std::size_t L : c.inputs.L) check_map_sizes(c, d, L, L, 1);
        break;
    }
    if (c.experiment == ExperimentKind::approximation) {
        parse_input_seeds(j, root, c);
        c.approximation.metrics = parse_metrics(j, root);
        if (j.contains("query_rows")) c.approximation.query_rows = read_uint(j["query_rows"], root.at("query_rows"), 1, kMaxL);
        check_gradient_metrics(c, root);
        // Half dtypes always report where values overflowed (docs/design.md section 2.6).
        if (dtype_rounding(c.dtype) != Rounding::none)
            for (const MetricInfo& m : metric_table())
                if (m.with_half && !c.approximation.wants(m.name)) c.approximation.metrics.push_back(m.name);
        return;
    }
    if (dtype_rounding(c.dtype) != Rounding::none)
        root.at("dtype").fail("\"" + dtype_name(c.dtype) + "\" is emulated (float32 rounded to half) for approximation "
                              "runs and apply; timing measures float32 or float64");
    if (c.inputs.npy()) root.at("inputs").at("source").fail("timing experiments take random inputs (\"source\": \"random\")");
    const FieldObject o{j, root};
    c.timing.repeats = o.uint("repeats", c.timing.repeats, 1, kMaxTimedRuns);
    c.timing.warmup = o.uint("warmup", c.timing.warmup, 0, 100000);
    c.timing.time_budget_s = o.number("time_budget_s", 0.0);
    if (j.contains("time_budget_s") && c.timing.time_budget_s <= 0) root.at("time_budget_s").fail("must be > 0");
    c.timing.min_time_s = o.number("min_time_s", 0.0);
    if (j.contains("min_time_s") && !(c.timing.min_time_s > 0 && c.timing.min_time_s <= kMaxMinTime))
        root.at("min_time_s").fail("must be > 0 and at most " + std::to_string(int(kMaxMinTime)) + " (seconds per cell)");
    if (j.contains("backward")) c.timing.backward = read_bool(j["backward"], root.at("backward"));
}

}  // namespace

std::optional<std::size_t> m_for_features(const Variant& v, std::size_t F, std::size_t d, bool causal) {
    const FeatureMap& map = *v.map;
    if (!map.uses_m()) return map.num_features(1, d);
    // num_features is linear in m for the maps that use it: `per` columns per random vector,
    // after a hybrid's exact keys (w + s causal, 2w - 1 + s non-causal: docs/design.md 2.8).
    const std::size_t per = map.num_features(1, d), support = v.hybrid.columns(causal);
    if (per == 0 || F <= support || (F - support) % per != 0) return std::nullopt;
    return (F - support) / per;
}

std::vector<std::size_t> variant_m_values(const Config& cfg, std::size_t v, std::size_t d) {
    if (cfg.num_features.empty()) return cfg.m;
    const Variant& var = cfg.variants[v];
    if (!var.map->uses_m()) return {*m_for_features(var, 0, d, cfg.causal)};
    std::vector<std::size_t> out;
    for (std::size_t F : cfg.num_features) out.push_back(m_for_features(var, F, d, cfg.causal).value_or(0));
    return out;
}

void check_map_sizes(const Config& c, std::size_t d, std::size_t L, std::size_t Lk, std::size_t heads) {
    const Field root{c.file, ""};
    for (std::size_t i = 0; i < c.variants.size(); ++i) {
        const Variant& v = c.variants[i];
        if (v.exact) continue;
        const Field w = root.at("variants").at(i);
        for (std::size_t m : variant_m_values(c, i, d)) {
            const std::optional<SizeProblem> p = v.map->check_sizes(m, d, L, Lk);
            if (!p) continue;
            if (p->key == "m")
                root.at(c.num_features.empty() ? "m" : "num_features").fail(p->message + " (variants[" + std::to_string(i) + "])");
            (p->key.empty() ? w : w.at(p->key)).fail(p->message);
        }
        if (const std::optional<SizeProblem> p = v.map->check_heads(heads)) w.at(p->key).fail(p->message);
        if (const std::string why = v.hybrid.empty_rows_problem(v.map->num_features(1, d) != 0, c.causal, L, Lk); !why.empty())
            w.at("window").fail(why);   // (docs/design.md 2.8)
    }
}

QkvSource npy_source(const Config& c) {
    QkvSource s;
    s.q = c.inputs.q, s.k = c.inputs.k, s.v = c.inputs.v;
    s.layout = c.inputs.layout;
    s.layout_field = "inputs.layout";
    if (!c.inputs.L.empty()) s.rows = c.inputs.L.back();   // sorted ascending
    s.rows_field = c.file + ": inputs.L";
    s.causal = c.causal;
    return s;
}

namespace {
// Variants whose fitted weights were fitted on the inputs' q file (the same sha256 as the
// manifest records) get kFittedInputSuffix in their name, so every table says so (a name read
// back from run.json has it already).
void mark_fitted_inputs(const Field& root, Config& c) {
    if (!c.inputs.npy()) return;
    std::string q_sha;
    std::set<std::string> names;
    for (const Variant& v : c.variants) names.insert(v.name);
    for (std::size_t i = 0; i < c.variants.size(); ++i) {
        Variant& v = c.variants[i];
        const std::string fitted = v.exact ? "" : v.map->fitted_on_q_sha256();
        if (fitted.empty()) continue;
        if (q_sha.empty()) {
            const std::string q = parse_tensor_ref(c.inputs.q, "q").path;
            try {
                q_sha = file_sha256(q, "tensor file").sha256;
            } catch (const Error& e) {
                root.at("inputs").at("q").fail(e.what());
            }
        }
        if (fitted != q_sha) continue;
        const std::string suffix = kFittedInputSuffix;
        if (v.name.size() >= suffix.size() && v.name.compare(v.name.size() - suffix.size(), suffix.size(), suffix) == 0)
            continue;
        names.erase(v.name);
        v.name += suffix;
        if (!names.insert(v.name).second)
            root.at("variants").at(i).at("name").fail("duplicate variant name \"" + v.name + "\" (with the suffix of a "
                                                      "map evaluated on the input it was fitted on)");
    }
}
}  // namespace

Config parse_config(const json& j, const std::string& file) {
    const Field root{file, ""};
    if (!j.is_object()) throw Error(file + ": the config must be a JSON object, got " + json_type_name(j));
    check_keys(j, kTopKeys, root);
    Config c;
    c.file = file;
    c.experiment = parse_experiment(j, root);
    for (const auto& [key, value] : j.items())
        if (!key_applies(key, c.experiment))
            root.at(key).fail("does not apply to \"" + experiment_name(c.experiment) + "\" experiments");
    const FieldObject o{j, root};
    c.name = o.string("name", fs::path(file).stem().string());
    c.seed = o.uint("seed", 0, 0, std::numeric_limits<std::uint64_t>::max());
    if (j.contains("dtype")) c.dtype = parse_dtype(read_string(j["dtype"], root.at("dtype")), root.at("dtype"));
    // Before the budget: a non-causal window's keys count twice (2w - 1) in num_features.
    if (j.contains("causal")) c.causal = read_bool(j["causal"], root.at("causal"));
    parse_variants(j, root, c);
    const bool any_features = std::any_of(c.variants.begin(), c.variants.end(), [](const Variant& v) { return !v.exact; });
    parse_budget(j, root, any_features, c);
    c.trials = o.uint("trials", 1, 1, kMaxTrials);
    parse_kind(j, root, c);
    mark_fitted_inputs(root, c);
    c.output_dir = o.string("output_dir", "out/" + c.name);   // never the committed results/ (design.md 5)
    if (c.output_dir.empty()) root.at("output_dir").fail("must not be empty");
    return c;
}

json Config::resolved() const {
    json j;
    j["name"] = name;
    j["experiment"] = experiment_name(experiment);
    j["seed"] = seed;
    j["dtype"] = dtype_name(dtype);
    json vs = json::array();
    for (const Variant& v : variants) vs.push_back(v.resolved());
    j["variants"] = vs;
    if (!m.empty()) j["m"] = m;
    if (!num_features.empty()) j["num_features"] = num_features;
    j["trials"] = trials;
    if (input_seeds_set()) j["input_seeds"] = input_seeds;   // recorded only when not the default
    if (experiment == ExperimentKind::kernel) {
        j["d"] = kernel.d;
        if (kernel.pairs) j["pairs"] = {{"q", kernel.pairs_q}, {"k", kernel.pairs_k}, {"count", kernel.pairs}};
        else {
            if (kernel.norm_y.empty()) j["norm"] = kernel.norm;
            else j["norm_x"] = kernel.norm, j["norm_y"] = kernel.norm_y;
            j["angle"] = kernel.angle;
        }
        if (kernel.bias) j["bias"] = true;   // recorded only when asked for
    } else {
        json in{{"source", inputs.source}};
        if (!inputs.npy()) {
            in["L"] = inputs.L;
            in["d"] = inputs.d;
            if (inputs.d_v) in["d_v"] = *inputs.d_v;
            in["scale"] = inputs.scale;
            in.update(inputs.family.resolved());
        } else {
            in["q"] = inputs.q;
            in["k"] = inputs.k;
            in["v"] = inputs.v;
            in["per_head"] = inputs.per_head;
            if (!inputs.L.empty()) in["L"] = inputs.L;               // recorded only when set
            if (!inputs.layout.empty()) in["layout"] = inputs.layout;
            if (!inputs.grad.empty()) in["grad"] = inputs.grad;
        }
        j["inputs"] = in;
        j["causal"] = causal;
    }
    if (experiment == ExperimentKind::approximation) j["metrics"] = approximation.metrics;
    if (approximation.query_rows) j["query_rows"] = *approximation.query_rows;   // recorded only when set
    if (experiment == ExperimentKind::timing) {
        j["repeats"] = timing.repeats;
        j["warmup"] = timing.warmup;
        if (timing.time_budget_s > 0) j["time_budget_s"] = timing.time_budget_s;
        if (timing.min_time_s > 0) j["min_time_s"] = timing.min_time_s;   // recorded only when set
        if (timing.backward) j["backward"] = true;   // recorded only when set
    }
    j["output_dir"] = output_dir;
    return j;
}

namespace {
// A grid flag's values as the config holds them: one number, or a list of several.
json grid_value(const std::vector<std::uint64_t>& v) { return v.size() == 1 ? json(v[0]) : json(v); }
}  // namespace

void apply_overrides(json& j, const ConfigOverrides& o) {
    for (const std::string& s : o.sets) apply_set(j, s);
    if (o.m) set_path(j, "m", grid_value(*o.m)), set_path(j, "num_features", nullptr);
    if (o.num_features) set_path(j, "num_features", grid_value(*o.num_features)), set_path(j, "m", nullptr);
    if (o.L) set_path(j, "inputs.L", grid_value(*o.L));
    if (o.trials) set_path(j, "trials", *o.trials);
    if (o.seed) set_path(j, "seed", *o.seed);
    if (o.dtype) set_path(j, "dtype", dtype_name(*o.dtype));
}

Config load_config(const std::string& path, const std::vector<std::string>& sets) {
    ConfigOverrides o;
    o.sets = sets;
    return load_config(path, o);
}

Config load_config(const std::string& path, const ConfigOverrides& overrides) {
    if (path.empty()) throw Error("config file: empty path");
    // A regular file of at most kMaxConfigBytes: no FIFO, device or endless file.
    return load_config_text(read_regular_file(path, "config file", kMaxConfigBytes), path, overrides);
}

Config load_config_text(const std::string& text, const std::string& path, const ConfigOverrides& overrides) {
    json j = parse_json_text(text, path);
    // Relative paths in the file (tensor inputs, kernel pairs, output_dir, variants' weights) are relative to the
    // file's folder (design.md section 5, Paths).
    if (j.is_object()) {
        const fs::path base = fs::path(path).parent_path();
        auto resolve = [&base](json& p) {
            if (p.is_string() && !p.get<std::string>().empty() && fs::path(p.get<std::string>()).is_relative())
                p = (base / p.get<std::string>()).lexically_normal().string();
        };
        // A tensor reference: only its file's path; a .npz / .safetensors name after it stays
        // as written (lexically_normal would rewrite "a/../b" or "a//b" in a name).
        auto resolve_ref = [&resolve](json& p) {
            if (!p.is_string()) return;
            const std::string spec = p.get<std::string>(), file = parse_tensor_ref(spec, "").path;
            json resolved = file;
            resolve(resolved);
            p = resolved.get<std::string>() + spec.substr(file.size());   // the path is a prefix of spec
        };
        for (const char* obj : {"inputs", "pairs"})
            if (j.contains(obj) && j[obj].is_object())
                for (const char* key : {"q", "k", "v"}) {
                    json& p = j[obj][key];
                    if (p.is_null()) j[obj].erase(key);
                    else if (std::string(obj) == "inputs") resolve_ref(p);
                    else resolve(p);
                }
        if (j.contains("inputs") && j["inputs"].is_object() && j["inputs"].contains("grad"))
            resolve(j["inputs"]["grad"]);                          // the upstream gradient's npy
        if (j.contains("output_dir")) resolve(j["output_dir"]);
        if (j.contains("variants") && j["variants"].is_array())   // fitted maps' "weights" (FILE.npz:LAYER)
            for (json& v : j["variants"])
                if (v.is_object() && v.contains("weights")) resolve_ref(v["weights"]);
    }
    apply_overrides(j, overrides);
    return parse_config(j, path);
}

}  // namespace favor
