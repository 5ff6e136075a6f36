#include "favor/experiment.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "favor/attention.hpp"
#include "favor/blas.hpp"
#include "favor/error.hpp"
#include "favor/experiment_parts.hpp"
#include "favor/inputs.hpp"
#include "favor/tensor_io.hpp"
#include "favor/metrics.hpp"
#include "favor/parallel.hpp"
#include "favor/projections.hpp"

namespace favor {

using nlohmann::json;

Shard parse_shard(const std::string& text) {
    const auto slash = text.find('/');
    Shard s;
    try {
        if (slash == std::string::npos) throw std::invalid_argument(text);
        std::size_t used = 0;
        s.index = std::stoul(text.substr(0, slash), &used);
        if (used != slash) throw std::invalid_argument(text);
        const std::string n = text.substr(slash + 1);
        s.count = std::stoul(n, &used);
        if (used != n.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        throw Error("--shard: expected K/N with 0 <= K < N (e.g. 0/4), got '" + text + "'");
    }
    if (s.count == 0 || s.index >= s.count)
        throw Error("--shard: expected K/N with 0 <= K < N (e.g. 0/4), got '" + text + "'");
    return s;
}

const std::vector<std::string>& approximation_key_columns() {
    static const std::vector<std::string> k = {"variant", "features", "projection", "L", "d", "m", "scale"};
    return k;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One attention problem: a (batch, head) slice of the inputs, with its exact reference.
template <class T>
struct Head {
    Mat<T> q, k, v;            // inputs in the compute dtype
    Mat<double> x, y;          // scaled q, k in float64 (pairwise metrics)
    Mat<double> reference;     // exact softmax attention output, float64
};

// The inputs of one (L, d, scale) point of the grid.
template <class T>
struct Instance {
    std::size_t L = 0, d = 0;
    std::optional<double> scale;   // random inputs only
    std::vector<Head<T>> heads;
};

template <class T>
Head<T> make_head(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, bool causal, int threads) {
    Head<T> h;
    h.x = scale_rows(q);
    h.y = scale_rows(k);
    h.reference = exact_attention(q, k, v, causal, threads);
    h.q = cast_mat<T>(q);
    h.k = cast_mat<T>(k);
    h.v = cast_mat<T>(v);
    return h;
}

struct Cell {
    std::size_t variant, instance, m;
};

// Metric columns of errors.csv, in the fixed order of metric_names().
std::vector<std::string> metric_columns(const Config& cfg) {
    std::vector<std::string> cols;
    for (const std::string& m : metric_names()) {
        if (m == "nonfinite" || cfg.wants(m) ||
            (m == "kernel_mse_theory" && cfg.wants("kernel_mse")))
            cols.push_back(m);
    }
    return cols;
}

template <class T>
RunResult run_approximation(const Config& cfg, const RunOptions& opt, json info) {
    const int threads = resolve_threads(opt.threads);
    const bool npy = cfg.inputs.source == "npy";
    // npy inputs are one grid point (their L and d come from the files).
    const std::size_t nL = npy ? 1 : cfg.inputs.L.size(), nd = npy ? 1 : cfg.inputs.d.size(),
                      ns = npy ? 1 : cfg.inputs.scale.size();
    HeadTensors files;
    if (npy) files = load_qkv(cfg.inputs.q, cfg.inputs.k, cfg.inputs.v, cfg.causal);
    // Grid points (L, d, scale), then the cells: variant x L x d x m x scale in config order.
    std::vector<Instance<T>> instances;
    for (std::size_t li = 0; li < nL; ++li)
        for (std::size_t di = 0; di < nd; ++di)
            for (std::size_t si = 0; si < ns; ++si) {
                Instance<T> in;
                in.L = npy ? files.L() : cfg.inputs.L[li];
                in.d = npy ? files.d() : cfg.inputs.d[di];
                if (!npy) in.scale = cfg.inputs.scale[si];
                instances.push_back(std::move(in));
            }
    std::vector<Cell> cells;
    std::size_t grid_index = 0;
    for (std::size_t v = 0; v < cfg.variants.size(); ++v)
        for (std::size_t li = 0; li < nL; ++li)
            for (std::size_t di = 0; di < nd; ++di)
                for (std::size_t m : cfg.m)
                    for (std::size_t si = 0; si < ns; ++si, ++grid_index)
                        if (grid_index % opt.shard.count == opt.shard.index)
                            cells.push_back({v, (li * nd + di) * ns + si, m});

    // Inputs and exact references, only for the instances this shard needs.
    std::vector<bool> needed(instances.size(), false);
    for (const Cell& c : cells) needed[c.instance] = true;
    for (std::size_t i = 0; i < instances.size(); ++i) {
        if (!needed[i]) continue;
        Instance<T>& in = instances[i];
        if (npy) {
            for (std::size_t h = 0; h < files.q.size(); ++h)
                in.heads.push_back(make_head<T>(files.q[h], files.k[h], files.v[h], cfg.causal, threads));
        } else {
            QKV qkv = random_inputs(cfg.seed, in.L, in.d, cfg.inputs.d_v.value_or(in.d), *in.scale);
            in.heads.push_back(make_head<T>(std::move(qkv.q), std::move(qkv.k), std::move(qkv.v), cfg.causal, threads));
        }
    }

    const std::vector<std::string> mcols = metric_columns(cfg);
    const std::size_t trials = cfg.trials;
    const std::size_t total = cells.size() * trials;
    // values[item][head][column]
    std::vector<std::vector<std::map<std::string, std::optional<double>>>> values(total);
    std::atomic<std::size_t> done{0};
    // With fewer (cell, trial) items than threads, the row blocks of the pairwise metrics
    // share the spare threads (their sums do not depend on how blocks are spread).
    const int inner_threads = total < std::size_t(threads) ? threads : 1;
    // Each (cell, trial) runs on one thread: its numbers never depend on the thread count.
    parallel_for(total, threads, [&](std::size_t item) {
        const Cell& c = cells[item / trials];
        const std::size_t trial = item % trials;
        const Variant& var = cfg.variants[c.variant];
        const Instance<T>& in = instances[c.instance];
        const Mat<T> W = cast_mat<T>(draw_projection(var.projection, c.m, in.d, cfg.seed, trial));
        PairwiseRequest req;
        req.attention_mse = cfg.wants("attention_mse");
        req.kernel_mse = cfg.wants("kernel_mse");
        req.negative_fraction = cfg.wants("negative_fraction");
        req.causal = cfg.causal;
        for (const Head<T>& h : in.heads) {
            std::map<std::string, std::optional<double>> v;
            const auto t0 = std::chrono::steady_clock::now();
            const Approximation<T> a = favor_attention(var.map, W, h.q, h.k, h.v, cfg.causal);
            v["seconds"] = seconds_since(t0);
            v["output_mse"] = output_mse(h.reference, a.out);
            v["nonfinite"] = double(count_nonfinite(a.out));
            if (req.kernel_mse && var.map.estimates_softmax()) req.theory = kernel_theory(a.map, c.m, in.d);
            if (req.any()) {
                const PairwiseResult p = pairwise_metrics(
                    h.x, h.y, Features<double>{cast_mat<double>(a.q.phi), a.q.log_scale},
                    Features<double>{cast_mat<double>(a.k.phi), a.k.log_scale}, req, inner_threads);
                v["attention_mse"] = p.attention_mse;
                v["kernel_mse"] = p.kernel_mse;
                v["negative_fraction"] = p.negative_fraction;
                if (req.theory) v["kernel_mse_theory"] = p.kernel_mse_theory;
            }
            values[item].push_back(std::move(v));
        }
        if (opt.progress) opt.progress(done.fetch_add(1) + 1, total);
    });

    // Rows: per head when asked for, otherwise one row per (cell, trial) with errors averaged
    // over batch x heads (nonfinite and seconds: totals over heads).
    const bool per_head = npy && cfg.inputs.per_head;
    RunResult r;
    std::vector<std::string> keys = approximation_key_columns();
    if (per_head) keys.push_back("head");
    r.errors.columns = keys;
    r.errors.columns.push_back("trial");
    r.errors.columns.push_back("seed");
    for (const auto& col : mcols) r.errors.columns.push_back(col);
    auto cell_of = [&](const std::map<std::string, std::optional<double>>& v, const std::string& col) {
        const auto it = v.find(col);
        if (it == v.end() || !it->second) return std::string();
        return col == "nonfinite" ? format_count(std::size_t(*it->second)) : format_number(it->second);
    };
    for (std::size_t item = 0; item < total; ++item) {
        const Cell& c = cells[item / trials];
        const Variant& var = cfg.variants[c.variant];
        const Instance<T>& in = instances[c.instance];
        std::vector<std::map<std::string, std::optional<double>>> rows;
        if (per_head) {
            rows = values[item];
        } else {
            std::map<std::string, std::optional<double>> avg;
            for (const std::string& col : mcols) {
                double total_v = 0;
                bool any = false;
                for (const auto& v : values[item]) {
                    const auto it = v.find(col);
                    if (it != v.end() && it->second) total_v += *it->second, any = true;
                }
                const bool summed = col == "nonfinite" || col == "seconds";
                if (any) avg[col] = summed ? total_v : total_v / double(values[item].size());
            }
            rows.push_back(std::move(avg));
        }
        for (std::size_t h = 0; h < rows.size(); ++h) {
            std::vector<std::string> row = {var.name, var.features_label(), var.projection_label(),
                                             format_count(in.L), format_count(in.d), format_count(c.m),
                                             format_number(in.scale)};
            if (per_head) row.push_back(format_count(h));
            row.push_back(format_count(item % trials));
            row.push_back(std::to_string(cfg.seed));
            for (const auto& col : mcols) row.push_back(cell_of(rows[h], col));
            r.errors.rows.push_back(std::move(row));
        }
    }
    std::vector<std::string> stat_cols, plain_cols;
    for (const auto& col : mcols) (col == "kernel_mse_theory" ? plain_cols : stat_cols).push_back(col);
    r.summary = summarize(r.errors, keys, stat_cols, plain_cols);
    if (npy) info["inputs"] = {{"shape_lead", files.lead}, {"L", files.L()}, {"d", files.d()}, {"heads", files.q.size()}};
    r.info = std::move(info);
    return r;
}

}  // namespace

json environment_info(int threads) {
    json j;
    j["favor_version"] = FAVOR_VERSION;
    j["git_commit"] = FAVOR_GIT_COMMIT;
    j["build_type"] = FAVOR_BUILD_TYPE;
    j["compiler"] = FAVOR_COMPILER;
    j["march"] = FAVOR_MARCH_FLAG;
    j["blas"] = blas_info();
    j["threads"] = resolve_threads(threads);
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) == 0) j["host"] = host;
    std::ifstream cpu("/proc/cpuinfo");
    for (std::string line; std::getline(cpu, line);)
        if (line.rfind("model name", 0) == 0) {
            j["cpu"] = line.substr(line.find(':') + 2);
            break;
        }
    j["hardware_threads"] = std::thread::hardware_concurrency();
    const std::time_t now = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    j["start_time"] = buf;
    return j;
}

RunResult run_experiment(const Config& cfg, const RunOptions& opt) {
    set_blas_single_threaded();
    json info;
    info["config"] = cfg.resolved();
    info["config_file"] = cfg.file;
    info["seed"] = cfg.seed;
    info["environment"] = environment_info(opt.threads);
    info["shard"] = {{"index", opt.shard.index}, {"count", opt.shard.count}};
    const auto t0 = std::chrono::steady_clock::now();
    RunResult r;
    switch (cfg.experiment) {
        case ExperimentKind::approximation:
            r = cfg.dtype == "float32" ? run_approximation<float>(cfg, opt, info)
                                       : run_approximation<double>(cfg, opt, info);
            break;
        case ExperimentKind::kernel:
            r = run_kernel_experiment(cfg, opt, info);
            break;
        case ExperimentKind::timing:
            r = run_timing_experiment(cfg, opt, info);
            break;
    }
    r.info["wall_seconds"] = seconds_since(t0);
    return r;
}

void write_results(const RunResult& r, const std::string& dir) {
    make_output_dir(dir);
    const std::string base = dir + "/";
    if (!r.errors.columns.empty()) write_file_atomic(base + "errors.csv", to_csv(r.errors));
    if (!r.summary.columns.empty()) {
        write_file_atomic(base + "summary.csv", to_csv(r.summary));
        std::string md = "# " + r.info["config"].value("name", std::string()) + "\n\n" + to_markdown(r.summary);
        if (!r.notes_md.empty()) md += "\n" + r.notes_md;
        write_file_atomic(base + "summary.md", md);
    }
    if (!r.timing.columns.empty()) {
        write_file_atomic(base + "timing.csv", to_csv(r.timing));
        std::string md = "# " + r.info["config"].value("name", std::string()) + "\n\n" + to_markdown(r.timing);
        if (!r.notes_md.empty()) md += "\n" + r.notes_md;
        write_file_atomic(base + "timing.md", md);
    }
    write_file_atomic(base + "run.json", r.info.dump(2) + "\n");
}

}  // namespace favor
