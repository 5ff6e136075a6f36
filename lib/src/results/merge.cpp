#include "favor/results/merge.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "favor/core/error.hpp"
#include "favor/experiments/cells.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/io/files.hpp"
#include "favor/io/json_diff.hpp"
#include "favor/io/report.hpp"
#include "favor/metrics/metric_table.hpp"

namespace favor {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// --- one input, read and checked against its own run.json -----------------------------------

struct Input {
    std::string dir;
    json info;
    Config cfg;
    json canon;                  // resolved config without output_dir
    Shard shard;
    bool merged = false, partial = false;
    std::size_t heads = 1;       // rows per (cell, trial): npy heads with per_head
    std::optional<std::size_t> recorded_cells;
    std::string table_file;      // errors.csv or (kernel) summary.csv
    Table table, summary;
    Table baselines;             // with input_seeds: baselines.csv (baseline_<metric> per input draw)
};

bool is_kernel(const Input& in) { return in.cfg.experiment == ExperimentKind::kernel; }

std::size_t read_count(const json& j, const std::string& what, const std::string& file) {
    if (!j.is_number_unsigned()) throw Error(file + ": " + what + ": missing or not a count");
    return j.get<std::size_t>();
}

Input read_input(const MergeInput& m) {
    Input in;
    in.dir = m.dir;
    const std::string rj = m.dir + "/run.json";
    try {
        in.info = parse_json_text(m.run_json, rj);   // nesting depth checked before parsing
    } catch (const JsonSyntaxError&) {
        throw Error(rj + ": invalid JSON");
    }
    if (!in.info.is_object() || !in.info.contains("config") || !in.info["config"].is_object())
        throw Error(rj + ": no config (is " + m.dir + " a favor result directory?)");
    in.cfg = parse_config(in.info["config"], rj);   // every field checked, as for a config file
    if (in.cfg.experiment == ExperimentKind::timing)
        throw Error(m.dir + ": merge combines approximation and kernel results, not timing");
    in.canon = in.cfg.resolved();
    in.canon.erase("output_dir");
    const json& sh = in.info["shard"];
    if (!sh.is_object()) throw Error(rj + ": shard: missing");
    in.shard.index = read_count(sh.contains("index") ? sh["index"] : json(), "shard.index", rj);
    in.shard.count = read_count(sh.contains("count") ? sh["count"] : json(), "shard.count", rj);
    if (in.shard.count == 0 || in.shard.index >= in.shard.count) throw Error(rj + ": shard: not K/N with 0 <= K < N");
    if (sh.contains("cells")) in.recorded_cells = read_count(sh["cells"], "shard.cells", rj);
    if (!in.info.contains("seed") || in.info["seed"] != json(in.cfg.seed))
        throw Error(rj + ": seed differs from its config's seed");
    in.merged = in.info.contains("merged_from");
    if (in.info.contains("partial")) {
        if (!in.info["partial"].is_boolean()) throw Error(rj + ": partial: not true or false");
        in.partial = in.info["partial"].get<bool>();
    }
    if (!is_kernel(in) && in.cfg.inputs.npy()) {
        const json& i = in.info["inputs"];
        if (!i.is_object()) throw Error(rj + ": inputs: missing (npy inputs record their shape)");
        in.heads = read_count(i.contains("heads") ? i["heads"] : json(), "inputs.heads", rj);
        read_count(i.contains("L") ? i["L"] : json(), "inputs.L", rj);
        read_count(i.contains("d") ? i["d"] : json(), "inputs.d", rj);
        if (in.heads == 0) throw Error(rj + ": inputs.heads: must be >= 1");
        if (!in.cfg.inputs.per_head) in.heads = 1;
    }
    in.table_file = m.dir + (is_kernel(in) ? "/summary.csv" : "/errors.csv");
    const std::optional<std::string>& text = is_kernel(in) ? m.summary : m.errors;
    if (!text) throw Error(in.table_file + ": missing");
    in.table = parse_csv(*text, in.table_file);
    if (!is_kernel(in)) {
        if (!m.summary) throw Error(m.dir + "/summary.csv: missing");
        in.summary = parse_csv(*m.summary, m.dir + "/summary.csv");
        if (in.cfg.input_seeds_set() && m.baselines) in.baselines = parse_csv(*m.baselines, m.dir + "/baselines.csv");
    }
    return in;
}

std::vector<std::string> expected_columns(const Input& in) {
    if (is_kernel(in))
        return {"variant", "features", "projection", "d", "m", "norm", "angle", "trials",
                "sm", "mse", "mse_sem", "mse_theory", "theorem2_bound"};
    std::vector<std::string> c = approximation_key_columns();
    if (in.cfg.inputs.npy() && in.cfg.inputs.per_head) c.push_back("head");
    if (in.cfg.input_seeds_set()) c.push_back("input_seed");
    c.push_back("trial");
    c.push_back("seed");
    for (const auto& m : metric_columns(in.cfg.approximation.metrics, in.cfg.has_row_sem())) c.push_back(m);
    return c;
}

// A row's place: its index in the input's grid (cell) and its sort key without the variant.
struct RowPlace {
    std::size_t variant = 0, cell = 0;
    std::vector<double> key;   // L, d, m, scale, input seed, trial[, head]  (kernel: d, m, norm, angle)
};

template <class V>
std::size_t index_in(const std::vector<V>& list, V v) {
    const auto it = std::find(list.begin(), list.end(), v);
    return it == list.end() ? list.size() : std::size_t(it - list.begin());
}

class RowChecker {
public:
    RowChecker(const Input& in, std::size_t row) : in_(in), where_(in.table_file + ": line " + std::to_string(row + 2)) {}
    [[noreturn]] void fail(const std::string& col, const std::string& cell, const std::string& why) const {
        throw Error(where_ + ": " + col + ": '" + cell.substr(0, 40) + "' " + why);
    }
    std::size_t count(const std::vector<std::string>& r, const std::string& col) const {
        std::size_t v = 0;
        const std::string& c = r[in_.table.column(col)];
        if (!parse_count(c, v)) fail(col, c, "is not a count");
        return v;
    }
    double real(const std::vector<std::string>& r, const std::string& col) const {
        double v = 0;
        const std::string& c = r[in_.table.column(col)];
        if (!parse_real(c, v, false)) fail(col, c, "is not a finite number");
        return v;
    }
    // A metric cell: empty, or a number (nan / inf allowed where the runner can produce them).
    void metric(const std::vector<std::string>& r, std::size_t i) const {
        if (const std::string why = metric_cell_problem(in_.table.columns[i], r[i]); !why.empty())
            fail(in_.table.columns[i], r[i], why);
    }
    std::size_t variant(const std::vector<std::string>& r) const {
        const std::string& name = r[in_.table.column("variant")];
        if (const std::string why = variant_name_problem(name); !why.empty()) fail("variant", name, why);
        for (std::size_t v = 0; v < in_.cfg.variants.size(); ++v) {
            const Variant& var = in_.cfg.variants[v];
            if (var.name != name) continue;
            if (r[in_.table.column("features")] != var.features_label() ||
                r[in_.table.column("projection")] != var.projection_label())
                fail("variant", name, "has other features or projection than in run.json");
            return v;
        }
        fail("variant", name, "is not a variant of its run.json config");
    }
    template <class V>
    std::size_t in_list(const std::vector<V>& list, V v, const std::string& col, const std::vector<std::string>& r) const {
        const std::size_t i = index_in(list, v);
        if (i == list.size()) fail(col, r[in_.table.column(col)], "is not in its run.json config's grid");
        return i;
    }

private:
    const Input& in_;
    std::string where_;
};

// The budget index of a row (cells.hpp): m in the m grid, or num_features (a map whose F is
// fixed by d: its own F, at index 0), with m the one its map has at that F.
std::size_t budget_index(const Input& in, const RowChecker& ck, const std::vector<std::string>& r, std::size_t variant,
                         std::size_t m, std::size_t d) {
    const Config& c = in.cfg;
    const Variant& var = c.variants[variant];
    const FeatureMap& map = *var.map;
    const std::size_t F = ck.count(r, "num_features");
    if (F != var.num_features(m, d, c.causal))
        ck.fail("num_features", r[in.table.column("num_features")], "does not match the variant's map at this m and d");
    if (c.num_features.empty()) return ck.in_list(c.m, m, "m", r);
    if (m_for_features(var, F, d, c.causal) != m) ck.fail("m", r[in.table.column("m")], "is not the m of the variant's map at this num_features");
    return map.uses_m() ? ck.in_list(c.num_features, F, "num_features", r) : 0;
}

RowPlace place_approximation(const Input& in, const ApproxCells& grid, const std::vector<std::string>& r, std::size_t row) {
    const RowChecker ck(in, row);
    const Config& c = in.cfg;
    RowPlace p;
    p.variant = ck.variant(r);
    const std::size_t L = ck.count(r, "L"), d = ck.count(r, "d"), m = ck.count(r, "m");
    std::size_t li = 0, di = 0, si = 0;
    double scale = -1.0;
    if (c.inputs.npy()) {
        if (!c.inputs.L.empty()) li = ck.in_list(c.inputs.L, L, "L", r);   // the first L rows of the files
        else if (L != in.info.at("inputs").at("L").get<std::size_t>()) ck.fail("L", r[in.table.column("L")], "is not the length of the npy inputs");
        if (d != in.info.at("inputs").at("d").get<std::size_t>()) ck.fail("d", r[in.table.column("d")], "is not the d of the npy inputs");
        if (!r[in.table.column("scale")].empty()) ck.fail("scale", r[in.table.column("scale")], "must be empty for npy inputs");
    } else {
        li = ck.in_list(c.inputs.L, L, "L", r);
        di = ck.in_list(c.inputs.d, d, "d", r);
        scale = ck.real(r, "scale");
        si = ck.in_list(c.inputs.scale, scale, "scale", r);
    }
    const std::size_t bi = budget_index(in, ck, r, p.variant, m, d);
    std::size_t seed_index = 0;
    if (c.input_seeds_set()) seed_index = ck.in_list(c.input_seeds, std::uint64_t(ck.count(r, "input_seed")), "input_seed", r);
    const std::size_t trial = ck.count(r, "trial");
    if (trial >= c.trials) ck.fail("trial", r[in.table.column("trial")], "is not below the config's trials");
    if (r[in.table.column("seed")] != std::to_string(c.seed)) ck.fail("seed", r[in.table.column("seed")], "is not the config's seed");
    p.cell = *grid.find({p.variant, li, di, bi, si});
    p.key = {double(L), double(d), double(m), scale, double(c.input_seeds[seed_index]), double(trial)};
    if (in.table.has_column("head")) {
        const std::size_t h = ck.count(r, "head");
        if (h >= in.heads) ck.fail("head", r[in.table.column("head")], "is not below the number of heads");
        p.key.push_back(double(h));
    }
    for (std::size_t i = in.table.column("seed") + 1; i < r.size(); ++i) ck.metric(r, i);
    return p;
}

RowPlace place_kernel(const Input& in, const KernelCells& grid, const std::vector<std::string>& r, std::size_t row) {
    const RowChecker ck(in, row);
    const Config& c = in.cfg;
    const KernelSpec& k = c.kernel;
    RowPlace p;
    p.variant = ck.variant(r);
    const std::size_t d = ck.count(r, "d"), m = ck.count(r, "m");
    const double norm = ck.real(r, "norm"), angle = ck.real(r, "angle");
    const std::size_t di = ck.in_list(k.d, d, "d", r), mi = ck.in_list(c.m, m, "m", r);
    const std::size_t ni = ck.in_list(k.norm, norm, "norm", r), ai = ck.in_list(k.angle, angle, "angle", r);
    if (ck.count(r, "trials") != c.trials) ck.fail("trials", r[in.table.column("trials")], "is not the config's trials");
    for (std::size_t i = in.table.column("trials") + 1; i < r.size(); ++i) ck.metric(r, i);
    p.cell = grid.find({p.variant, di, mi, ni, ai});
    p.key = {double(d), double(m), norm, angle};
    return p;
}

// Checks every row of `in` and returns their places. The rows must be exactly the cells the
// input owns: each in its grid and shard, each (cell, trial[, head]) once, all of them.
std::vector<RowPlace> check_rows(const Input& in) {
    const std::vector<std::string> want = expected_columns(in);
    if (in.table.columns != want) {
        std::string w, g;
        for (const auto& c : want) w += (w.empty() ? "" : ",") + c;
        for (const auto& c : in.table.columns) g += (g.empty() ? "" : ",") + c;
        throw Error(in.table_file + ": columns are not what its run.json config gives (" + g + " vs " + w + ")");
    }
    std::vector<RowPlace> places;
    std::set<std::size_t> cells;
    std::set<std::pair<std::size_t, double>> draws;   // (cell, input seed)
    std::set<std::pair<std::size_t, std::vector<double>>> seen;
    const std::optional<ApproxCells> approx = is_kernel(in) ? std::nullopt : std::optional<ApproxCells>(in.cfg);
    const std::optional<KernelCells> kernel = is_kernel(in) ? std::optional<KernelCells>(in.cfg) : std::nullopt;
    for (std::size_t i = 0; i < in.table.rows.size(); ++i) {
        const auto& r = in.table.rows[i];
        RowPlace p = is_kernel(in) ? place_kernel(in, *kernel, r, i) : place_approximation(in, *approx, r, i);
        if (!in.merged && !in.shard.owns(p.cell))
            throw Error(in.table_file + ": line " + std::to_string(i + 2) + ": a cell of shard " +
                        std::to_string(p.cell % in.shard.count) + "/" + std::to_string(in.shard.count) +
                        ", but run.json says shard " + std::to_string(in.shard.index) + "/" + std::to_string(in.shard.count));
        if (!seen.insert({p.variant, p.key}).second)
            throw Error(in.table_file + ": line " + std::to_string(i + 2) + ": the same cell and trial twice");
        cells.insert(p.cell);
        draws.insert({p.cell, is_kernel(in) ? 0.0 : p.key[4]});
        places.push_back(std::move(p));
    }
    const std::size_t G = config_cells(in.cfg);
    const std::size_t derived = G / in.shard.count + (in.shard.index < G % in.shard.count ? 1 : 0);
    const std::string rj = in.dir + "/run.json";
    if (!in.merged && in.recorded_cells && *in.recorded_cells != derived)
        throw Error(rj + ": shard.cells is " + std::to_string(*in.recorded_cells) + ", but its config gives " +
                    std::to_string(derived) + " cells to shard " + std::to_string(in.shard.index) + "/" +
                    std::to_string(in.shard.count));
    const std::size_t expected = in.recorded_cells ? *in.recorded_cells : in.merged ? cells.size() : derived;
    // Rows per (cell, input seed); a merge of input-seed sweeps may hold different seeds per cell.
    const std::size_t per_draw = is_kernel(in) ? 1 : in.cfg.trials * in.heads;
    const std::size_t seeds = is_kernel(in) ? 1 : in.cfg.input_seeds.size();
    const bool whole = in.merged ? in.table.rows.size() == draws.size() * per_draw : draws.size() == cells.size() * seeds;
    if (cells.size() != expected || !whole || in.table.rows.size() != draws.size() * per_draw)
        throw Error(in.table_file + ": incomplete: " + std::to_string(in.table.rows.size()) + " rows in " +
                    std::to_string(cells.size()) + " cells, but run.json says " + std::to_string(expected) +
                    " cells x " + std::to_string(seeds * per_draw) + " rows");
    return places;
}

// --- the inputs together ------------------------------------------------------------------

// The config without what may differ between the runs of a sweep: the grid lists, the input
// seeds and which variants there are.
json sweep_invariant(const Input& in) {
    json c = in.canon;
    for (const char* k : {"variants", "m", "num_features", "input_seeds"}) c.erase(k);
    if (is_kernel(in)) {
        for (const char* k : {"d", "norm", "angle"}) c.erase(k);
    } else if (c.contains("inputs")) {   // npy inputs: L only (the row counts)
        for (const char* k : {"L", "d", "scale"}) c["inputs"].erase(k);
    }
    return c;
}

// Shard sets: inputs with equal configs. Each must be shards 0..N-1 of one N, each once.
// Returns a description of the missing shards (empty when complete).
std::vector<std::string> check_shard_sets(const std::vector<Input>& ins, const MergeOptions& opt) {
    std::map<std::string, std::vector<std::size_t>> sets;   // config -> inputs
    std::vector<std::string> order;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        const std::string k = ins[i].canon.dump();
        if (!sets.count(k)) order.push_back(k);
        sets[k].push_back(i);
    }
    std::vector<std::string> missing;
    for (const auto& k : order) {
        const std::vector<std::size_t>& members = sets[k];
        const Input& first = ins[members[0]];
        std::map<std::size_t, std::size_t> by_index;
        for (std::size_t i : members) {
            const Input& in = ins[i];
            if (in.shard.count != first.shard.count)
                throw Error("merge: " + in.dir + " is shard " + std::to_string(in.shard.index) + "/" +
                            std::to_string(in.shard.count) + " of the same config as " + first.dir + ", shard " +
                            std::to_string(first.shard.index) + "/" + std::to_string(first.shard.count) +
                            " (different splits)");
            const auto [it, fresh] = by_index.emplace(in.shard.index, i);
            if (!fresh)
                throw Error("merge: " + in.dir + " is shard " + std::to_string(in.shard.index) + "/" +
                            std::to_string(in.shard.count) + " again (also " + ins[it->second].dir +
                            "): duplicate input");
        }
        std::string gaps;
        for (std::size_t s = 0; s < first.shard.count; ++s)
            if (!by_index.count(s)) gaps += (gaps.empty() ? "" : ", ") + std::to_string(s);
        if (gaps.empty()) continue;
        const std::string what = "shard(s) " + gaps + " of " + std::to_string(first.shard.count) +
                                 " missing for the config of " + first.dir;
        if (!opt.allow_partial) throw Error("merge: incomplete shard set: " + what + " (--allow-partial merges anyway)");
        missing.push_back(what);
    }
    return missing;
}

// Everything but the grid lists and the set of variants must agree; a variant name means
// one definition everywhere; npy inputs must be the same tensors.
void check_compatible(const std::vector<Input>& ins) {
    const Input& first = ins[0];
    const json base = sweep_invariant(first);
    std::map<std::string, std::pair<json, std::string>> variants;   // name -> (definition, dir)
    for (const Input& in : ins) {
        if (!is_kernel(in) && in.cfg.num_features.empty() != first.cfg.num_features.empty())
            throw Error("merge: " + in.dir + "/run.json: its grid is over " + (in.cfg.num_features.empty() ? "m" : "num_features") +
                        ", " + first.dir + "'s over " + (first.cfg.num_features.empty() ? "m" : "num_features") +
                        " (merge runs of one budget axis)");
        const std::string d = json_difference(sweep_invariant(in), base);
        if (!d.empty()) throw Error("merge: " + in.dir + "/run.json: config differs from " + first.dir + "'s in " + d);
        if (in.info.value("inputs", json()) != first.info.value("inputs", json()))
            throw Error("merge: " + in.dir + "/run.json: inputs differ from " + first.dir + "'s in " +
                        json_difference(in.info.value("inputs", json()), first.info.value("inputs", json())));
        for (const json& v : in.canon.at("variants")) {
            const std::string name = v.at("name").get<std::string>();
            const auto [it, fresh] = variants.emplace(name, std::make_pair(v, in.dir));
            if (!fresh && it->second.first != v)
                throw Error("merge: " + in.dir + "/run.json: variant \"" + name + "\" differs from " + it->second.second +
                            "'s in " + json_difference(v, it->second.first));
        }
    }
}

// Union of a grid list across inputs, ascending.
void merge_list(json& into, const json& from) {
    if (!from.is_array()) return;
    std::set<double> values;
    std::vector<json> all;
    for (const json* src : {static_cast<const json*>(&into), &from})
        if (src->is_array())
            for (const json& v : *src)
                if (v.is_number() && values.insert(v.get<double>()).second) all.push_back(v);
    std::sort(all.begin(), all.end(), [](const json& a, const json& b) { return a.get<double>() < b.get<double>(); });
    into = all;
}

// The first input's config with the variants (in order of first appearance, returned in
// `order`) and grid lists of all inputs.
json merged_config(const std::vector<Input>& ins, std::vector<std::string>& order) {
    json config = ins[0].cfg.resolved();
    config["variants"] = json::array();
    for (const Input& in : ins) {
        const json c = in.cfg.resolved();
        for (const json& v : c.at("variants")) {
            const std::string n = v.at("name").get<std::string>();
            if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n), config["variants"].push_back(v);
        }
        for (const char* k : {"m", "num_features", "d", "norm", "angle"})
            if (c.contains(k)) merge_list(config[k], c[k]);
        if (!is_kernel(in)) merge_list(config["input_seeds"], json(in.cfg.input_seeds));   // absent: {0}
        if (c.contains("inputs"))
            for (const char* k : {"L", "d", "scale"})
                if (c["inputs"].contains(k)) merge_list(config["inputs"][k], c["inputs"][k]);
    }
    if (config.contains("input_seeds") && config["input_seeds"] == json::array({0})) config.erase("input_seeds");
    return config;
}

// An input's baselines per input draw: its baselines.csv with input_seeds, else its
// summary.csv's baseline columns (the one draw, input seed 0).
Table draw_baselines(const Input& in, std::string& file) {
    file = in.dir + (in.cfg.input_seeds_set() ? "/baselines.csv" : "/summary.csv");
    if (in.cfg.input_seeds_set()) {
        for (const auto& c : in.summary.columns)
            if (c.rfind("baseline_", 0) == 0 && in.baselines.columns.empty()) throw Error(file + ": missing");
        return in.baselines;
    }
    Table t = in.summary;
    t.columns.push_back("input_seed");
    for (auto& r : t.rows) r.push_back("0");
    return t;
}

// The baseline_<metric> columns per input draw, one row per key (`on`: L, d, scale[, head],
// input_seed), sorted as the runner writes them: every input computed them from the same
// inputs, so copies must agree.
Table merged_baselines(const std::vector<Input>& ins, const std::vector<std::string>& on) {
    Table out;
    std::map<std::vector<std::string>, std::vector<std::string>> seen;
    for (const Input& in : ins) {
        std::string file;
        const Table t = draw_baselines(in, file);
        std::vector<std::size_t> idx;
        for (const auto& c : on) {
            if (!t.has_column(c)) throw Error(file + ": no column " + c);
            idx.push_back(t.column(c));
        }
        std::vector<std::string> cols = on;
        for (std::size_t c = 0; c < t.columns.size(); ++c)
            if (t.columns[c].rfind("baseline_", 0) == 0) idx.push_back(c), cols.push_back(t.columns[c]);
        if (out.columns.empty() && cols.size() > on.size()) out.columns = cols;
        if (cols != out.columns && !(out.columns.empty() && cols.size() == on.size()))
            throw Error("merge: " + file + ": baseline columns differ from the other inputs'");
        if (cols.size() == on.size()) continue;
        for (std::size_t ri = 0; ri < t.rows.size(); ++ri) {
            std::vector<std::string> row;
            for (std::size_t i : idx) row.push_back(t.rows[ri][i]);
            for (std::size_t k = on.size(); k < row.size(); ++k) {
                double v = 0;
                if (!row[k].empty() && !parse_real(row[k], v, true))
                    throw Error(file + ": line " + std::to_string(ri + 2) + ": " + cols[k] + ": '" + row[k].substr(0, 40) +
                                "' is not a number");
            }
            const std::vector<std::string> key(row.begin(), row.begin() + std::ptrdiff_t(on.size()));
            const auto [it, fresh] = seen.emplace(key, row);
            if (fresh) out.rows.push_back(row);
            else if (it->second != row)
                throw Error("merge: " + file + ": baseline values differ from another input's for the same inputs");
        }
    }
    // Ascending L, d, scale, input seed, then head (the runner's order of its inputs).
    std::vector<std::size_t> order;
    for (const char* k : {"L", "d", "scale", "input_seed", "head"})
        if (const auto i = std::find(on.begin(), on.end(), k); i != on.end()) order.push_back(std::size_t(i - on.begin()));
    auto number = [](const std::string& c) { return c.empty() ? -1.0 : std::strtod(c.c_str(), nullptr); };
    std::stable_sort(out.rows.begin(), out.rows.end(), [&](const auto& a, const auto& b) {
        for (std::size_t i : order)
            if (number(a[i]) != number(b[i])) return number(a[i]) < number(b[i]);
        return false;
    });
    return out;
}

// summary.csv from the merged errors, with the baselines' mean over input seeds; baselines.csv
// (per input draw) when the merged config has input seeds.
void merged_summary(const std::vector<Input>& ins, bool seeds, RunResult& res) {
    const Table& errors = res.errors;
    const std::vector<std::string> cols(errors.columns.begin() + std::ptrdiff_t(errors.column("seed") + 1), errors.columns.end());
    const bool per_head = errors.has_column("head");
    std::vector<std::string> summary_keys = approximation_key_columns();
    if (per_head) summary_keys.push_back("head");
    res.summary = summarize(errors, summary_keys, stat_columns(cols), value_columns(cols));
    const std::vector<std::string> on = baseline_key_columns(per_head);
    std::vector<std::string> on_draw = on;
    on_draw.push_back("input_seed");
    Table per_draw = merged_baselines(ins, on_draw);
    if (per_draw.columns.empty()) return;
    const std::vector<std::string> values(per_draw.columns.begin() + std::ptrdiff_t(on_draw.size()), per_draw.columns.end());
    res.summary = join_columns(res.summary, group_means(per_draw, on, values), on);
    if (seeds) {
        // The runner's column order: L, d, scale[, head], input_seed.
        res.baselines = per_draw;
    }
}

// The inputs, read and checked: one experiment kind, compatible configs, shard sets complete
// (or, with --allow-partial, `missing` describes the gaps).
std::vector<Input> read_inputs(const std::vector<MergeInput>& raw, const MergeOptions& opt, std::vector<std::string>& missing) {
    if (raw.empty()) throw Error("merge: no input directories");
    std::vector<Input> ins;
    for (const auto& m : raw) ins.push_back(read_input(m));
    for (const Input& in : ins)
        if (is_kernel(in) != is_kernel(ins[0]))
            throw Error("merge: " + in.dir + "/run.json: experiment \"" + experiment_name(in.cfg.experiment) +
                        "\" differs from \"" + experiment_name(ins[0].cfg.experiment) + "\" in " + ins[0].dir);
    check_compatible(ins);
    missing = check_shard_sets(ins, opt);
    return ins;
}

// A row of an input with its global sort key: the variant's place in `variant_order`, then
// its RowPlace key.
struct Row {
    std::vector<double> key;
    const std::vector<std::string>* cells;
    std::size_t input;
};

// A (cell, trial) from two inputs is refused, naming the cell and both inputs.
void refuse_duplicates(const std::vector<Input>& ins, const std::vector<Row>& rows) {
    for (std::size_t i = 1; i < rows.size(); ++i) {
        if (rows[i].key != rows[i - 1].key) continue;
        const auto& r = *rows[i].cells;
        const Table& own = ins[rows[i].input].table;
        std::string cell = "variant=" + r[own.column("variant")];
        for (const char* k : {"L", "d", "m", "scale", "input_seed", "trial", "head", "norm", "angle"})
            if (own.has_column(k)) cell += std::string(" ") + k + "=" + r[own.column(k)];
        throw Error("merge: the cell " + cell + " is in both " + ins[rows[i - 1].input].dir + " and " +
                    ins[rows[i].input].dir + (*rows[i].cells == *rows[i - 1].cells ? " (duplicate input?)" :
                                              " with different values (inconsistent inputs)"));
    }
}

// Every row of every input, checked, in the merged order.
std::vector<Row> sorted_rows(const std::vector<Input>& ins, const std::vector<std::string>& variant_order) {
    std::vector<Row> rows;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        const std::vector<RowPlace> places = check_rows(ins[i]);
        for (std::size_t r = 0; r < places.size(); ++r) {
            const std::string& name = ins[i].cfg.variants[places[r].variant].name;
            std::vector<double> key{double(std::find(variant_order.begin(), variant_order.end(), name) - variant_order.begin())};
            key.insert(key.end(), places[r].key.begin(), places[r].key.end());
            rows.push_back({std::move(key), &ins[i].table.rows[r], i});
        }
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.key < b.key; });
    refuse_duplicates(ins, rows);
    return rows;
}

// The merged errors.csv (kernel: summary.csv) into `out`; returns the number of distinct
// cells. With input seeds in the merged config (`seeds`), every row has an input_seed (0
// where its input had none).
std::size_t merged_rows(const std::vector<Input>& ins, const std::vector<Row>& rows, bool seeds, Table& out) {
    out.columns = is_kernel(ins[0]) ? ins[0].table.columns : expected_columns(ins[0]);
    if (seeds && !ins[0].cfg.input_seeds_set()) out.columns.insert(out.columns.begin() + std::ptrdiff_t(out.column("trial")), "input_seed");
    std::set<std::vector<double>> cells;   // distinct cells (key without input seed, trial and head)
    for (const Row& r : rows) {
        std::vector<std::string> cellsv = *r.cells;
        if (seeds && !ins[r.input].cfg.input_seeds_set())
            cellsv.insert(cellsv.begin() + std::ptrdiff_t(out.column("input_seed")), "0");
        out.rows.push_back(std::move(cellsv));
        cells.insert(std::vector<double>(r.key.begin(), r.key.begin() + 5));   // variant and 4 grid values
    }
    return cells.size();
}

// run.json of the merged result: the merged config, its sources, and whether shards are missing.
nlohmann::json merged_info(const std::vector<Input>& ins, const json& config, const std::vector<std::string>& missing,
                           std::size_t cells) {
    json info;
    std::vector<std::string> dirs;
    bool partial = !missing.empty();
    for (const Input& in : ins) dirs.push_back(in.dir), partial = partial || in.partial;
    info["config"] = config;
    info["merged_from"] = dirs;
    info["seed"] = ins[0].info["seed"];
    info["environment"] = ins[0].info.value("environment", json());
    info["shard"] = {{"index", 0}, {"count", 1}, {"cells", cells}};
    if (ins[0].info.contains("inputs")) info["inputs"] = ins[0].info["inputs"];
    if (partial) {
        info["partial"] = true;
        json m = json::array();
        for (const Input& in : ins)
            if (in.partial && in.info.contains("missing_shards")) for (const auto& x : in.info["missing_shards"]) m.push_back(x);
        for (const auto& x : missing) m.push_back(x);
        info["missing_shards"] = m;
    }
    return info;
}

}  // namespace

RunResult merge_inputs(const std::vector<MergeInput>& raw, const MergeOptions& opt) {
    std::vector<std::string> missing;
    const std::vector<Input> ins = read_inputs(raw, opt, missing);
    const bool kernel = is_kernel(ins[0]);
    std::vector<std::string> variant_order;
    const json config = merged_config(ins, variant_order);
    const std::vector<Row> rows = sorted_rows(ins, variant_order);
    RunResult res;
    const bool seeds = config.contains("input_seeds");
    const std::size_t cells = merged_rows(ins, rows, seeds, kernel ? res.summary : res.errors);
    if (!kernel) merged_summary(ins, seeds, res);
    res.info = merged_info(ins, config, missing, cells);
    return res;
}

namespace {

// A file of a result directory, through the directory's handle: regular files only (a
// symlink to /dev/zero or a FIFO is refused, not read forever).
std::optional<std::string> read_member(int dirfd, const std::string& dir, const char* name) {
    return read_file_if_exists(dirfd, name, dir + "/" + name);
}

}  // namespace

RunResult merge_results(const std::vector<std::string>& dirs, const MergeOptions& opt) {
    if (dirs.empty()) throw Error("merge: no input directories");
    std::vector<MergeInput> inputs;
    std::map<std::string, std::string> seen;   // canonical path -> as given
    for (const auto& dir : dirs) {
        std::error_code ec;
        fs::path p = fs::path(dir).lexically_normal();
        if (p.filename().empty()) p = p.parent_path();
        if (is_favor_temporary_name(p.filename().string()))
            throw Error(dir + ": a temporary of an unfinished favor run, not a result set");
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) throw Error(dir + ": cannot open as a directory (" + std::string(std::strerror(errno)) + ")");
        const std::string canon = fs::canonical(dir, ec).string();
        const auto [it, fresh] = seen.emplace(ec ? dir : canon, dir);
        if (!fresh) {
            ::close(fd);
            throw Error("merge: " + dir + " is given twice (also as " + it->second + ")");
        }
        try {
            MergeInput in;
            in.dir = dir;
            const auto rj = read_member(fd, dir, "run.json");
            if (!rj && ::faccessat(fd, "journal.jsonl", F_OK, 0) == 0)
                throw Error(dir + ": an unfinished run (journal.jsonl, no run.json yet): finish it with favor run --resume");
            if (!rj) throw Error(dir + "/run.json: cannot open (is " + dir + " a favor result directory?)");
            in.run_json = *rj;
            in.errors = read_member(fd, dir, "errors.csv");
            in.summary = read_member(fd, dir, "summary.csv");
            in.baselines = read_member(fd, dir, "baselines.csv");
            inputs.push_back(std::move(in));
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
    }
    return merge_inputs(inputs, opt);
}

}  // namespace favor
