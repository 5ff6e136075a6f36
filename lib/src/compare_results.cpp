// `favor compare` on a result directory: groups errors.csv by cell and variant, runs the tests
// of compare.cpp on every pair (and against summary.csv's baseline_<metric>), adjusts by Holm.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "favor/compare.hpp"
#include "favor/error.hpp"
#include "favor/files.hpp"
#include "favor/names.hpp"
#include "favor/rng.hpp"

namespace favor {

namespace {

namespace fs = std::filesystem;

// A CSV file with the line number of each row (for error messages).
struct CsvFile {
    std::string path;
    Table table;
    std::vector<std::size_t> lines;
};

CsvFile load_csv(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::stringstream buf;
    buf << in.rdbuf();
    CsvFile f{path, parse_csv(buf.str(), path), {}};
    std::istringstream ss(buf.str());
    std::size_t no = 0;
    for (std::string line; std::getline(ss, line);) {   // the lines parse_csv keeps as rows
        ++no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (no > 1 && !line.empty()) f.lines.push_back(no);
    }
    return f;
}

std::size_t require_column(const CsvFile& f, const std::string& c) {
    if (!f.table.has_column(c)) throw Error(f.path + ": no column '" + c + "'");
    return f.table.column(c);
}

// The finite number in a cell; Error naming file, line and column otherwise.
double parse_value(const CsvFile& f, std::size_t row, std::size_t col) {
    const std::string& s = f.table.rows[row][col];
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    const std::string where = f.path + ": line " + std::to_string(f.lines[row]) + ", column " +
                              f.table.columns[col] + ": '" + s + "'";
    if (s.empty() || end != s.c_str() + s.size()) throw Error(where + " is not a number");
    if (!std::isfinite(v)) throw Error(where + " is not finite");
    return v;
}

struct Group {   // the rows of one variant in one cell
    std::string variant, projection, seed;
    std::vector<std::size_t> rows;
};

struct Cell {
    std::vector<std::string> key;   // values of L, d, m, scale[, head]
    std::string label;              // "L=128,d=8,m=16,scale=1"
    std::vector<Group> groups;      // variants in order of first appearance in the file
};

struct Layout {   // column indices of errors.csv
    std::vector<std::string> cell_columns;
    std::vector<std::size_t> cell_idx;
    std::size_t variant, projection, trial;
    std::optional<std::size_t> seed;
};

Layout layout_of(const CsvFile& f) {
    Layout l;
    l.cell_columns = {"L", "d", "m", "scale"};
    if (f.table.has_column("head")) l.cell_columns.push_back("head");
    for (const auto& c : l.cell_columns) l.cell_idx.push_back(require_column(f, c));
    l.variant = require_column(f, "variant");
    l.projection = require_column(f, "projection");
    l.trial = require_column(f, "trial");
    if (f.table.has_column("seed")) l.seed = f.table.column("seed");
    return l;
}

std::vector<Cell> group_cells(const CsvFile& f, const Layout& l) {
    std::map<std::string, std::size_t> variant_order;
    std::map<std::vector<std::string>, std::size_t> cell_index;
    std::map<std::pair<std::size_t, std::string>, std::set<std::string>> trials_seen;
    std::vector<Cell> cells;
    for (std::size_t r = 0; r < f.table.rows.size(); ++r) {
        const auto& row = f.table.rows[r];
        std::vector<std::string> key;
        for (std::size_t i : l.cell_idx) key.push_back(row[i]);
        const auto [it, fresh] = cell_index.emplace(key, cells.size());
        if (fresh) {
            std::string label;
            for (std::size_t i = 0; i < key.size(); ++i) label += (i ? "," : "") + l.cell_columns[i] + "=" + key[i];
            cells.push_back({key, label, {}});
        }
        Cell& cell = cells[it->second];
        const std::string& v = row[l.variant];
        variant_order.emplace(v, variant_order.size());
        if (!trials_seen[{it->second, v}].insert(row[l.trial]).second)
            throw Error(f.path + ": line " + std::to_string(f.lines[r]) + ": trial " + row[l.trial] +
                        " of variant " + v + " appears twice in cell " + cell.label);
        auto g = std::find_if(cell.groups.begin(), cell.groups.end(), [&](const Group& x) { return x.variant == v; });
        if (g == cell.groups.end())
            g = cell.groups.insert(cell.groups.end(), Group{v, row[l.projection], l.seed ? row[*l.seed] : "", {}});
        g->rows.push_back(r);
    }
    for (Cell& c : cells)
        std::stable_sort(c.groups.begin(), c.groups.end(), [&](const Group& a, const Group& b) {
            return variant_order.at(a.variant) < variant_order.at(b.variant);
        });
    return cells;
}

struct Sample {   // a group's non-blank values of one metric, with their trial indices
    std::vector<std::string> trials;
    std::vector<double> values;
};

Sample sample_of(const CsvFile& f, const Layout& l, const Group& g, std::size_t col) {
    Sample s;
    for (std::size_t r : g.rows) {
        if (f.table.rows[r][col].empty()) continue;
        s.trials.push_back(f.table.rows[r][l.trial]);
        s.values.push_back(parse_value(f, r, col));
    }
    return s;
}

// b's values in a's trial order when both have the same set of trials; nullopt otherwise.
std::optional<std::vector<double>> aligned(const Sample& a, const Sample& b) {
    if (a.trials.size() != b.trials.size()) return std::nullopt;
    std::map<std::string, double> by_trial;
    for (std::size_t i = 0; i < b.trials.size(); ++i) by_trial[b.trials[i]] = b.values[i];
    std::vector<double> out;
    for (const auto& t : a.trials) {
        const auto it = by_trial.find(t);
        if (it == by_trial.end()) return std::nullopt;
        out.push_back(it->second);
    }
    return out;
}

double mean_of(const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v;
    return s / double(x.size());
}

// One row of comparisons.csv before the Holm adjustment.
struct Comparison {
    std::string a, b, kind;   // kind: "yes", "no" or "one-sample"
    const Cell* cell = nullptr;
    double mean_a = 0, mean_b = 0, ratio = 0, p = 0;
    std::size_t n_a = 0, n_b = 0;   // n_b = 0: a baseline (no sample)
    std::pair<double, double> ci;

    Comparison(std::string a_, std::string b_, std::string kind_, const Cell& c)
        : a(std::move(a_)), b(std::move(b_)), kind(std::move(kind_)), cell(&c) {}
};

std::uint64_t pair_key(const Cell& c, const std::string& a, const std::string& b, const char* purpose) {
    return stream_key({tag("compare"), tag(c.label), tag(a), tag(b), tag(purpose)});
}

Comparison compare_pair(const Cell& c, const Group& ga, const Group& gb, const Sample& a, const Sample& b) {
    Comparison r(ga.variant, gb.variant, "no", c);
    // Same projection, seed and trials: trial t of both used the same W on the same inputs.
    const auto b_aligned = ga.projection == gb.projection && ga.seed == gb.seed ? aligned(a, b) : std::nullopt;
    const std::vector<double>& bv = b_aligned ? *b_aligned : b.values;
    r.mean_a = mean_of(a.values);
    r.mean_b = mean_of(bv);
    r.ratio = r.mean_a == r.mean_b ? 1.0 : r.mean_a / r.mean_b;
    r.n_a = a.values.size();
    r.n_b = bv.size();
    const std::uint64_t perm_key = pair_key(c, r.a, r.b, "permutation");
    if (b_aligned) {
        r.kind = "yes";
        std::vector<double> d(r.n_a);
        for (std::size_t t = 0; t < r.n_a; ++t) d[t] = a.values[t] - bv[t];
        r.p = paired_signflip_p(d, perm_key);
    } else {
        r.p = welch_permutation_p(a.values, bv, perm_key);
    }
    r.ci = ratio_ci(a.values, bv, bool(b_aligned), pair_key(c, r.a, r.b, "bootstrap"));
    return r;
}

Comparison compare_baseline(const Cell& c, const Group& g, const Sample& x, double baseline) {
    Comparison r(g.variant, "uniform", "one-sample", c);
    r.mean_a = mean_of(x.values);
    r.mean_b = baseline;
    r.ratio = r.mean_a == baseline ? 1.0 : r.mean_a / baseline;
    r.n_a = x.values.size();
    std::vector<double> d(r.n_a);
    for (std::size_t t = 0; t < r.n_a; ++t) d[t] = x.values[t] - baseline;
    r.p = paired_signflip_p(d, pair_key(c, r.a, r.b, "permutation"));
    r.ci = baseline_ratio_ci(x.values, baseline, pair_key(c, r.a, r.b, "bootstrap"));
    return r;
}

// summary.csv's baseline_<metric> per (variant, cell); empty when the file or column is absent.
std::map<std::vector<std::string>, double> read_baselines(const std::optional<CsvFile>& summary,
                                                          const Layout& l, const std::string& metric) {
    std::map<std::vector<std::string>, double> out;
    if (!summary || !summary->table.has_column("baseline_" + metric)) return out;
    const std::size_t col = summary->table.column("baseline_" + metric);
    const std::optional<std::size_t> variant =
        summary->table.has_column("variant") ? std::optional(summary->table.column("variant")) : std::nullopt;
    std::vector<std::size_t> idx;
    for (const auto& c : l.cell_columns) idx.push_back(require_column(*summary, c));
    for (std::size_t r = 0; r < summary->table.rows.size(); ++r) {
        const auto& row = summary->table.rows[r];
        if (row[col].empty()) continue;
        std::vector<std::string> key{variant ? row[*variant] : std::string()};
        for (std::size_t i : idx) key.push_back(row[i]);
        out[key] = parse_value(*summary, r, col);
    }
    return out;
}

std::vector<Comparison> compare_metric(const CsvFile& f, const Layout& l, const std::vector<Cell>& cells,
                                       std::size_t col, const std::map<std::vector<std::string>, double>& base,
                                       bool base_by_variant) {
    std::vector<Comparison> out;
    for (const Cell& c : cells) {
        std::vector<Sample> s;
        for (const Group& g : c.groups) s.push_back(sample_of(f, l, g, col));
        for (std::size_t i = 0; i < s.size(); ++i)
            for (std::size_t j = i + 1; j < s.size(); ++j)
                if (!s[i].values.empty() && !s[j].values.empty())
                    out.push_back(compare_pair(c, c.groups[i], c.groups[j], s[i], s[j]));
        for (std::size_t i = 0; i < s.size() && !base.empty(); ++i) {
            std::vector<std::string> key{base_by_variant ? c.groups[i].variant : std::string()};
            key.insert(key.end(), c.key.begin(), c.key.end());
            const auto it = base.find(key);
            if (it != base.end() && !s[i].values.empty()) out.push_back(compare_baseline(c, c.groups[i], s[i], it->second));
        }
    }
    return out;
}

// Appends the rows of one metric, with Holm over those rows and the verdicts.
void append_rows(Table& t, const std::vector<Comparison>& rows, const std::string& metric, double alpha) {
    std::vector<double> ps;
    for (const auto& r : rows)
        if (!std::isnan(r.p)) ps.push_back(r.p);
    const std::vector<double> adj = holm(ps);
    std::size_t k = 0;
    for (const auto& r : rows) {
        const std::optional<double> p_holm = std::isnan(r.p) ? std::nullopt : std::optional(adj[k++]);
        const char* verdict = p_holm && *p_holm < alpha && r.mean_a != r.mean_b ? (r.mean_a < r.mean_b ? "a<b" : "a>b") : "n.s.";
        std::vector<std::string> row{r.a, r.b};
        row.insert(row.end(), r.cell->key.begin(), r.cell->key.end());
        row.insert(row.end(), {metric, format_number(r.mean_a), format_number(r.mean_b), format_count(r.n_a),
                               r.n_b ? format_count(r.n_b) : "", r.kind, format_number(r.ratio),
                               format_number(r.ci.first), format_number(r.ci.second),
                               std::isnan(r.p) ? "" : format_number(r.p), format_number(p_holm), verdict});
        t.rows.push_back(std::move(row));
    }
}

void check_options(const CompareOptions& opt) {
    if (!(opt.alpha > 0 && opt.alpha < 1)) throw Error("--alpha: must be in (0, 1), got " + format_number(opt.alpha));
    std::vector<std::string> choices = compare_metric_names();
    choices.push_back("all");
    for (const auto& m : opt.metrics)
        if (std::find(choices.begin(), choices.end(), m) == choices.end())
            throw Error("--metric: unknown metric '" + m + "'" + suggestion(m, choices));
}

// The metric columns to compare, in the order asked ("all": the file's known metrics except
// nonfinite, seconds and kernel_mse_theory).
std::vector<std::string> resolve_metrics(const std::vector<std::string>& asked, const CsvFile& f) {
    std::vector<std::string> out;
    auto add = [&out](const std::string& m) {
        if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
    };
    for (const auto& m : asked.empty() ? std::vector<std::string>{"output_mse"} : asked) {
        if (m != "all") {
            if (!f.table.has_column(m)) throw Error(f.path + ": no column '" + m + "' (asked for by --metric)");
            add(m);
            continue;
        }
        for (const auto& k : compare_metric_names())
            if (f.table.has_column(k) && k != "nonfinite" && k != "overflow_fraction" && k != "seconds" &&
                k != "kernel_mse_theory")
                add(k);
    }
    if (out.empty()) throw Error(f.path + ": no metric columns to compare");
    return out;
}

CsvFile load_errors(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a result directory");
    const std::string path = (fs::path(dir) / "errors.csv").string();
    if (!fs::exists(path, ec))
        throw Error(path + ": not found; compare needs an approximation result's errors.csv "
                           "(kernel and timing results have none)");
    return load_csv(path);
}

}  // namespace

Table compare_results(const std::string& dir, const CompareOptions& opt) {
    check_options(opt);
    const CsvFile errors = load_errors(dir);
    const Layout l = layout_of(errors);
    const std::vector<std::string> metrics = resolve_metrics(opt.metrics, errors);
    const std::vector<Cell> cells = group_cells(errors, l);
    std::optional<CsvFile> summary;
    const std::string summary_path = (fs::path(dir) / "summary.csv").string();
    std::error_code ec;
    if (fs::exists(summary_path, ec)) summary = load_csv(summary_path);

    Table t;
    t.columns = {"a", "b"};
    t.columns.insert(t.columns.end(), l.cell_columns.begin(), l.cell_columns.end());
    t.columns.insert(t.columns.end(), {"metric", "mean_a", "mean_b", "n_a", "n_b", "paired", "ratio", "ci_low",
                                       "ci_high", "p_value", "p_holm", "verdict"});
    for (const auto& m : metrics) {
        const auto base = read_baselines(summary, l, m);
        const bool by_variant = summary && summary->table.has_column("variant");
        append_rows(t, compare_metric(errors, l, cells, errors.table.column(m), base, by_variant), m, opt.alpha);
    }
    return t;
}

void write_comparisons(const std::string& dir, const Table& t) {
    write_file_atomic((fs::path(dir) / "comparisons.csv").string(), to_csv(t));
}

std::string compare_description(const CompareOptions& opt) {
    return "Tests: paired rows (same projection, seed and trials, so the same W): sign-flip permutation test "
           "of the paired t statistic; unpaired rows: permutation test of the Welch t statistic; one-sample "
           "rows (b = uniform): sign-flip test of x - baseline. Exact up to 65536 permutations, else 65536 "
           "random ones; p_holm: Holm over each metric's rows; verdict at p_holm < " +
           format_number(opt.alpha) + "; ratio = mean_a / mean_b, 95% bootstrap percentile CI (B = " +
           std::to_string(kBootstrap) + ").";
}

}  // namespace favor
