#include "favor/merge.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "favor/error.hpp"
#include "favor/metrics.hpp"

namespace favor {

using nlohmann::json;

namespace {

json read_run_json(const std::string& dir) {
    const std::string path = dir + "/run.json";
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open (is " + dir + " a favor result directory?)");
    try {
        return json::parse(in);
    } catch (const json::exception&) {
        throw Error(path + ": invalid JSON");
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

// The baseline_<metric> columns of the inputs' summaries, one row per key (`on`): every
// input computed them from the same inputs, so copies must agree.
Table merged_baselines(const std::vector<std::string>& dirs, const std::vector<std::string>& on) {
    Table out;
    std::map<std::vector<std::string>, std::vector<std::string>> seen;
    for (const auto& dir : dirs) {
        const Table t = read_csv(dir + "/summary.csv");
        std::vector<std::size_t> idx;
        for (const auto& c : on) idx.push_back(t.column(c));
        std::vector<std::string> cols = on;
        for (std::size_t c = 0; c < t.columns.size(); ++c)
            if (t.columns[c].rfind("baseline_", 0) == 0) idx.push_back(c), cols.push_back(t.columns[c]);
        if (cols.size() == on.size()) continue;
        if (out.columns.empty()) out.columns = cols;
        else if (cols != out.columns) throw Error(dir + "/summary.csv: baseline columns differ from the other inputs'");
        for (const auto& r : t.rows) {
            std::vector<std::string> row;
            for (std::size_t i : idx) row.push_back(r[i]);
            const std::vector<std::string> key(row.begin(), row.begin() + std::ptrdiff_t(on.size()));
            const auto [it, fresh] = seen.emplace(key, row);
            if (fresh) out.rows.push_back(row);
            else if (it->second != row) throw Error(dir + "/summary.csv: baseline values differ from another input's for the same inputs");
        }
    }
    return out;
}

// The inputs' configs combined: the same experiment kind and dtype, the union of their
// variants (in order of first appearance, returned in `variant_order`) and grid lists.
json merged_config(const std::vector<std::string>& dirs, const std::vector<json>& infos, const std::string& kind,
                   std::vector<std::string>& variant_order) {
    const json& first = infos[0]["config"];
    json config = first;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        const json& c = infos[i]["config"];
        if (c.value("experiment", "approximation") != kind)
            throw Error(dirs[i] + "/run.json: experiment \"" + c.value("experiment", "") + "\" differs from \"" + kind + "\" in " + dirs[0]);
        if (c.value("dtype", "") != first.value("dtype", ""))
            throw Error(dirs[i] + "/run.json: dtype " + c.value("dtype", "") + " differs from " + first.value("dtype", "") + " in " + dirs[0]);
        for (const json& v : c["variants"]) {
            const std::string n = v.value("name", "");
            if (std::find(variant_order.begin(), variant_order.end(), n) == variant_order.end()) {
                variant_order.push_back(n);
                if (i > 0) config["variants"].push_back(v);
            }
        }
        for (const char* k : {"m", "d", "norm", "angle"}) if (c.contains(k)) merge_list(config[k], c[k]);
        if (c.contains("inputs"))
            for (const char* k : {"L", "d", "scale"})
                if (c["inputs"].contains(k)) merge_list(config["inputs"][k], c["inputs"][k]);
    }

    return config;
}

}  // namespace

RunResult merge_results(const std::vector<std::string>& dirs) {
    if (dirs.empty()) throw Error("merge: no input directories");
    std::vector<json> infos;
    for (const auto& d : dirs) infos.push_back(read_run_json(d));
    const json& first = infos[0]["config"];
    const std::string kind = first.value("experiment", "approximation");
    if (kind == "timing") throw Error(dirs[0] + ": merge combines approximation and kernel results, not timing");
    const bool kernel = kind == "kernel";
    const std::string file = kernel ? "summary.csv" : "errors.csv";

    std::vector<std::string> variant_order;
    const json config = merged_config(dirs, infos, kind, variant_order);

    Table all;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        Table t = read_csv(dirs[i] + "/" + file);
        if (i == 0) all.columns = t.columns;
        else if (t.columns != all.columns)
            throw Error(dirs[i] + "/" + file + ": columns differ from " + dirs[0] + "/" + file + " (different metrics?)");
        for (auto& r : t.rows) all.rows.push_back(std::move(r));
    }

    std::vector<std::string> keys = kernel
        ? std::vector<std::string>{"variant", "d", "m", "norm", "angle"}
        : std::vector<std::string>{"variant", "L", "d", "m", "scale", "trial"};
    const bool per_head = all.has_column("head");
    if (per_head) keys.push_back("head");   // rows: ..., trial, then head
    std::vector<std::size_t> idx;
    for (const auto& k : keys) idx.push_back(all.column(k));
    auto rank = [&](const std::vector<std::string>& r) {
        std::vector<double> v;
        const auto it = std::find(variant_order.begin(), variant_order.end(), r[idx[0]]);
        v.push_back(double(it - variant_order.begin()));
        for (std::size_t k = 1; k < idx.size(); ++k) v.push_back(r[idx[k]].empty() ? -1.0 : std::stod(r[idx[k]]));
        return v;
    };
    std::vector<std::pair<std::vector<double>, const std::vector<std::string>*>> order;
    for (const auto& r : all.rows) order.push_back({rank(r), &r});
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

    RunResult res;
    Table& out = kernel ? res.summary : res.errors;
    out.columns = all.columns;
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (i > 0 && order[i].first == order[i - 1].first) {
            if (*order[i].second != *order[i - 1].second) {
                std::string cell;
                for (std::size_t k = 0; k < keys.size(); ++k) cell += (k ? " " : "") + keys[k] + "=" + (*order[i].second)[idx[k]];
                throw Error("merge: inconsistent inputs: the cell " + cell + " appears twice with different values (different seeds or configs?)");
            }
            continue;   // the same cell twice, identically: keep one
        }
        out.rows.push_back(*order[i].second);
    }
    if (!kernel) {
        const std::vector<std::string> cols(all.columns.begin() + std::ptrdiff_t(all.column("seed") + 1), all.columns.end());
        std::vector<std::string> summary_keys = approximation_key_columns();
        if (per_head) summary_keys.push_back("head");
        res.summary = summarize(res.errors, summary_keys, stat_columns(cols), value_columns(cols));
        std::vector<std::string> on = {"L", "d", "scale"};
        if (per_head) on.push_back("head");
        const Table baselines = merged_baselines(dirs, on);
        if (!baselines.columns.empty()) res.summary = join_columns(res.summary, baselines, on);
    }
    res.info["config"] = config;
    res.info["merged_from"] = dirs;
    res.info["seed"] = infos[0].value("seed", json());
    res.info["environment"] = infos[0].value("environment", json());
    return res;
}

}  // namespace favor
