// `favor compare` on a result directory: groups errors.csv by cell and variant, runs the tests
// of compare.cpp on every pair (and against summary.csv's baseline_<metric>), adjusts by Holm
// over the family asked for, and ranks the estimators of each cell (ranking.cpp).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/estimators/variant.hpp"
#include "favor/io/files.hpp"
#include "favor/metrics/metric_table.hpp"
#include "favor/results/compare.hpp"
#include "favor/results/ranking.hpp"

namespace favor {

namespace {

namespace fs = std::filesystem;

// The largest errors.csv / summary.csv / run.json compare reads (docs/limits.md).
constexpr std::size_t kMaxCompareBytes = std::size_t(1) << 30;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A CSV file with the line number of each row (for error messages).
struct CsvFile {
    std::string path;
    Table table;
    std::vector<std::size_t> lines;
};

CsvFile csv_of(const std::string& text, const std::string& path) {
    CsvFile f{path, parse_csv(text, path), {}};
    std::istringstream ss(text);
    std::size_t no = 0;
    for (std::string line; std::getline(ss, line);) {   // the lines parse_csv keeps as rows
        ++no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (no > 1 && !line.empty()) f.lines.push_back(no);
    }
    if (f.lines.size() != f.table.rows.size()) throw Error(path + ": rows and lines do not match");
    return f;
}

std::size_t require_column(const CsvFile& f, const std::string& c) {
    if (!f.table.has_column(c)) throw Error(f.path + ": no column '" + c + "'");
    return f.table.column(c);
}

// Error "<file>: line N, column C: '<cell>' <why>".
[[noreturn]] void bad_cell(const CsvFile& f, std::size_t row, std::size_t col, const std::string& why) {
    throw Error(f.path + ": line " + std::to_string(f.lines[row]) + ", column " + f.table.columns[col] + ": '" +
                f.table.rows[row][col].substr(0, 40) + "' " + why);
}

// A number as favor writes it: finite, or exactly nan / inf / -inf. Error naming file, line
// and column otherwise.
double parse_value(const CsvFile& f, std::size_t row, std::size_t col) {
    double v = 0;
    if (!parse_real(f.table.rows[row][col], v, true))
        bad_cell(f, row, col, "is not a number (favor writes finite numbers, nan, inf or -inf)");
    return v;
}

struct Group {   // the rows of one variant in one cell
    std::string variant, projection, seed, m, num_features;
    std::vector<std::size_t> rows;
};

struct Cell {
    std::vector<std::string> key;   // values of the cell columns
    std::string label;              // "L=128,d=8,m=16,scale=1"
    std::vector<Group> groups;      // variants in order of first appearance in the file
    std::set<std::string> input_seeds;
};

struct Layout {   // column indices of errors.csv
    std::vector<std::string> cell_columns;   // L, d, m or num_features, scale[, head]
    std::vector<std::size_t> cell_idx;
    std::size_t variant, projection, trial, m;
    std::optional<std::size_t> seed, input_seed, num_features, layers;
    bool by_features = false;
};

Layout layout_of(const CsvFile& f, bool by_features) {
    Layout l;
    l.by_features = by_features;
    l.cell_columns = {"L", "d", by_features ? "num_features" : "m", "scale"};
    if (f.table.has_column("layers")) l.cell_columns.push_back("layers");   // a swap-in's (favor.swap_in)
    if (f.table.has_column("head")) l.cell_columns.push_back("head");
    for (const auto& c : l.cell_columns) l.cell_idx.push_back(require_column(f, c));
    l.variant = require_column(f, "variant");
    l.projection = require_column(f, "projection");
    l.trial = require_column(f, "trial");
    l.m = require_column(f, "m");
    if (f.table.has_column("seed")) l.seed = f.table.column("seed");
    if (f.table.has_column("input_seed")) l.input_seed = f.table.column("input_seed");
    if (f.table.has_column("num_features")) l.num_features = f.table.column("num_features");
    if (f.table.has_column("layers")) l.layers = f.table.column("layers");
    return l;
}

// A swap-in's `layers` cell: "all", or counts ascending joined by '+' ("0", "0+2").
bool layers_cell_ok(const std::string& cell) {
    if (cell == "all") return true;
    std::size_t start = 0, previous = 0;
    for (bool first = true;; first = false) {
        const std::size_t plus = cell.find('+', start);
        std::size_t n = 0;
        if (!parse_count(cell.substr(start, plus == std::string::npos ? std::string::npos : plus - start), n)) return false;
        if (!first && n <= previous) return false;
        previous = n;
        if (plus == std::string::npos) return true;
        start = plus + 1;
    }
}

// The key cells of every row as a run writes them (an edited table's garbage is refused, not
// grouped): counts without leading zeros (L, d, m, num_features, head, trial, seed,
// input_seed), scale blank (tensor inputs) or a number > 0 written as favor writes it (so
// 0.50 cannot split the 0.5 cell), variant a valid variant name (not the baseline's), projection blank or a registry name.
void check_keys(const CsvFile& f, const Layout& l) {
    std::vector<std::size_t> counts{l.trial, l.m};
    for (const auto& c : {"L", "d", "num_features", "head", "seed", "input_seed"})
        if (f.table.has_column(c)) counts.push_back(f.table.column(c));
    const std::size_t scale = f.table.column("scale");
    for (std::size_t r = 0; r < f.table.rows.size(); ++r) {
        const auto& row = f.table.rows[r];
        std::size_t n = 0;
        for (std::size_t c : counts)
            if (!parse_count(row[c], n)) bad_cell(f, r, c, "is not a count (digits, no leading zero)");
        double v = 0;   // blank: tensor-file inputs, which have no scale
        if (!row[scale].empty() && (!parse_real(row[scale], v, false) || !(v > 0) || format_number(v) != row[scale]))
            bad_cell(f, r, scale, "is not a scale as favor writes it (blank, or a number > 0, e.g. 0.5)");
        if (const std::string why = variant_name_problem(row[l.variant]); !why.empty())
            bad_cell(f, r, l.variant, "is not a variant name: " + why);
        if (!row[l.projection].empty() && !find_entry(projection_registry(), row[l.projection]))
            bad_cell(f, r, l.projection, "is not a projection (blank, or a name of favor list)");
        if (l.layers && !layers_cell_ok(row[*l.layers]))
            bad_cell(f, r, *l.layers, "is not a layer set as favor.swap_in writes it (all, or layer indices "
                                      "ascending joined by '+', e.g. 0+2)");
    }
}

// A trial's identity: (input_seed, trial), input seed 0 when the column is absent.
std::string trial_id(const Layout& l, const std::vector<std::string>& row) {
    return (l.input_seed ? row[*l.input_seed] : std::string("0")) + "/" + row[l.trial];
}

std::vector<std::string> key_of(const Layout& l, const std::vector<std::string>& row) {
    std::vector<std::string> key;
    for (std::size_t i : l.cell_idx) key.push_back(row[i]);
    return key;
}

// Per (cell, variant), the m whose rows count: the smallest (by value) when a variant appears
// at several m in one cell (num_features cells: elu, dpfp have the same F at every m).
std::map<std::pair<std::vector<std::string>, std::string>, std::string> chosen_m(const CsvFile& f, const Layout& l) {
    std::map<std::pair<std::vector<std::string>, std::string>, std::string> out;
    for (const auto& row : f.table.rows) {
        auto [it, fresh] = out.emplace(std::make_pair(key_of(l, row), row[l.variant]), row[l.m]);
        if (!fresh && std::strtod(row[l.m].c_str(), nullptr) < std::strtod(it->second.c_str(), nullptr)) it->second = row[l.m];
    }
    return out;
}

// Cells in ascending order of their values, numbers before text (as a run writes them;
// num_features cells would otherwise follow the first variant's F).
bool cell_before(const Cell& a, const Cell& b) {
    for (std::size_t i = 0; i < a.key.size(); ++i) {
        const std::string &s = a.key[i], &t = b.key[i];
        char *es = nullptr, *et = nullptr;
        const double x = std::strtod(s.c_str(), &es), y = std::strtod(t.c_str(), &et);
        const bool ns = s.empty() || *es || std::isnan(x), nt = t.empty() || *et || std::isnan(y);
        if (ns != nt) return nt;
        if (!ns && x != y) return x < y;
        if (s != t) return s < t;
    }
    return false;
}

// One variant name, one estimator: its features and projection are the same on every row
// (a run writes them so; pooling two under one name would test a mixture).
void check_one_estimator_per_name(const CsvFile& f, const Layout& l) {
    std::vector<std::size_t> cols{l.projection};
    if (f.table.has_column("features")) cols.push_back(f.table.column("features"));
    std::map<std::string, std::size_t> first;   // variant -> its first row
    for (std::size_t r = 0; r < f.table.rows.size(); ++r) {
        const auto& row = f.table.rows[r];
        const auto [it, fresh] = first.emplace(row[l.variant], r);
        for (std::size_t c : cols)
            if (!fresh && row[c] != f.table.rows[it->second][c])
                bad_cell(f, r, c, "differs from line " + std::to_string(f.lines[it->second]) + "'s '" +
                                      f.table.rows[it->second][c] + "' for variant " + row[l.variant] +
                                      ": two estimators under one name (rename one)");
    }
}

std::vector<Cell> group_cells(const CsvFile& f, const Layout& l) {
    check_keys(f, l);
    check_one_estimator_per_name(f, l);
    const auto m_of = chosen_m(f, l);
    std::map<std::string, std::size_t> variant_order;
    std::map<std::vector<std::string>, std::size_t> cell_index;
    std::map<std::pair<std::size_t, std::string>, std::set<std::string>> trials_seen;
    std::vector<Cell> cells;
    for (std::size_t r = 0; r < f.table.rows.size(); ++r) {
        const auto& row = f.table.rows[r];
        const std::vector<std::string> key = key_of(l, row);
        const std::string& v = row[l.variant];
        if (m_of.at({key, v}) != row[l.m]) continue;
        const auto [it, fresh] = cell_index.emplace(key, cells.size());
        if (fresh) {
            std::string label;
            for (std::size_t i = 0; i < key.size(); ++i) label += (i ? "," : "") + l.cell_columns[i] + "=" + key[i];
            cells.push_back({key, label, {}, {}});
        }
        Cell& cell = cells[it->second];
        variant_order.emplace(v, variant_order.size());
        if (!trials_seen[{it->second, v}].insert(trial_id(l, row)).second)
            throw Error(f.path + ": line " + std::to_string(f.lines[r]) + ": trial " + trial_id(l, row) +
                        " (input_seed/trial) of variant " + v + " appears twice in cell " + cell.label);
        cell.input_seeds.insert(l.input_seed ? row[*l.input_seed] : "0");
        auto g = std::find_if(cell.groups.begin(), cell.groups.end(), [&](const Group& x) { return x.variant == v; });
        if (g == cell.groups.end())
            g = cell.groups.insert(cell.groups.end(), Group{v, row[l.projection], l.seed ? row[*l.seed] : "", row[l.m],
                                                            l.num_features ? row[*l.num_features] : "", {}});
        else if (l.seed && row[*l.seed] != g->seed)
            throw Error(f.path + ": line " + std::to_string(f.lines[r]) + ": variant " + v + " has seed " + row[*l.seed] +
                        " here but " + g->seed + " on line " + std::to_string(f.lines[g->rows.front()]) + " in cell " +
                        cell.label + ": two estimators under one name");
        g->rows.push_back(r);
    }
    for (Cell& c : cells)
        std::stable_sort(c.groups.begin(), c.groups.end(), [&](const Group& a, const Group& b) {
            return variant_order.at(a.variant) < variant_order.at(b.variant);
        });
    std::stable_sort(cells.begin(), cells.end(), cell_before);
    return cells;
}

// One estimator of a cell for one metric: a variant's non-blank values (with their trial
// ids), or uniform attention's baseline (a constant, no trials).
struct Entry {
    const Group* group = nullptr;   // nullptr: uniform
    std::string name;
    std::vector<std::string> trials;
    std::vector<double> values;
    std::size_t nonfinite = 0;
    double constant = kNaN;         // the value when deterministic
    bool deterministic = false;     // uniform, or no projection and >= 2 trials all equal (elu, dpfp, nystrom)
};

Entry entry_of(const CsvFile& f, const Layout& l, const Group& g, std::size_t col) {
    Entry e;
    e.group = &g;
    e.name = g.variant;
    for (std::size_t r : g.rows) {
        if (f.table.rows[r][col].empty()) continue;
        e.trials.push_back(trial_id(l, f.table.rows[r]));
        e.values.push_back(parse_value(f, r, col));
        e.nonfinite += !std::isfinite(e.values.back());
    }
    // A map without a projection (blank column: elu, dpfp, nystrom) whose trials all agree; a
    // random map's trials may coincide (rounded to half precision) and still be random.
    e.deterministic = g.projection.empty() && e.values.size() >= 2 && e.nonfinite == 0 &&
                      std::all_of(e.values.begin(), e.values.end(), [&](double v) { return v == e.values[0]; });
    if (e.deterministic) e.constant = e.values[0];
    return e;
}

Entry uniform_entry(double baseline) {
    Entry e;
    e.name = "uniform";
    e.constant = baseline;
    e.deterministic = true;
    return e;
}

double entry_mean(const Entry& e) { return e.group ? mean_of(e.values) : e.constant; }

// b's values in a's trial order when both have the same set of trials; nullopt otherwise.
std::optional<std::vector<double>> aligned(const Entry& a, const Entry& b) {
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

double ratio_of(double x, double y) { return x == y ? 1.0 : x / y; }

// How a row's ratio interval is bootstrapped.
enum class Boot { none, paired, unpaired, x_over_c, c_over_x };

// One row of comparisons_<metric>.csv before the Holm adjustment.
struct Comparison {
    const Cell* cell = nullptr;
    std::size_t cell_index = 0;
    const Entry* ea = nullptr;
    const Entry* eb = nullptr;
    std::string kind;         // yes, no, one-sample, exact; "" when not tested
    std::string nonfinite;    // "a: k of n; b: k of n" (the samples with non-finite trials)
    bool higher_is_better = false;   // the metric's direction (metric table)
    double mean_a = 0, mean_b = 0, ratio = 0, p = kNaN, p_min = kNaN;
    std::vector<double> x, y;   // the bootstrap's samples (y aligned with x when paired)
    double constant = kNaN;
    Boot boot = Boot::none;
    std::uint64_t key = 0;
    bool tested() const { return !std::isnan(p); }
};

std::uint64_t pair_key(const Cell& c, const std::string& a, const std::string& b, const char* purpose) {
    return stream_key({tag("compare"), tag(c.label), tag(a), tag(b), tag(purpose)});
}

std::string nonfinite_text(const Entry& a, const Entry& b) {
    std::string s;
    for (const Entry* e : {&a, &b})
        if (e->nonfinite)
            s += std::string(s.empty() ? "" : "; ") + (e == &a ? "a: " : "b: ") + std::to_string(e->nonfinite) + " of " +
                 std::to_string(e->values.size());
    return s;
}

// Random against deterministic: a one-sample sign-flip test of the random one's trials
// against the constant (as against uniform attention).
void one_sample(Comparison& r, const Entry& random, double c, bool random_is_a, const PermutationOptions& perm) {
    r.kind = "one-sample";
    std::vector<double> d = differences(random.values, c);   // scaled: cannot overflow
    if (!random_is_a)
        for (double& x : d) x = -x;
    r.p = paired_signflip_p(d, pair_key(*r.cell, r.ea->name, r.eb->name, "permutation"), perm);
    r.p_min = signflip_p_min(d.size(), perm);
    r.x = random.values;
    r.constant = c;
    r.boot = random_is_a ? Boot::x_over_c : Boot::c_over_x;
}

// Two random samples: paired when both have the same projection, seed and trials (trial t
// of both used the same W on the same inputs), else the Welch permutation test.
void two_sample(Comparison& r, const Entry& a, const Entry& b, const PermutationOptions& perm) {
    const bool same_w = a.group->projection == b.group->projection && a.group->seed == b.group->seed &&
                        a.group->m == b.group->m;
    const auto b_aligned = same_w ? aligned(a, b) : std::nullopt;
    const std::uint64_t key = pair_key(*r.cell, a.name, b.name, "permutation");
    r.x = a.values;
    r.y = b_aligned ? *b_aligned : b.values;
    if (b_aligned) {
        r.kind = "yes";
        r.p = paired_signflip_p(differences(r.x, r.y), key, perm);
        r.p_min = signflip_p_min(r.x.size(), perm);
    } else {
        r.kind = "no";
        r.p = welch_permutation_p(r.x, r.y, key, perm);
        r.p_min = welch_p_min(r.x.size(), r.y.size(), perm);
    }
    r.boot = b_aligned ? Boot::paired : Boot::unpaired;
}

// The row of a against b before its test (run_test).
Comparison pair_of(const Cell& c, const Entry& a, const Entry& b) {
    Comparison r;
    r.cell = &c;
    r.ea = &a;
    r.eb = &b;
    r.mean_a = entry_mean(a);
    r.mean_b = entry_mean(b);
    r.ratio = ratio_of(r.mean_a, r.mean_b);
    r.key = pair_key(c, a.name, b.name, "bootstrap");
    r.nonfinite = nonfinite_text(a, b);
    return r;
}

void run_test(Comparison& r, const PermutationOptions& perm) {
    const Entry &a = *r.ea, &b = *r.eb;
    if (!r.nonfinite.empty()) return;   // not tested: see the verdict "non-finite"
    if (a.deterministic && b.deterministic)
        r.kind = "exact";
    else if (a.deterministic || b.deterministic)
        one_sample(r, a.deterministic ? b : a, a.deterministic ? a.constant : b.constant, !a.deterministic, perm);
    else
        two_sample(r, a, b, perm);
}

// The uniform-attention baseline per (variant, L, d, m, scale[, head]) from summary.csv's
// baseline_<metric>; empty when the file or column is absent.
std::map<std::vector<std::string>, double> read_baselines(const std::optional<CsvFile>& summary,
                                                          const Layout& l, const std::string& metric) {
    std::map<std::vector<std::string>, double> out;
    if (!summary || !summary->table.has_column("baseline_" + metric)) return out;
    const std::size_t col = summary->table.column("baseline_" + metric);
    const std::optional<std::size_t> variant =
        summary->table.has_column("variant") ? std::optional(summary->table.column("variant")) : std::nullopt;
    std::vector<std::size_t> idx;
    for (const auto& c : l.cell_columns) idx.push_back(require_column(*summary, c == "num_features" ? "m" : c));
    for (std::size_t r = 0; r < summary->table.rows.size(); ++r) {
        const auto& row = summary->table.rows[r];
        if (row[col].empty()) continue;
        std::vector<std::string> key{variant ? row[*variant] : std::string()};
        for (std::size_t i : idx) key.push_back(row[i]);
        const double v = parse_value(*summary, r, col);
        if (std::isfinite(v)) out[key] = v;
    }
    return out;
}

// One metric: its entries per cell (uniform last, when summary.csv has its baseline) and
// every pair of them, oriented as --against / --pairs ask (tested afterwards: run_test), with
// which rows are in the family asked for.
struct MetricRows {
    std::string metric;
    bool higher_is_better = false;
    std::vector<std::vector<Entry>> entries;
    std::vector<Comparison> rows;
    std::vector<bool> member;
};

bool has_pair(const CompareOptions& opt, const std::string& a, const std::string& b) {
    return std::find(opt.pairs.begin(), opt.pairs.end(), std::make_pair(a, b)) != opt.pairs.end();
}

// Whether the pair (a, b) in file order is written b vs a (--against NAME: NAME is b).
bool swapped(const std::string& a, const std::string& b, const CompareOptions& opt) {
    if (!opt.against.empty()) return a == opt.against;
    return has_pair(opt, b, a) && !has_pair(opt, a, b);
}

bool in_family(const Comparison& r, const CompareOptions& opt) {
    if (!opt.against.empty()) return r.ea->name == opt.against || r.eb->name == opt.against;
    if (!opt.pairs.empty()) return has_pair(opt, r.ea->name, r.eb->name);
    return true;
}

struct Baselines {
    std::map<std::vector<std::string>, double> values;
    bool by_variant = false;
};

// The cell's uniform baseline: the first variant's (all share the cell's inputs).
std::optional<double> baseline_of(const Cell& c, const Baselines& b) {
    for (const Group& g : c.groups) {
        std::vector<std::string> key{b.by_variant ? g.variant : std::string()};
        key.insert(key.end(), c.key.begin(), c.key.end());
        key[3] = g.m;   // the cell column after L, d: m (num_features cells: the variant's m)
        const auto it = b.values.find(key);
        if (it != b.values.end()) return it->second;
    }
    return std::nullopt;
}

MetricRows metric_rows(const CsvFile& f, const Layout& l, const std::vector<Cell>& cells, const std::string& metric,
                       const Baselines& base, const CompareOptions& opt, std::set<std::string>& skipped) {
    MetricRows m{metric, find_metric(metric)->higher_is_better, std::vector<std::vector<Entry>>(cells.size()), {}, {}};
    const std::size_t col = f.table.column(metric);
    for (std::size_t ci = 0; ci < cells.size(); ++ci) {
        for (const Group& g : cells[ci].groups) {
            Entry e = entry_of(f, l, g, col);
            if (!e.values.empty()) m.entries[ci].push_back(std::move(e));
        }
        const std::optional<double> u = m.entries[ci].empty() ? std::nullopt : baseline_of(cells[ci], base);
        if (u && cells[ci].input_seeds.size() > 1) skipped.insert(cells[ci].label);
        else if (u) m.entries[ci].push_back(uniform_entry(*u));
    }
    for (std::size_t ci = 0; ci < cells.size(); ++ci) {
        const std::vector<Entry>& E = m.entries[ci];
        auto add = [&](std::size_t i, std::size_t j) {
            const bool s = swapped(E[i].name, E[j].name, opt);
            m.rows.push_back(pair_of(cells[ci], s ? E[j] : E[i], s ? E[i] : E[j]));
            m.rows.back().cell_index = ci;
            m.rows.back().higher_is_better = m.higher_is_better;
        };
        const bool has_u = !E.empty() && !E.back().group;
        const std::size_t v = E.size() - (has_u ? 1 : 0);
        for (std::size_t i = 0; i < v; ++i)   // the variant pairs, then each against uniform
            for (std::size_t j = i + 1; j < v; ++j) add(i, j);
        for (std::size_t i = 0; i < v && has_u; ++i) add(i, v);
    }
    return m;
}

// Holm over the member rows that were tested, and the smallest p_holm each could reach:
// max(k * min p_min, its own p_min) for a family of k tests (Holm's first step multiplies the
// smallest p by k; no row's adjusted p is below that, nor below its own p).
struct Adjusted {
    double p_holm = kNaN, p_holm_min = kNaN;
    std::size_t family = 0;
};

std::vector<Adjusted> adjust(const std::vector<Comparison>& rows, const std::vector<bool>& member) {
    std::vector<double> ps;
    double least = 1;
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (member[i] && rows[i].tested()) ps.push_back(rows[i].p), least = std::min(least, rows[i].p_min);
    const std::vector<double> adj = holm(ps);
    std::vector<Adjusted> out(rows.size());
    std::size_t k = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        out[i].family = ps.size();
        if (!member[i] || !rows[i].tested()) continue;
        out[i].p_holm = adj[k++];
        out[i].p_holm_min = std::min(1.0, std::max(double(ps.size()) * least, rows[i].p_min));
    }
    return out;
}

// The verdict words (docs/design.md section 4): "a better" / "a worse" in the metric's
// direction (a lower error, a higher grad_cosine), "a=b" for an exact tie.
std::string verdict(const Comparison& r, const Adjusted& a, double alpha) {
    const char* order = (r.higher_is_better ? r.mean_a > r.mean_b : r.mean_a < r.mean_b) ? "a better" : "a worse";
    if (!r.nonfinite.empty()) return "non-finite";
    if (r.kind == "exact") return r.mean_a == r.mean_b ? "a=b" : order;
    if (!r.tested()) return "underpowered";   // fewer than 2 trials
    if (a.p_holm < alpha && r.mean_a != r.mean_b) return order;
    return a.p_holm_min >= alpha ? "underpowered" : "n.s.";
}

// The sorted bootstrap ratios of a row.
std::vector<double> bootstrap_of(const Comparison& r, std::size_t resamples) {
    if (r.boot == Boot::paired || r.boot == Boot::unpaired)
        return ratio_bootstrap(r.x, r.y, r.boot == Boot::paired, r.key, resamples);
    std::vector<double> v = baseline_ratio_bootstrap(r.x, r.constant, r.key, resamples);
    if (r.boot == Boot::c_over_x) {   // constant / mean(x*): the reciprocals, in order
        for (double& x : v) x = 1 / x;
        std::reverse(v.begin(), v.end());
    }
    return v;
}

// ci95_low, ci95_high, ci_bonf_low, ci_bonf_high: the percentile intervals at 95% and at the
// Bonferroni level 1 - alpha / k over the row's family of k tests (simultaneous over the
// family). Resamples: `base` (10000), more for large families: 20 k / alpha (10 beyond each
// Bonferroni end), at most 4 x base (at least one beyond each end up to k = 1000 at alpha 0.05).
std::vector<std::string> intervals(const Comparison& r, std::size_t family, double alpha, std::size_t base) {
    if (r.kind == "exact") return std::vector<std::string>(4, format_number(r.ratio));
    if (r.boot == Boot::none) return std::vector<std::string>(4, "");
    const double k = double(std::max<std::size_t>(family, 1));
    const auto B = std::size_t(std::clamp(std::ceil(20 * k / alpha), double(base), 4.0 * double(base)));
    const std::vector<double> v = bootstrap_of(r, B);
    const auto c95 = percentile_interval(v, 0.95), cb = percentile_interval(v, 1 - alpha / k);
    return {format_number(c95.first), format_number(c95.second), format_number(cb.first), format_number(cb.second)};
}

// The per-row budget column: num_features in m cells, m in num_features cells.
std::string budget_of(const Entry& e, const Layout& l) {
    if (!e.group) return "";
    return l.by_features ? e.group->m : e.group->num_features;
}

// Counts finished rows for CompareOptions::progress (tests, then the written rows' intervals).
struct Ticker {
    const std::function<void(std::size_t, std::size_t)>& report;
    std::size_t total = 0, done = 0;
    void tick() {
        ++done;
        if (report) report(done, total);
    }
};

void append_rows(Table& t, const MetricRows& m, const std::vector<Adjusted>& adj, const Layout& l,
                 const CompareOptions& opt, Ticker& ticker) {
    const double alpha = opt.alpha;
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        if (!m.member[i]) continue;
        const Comparison& r = m.rows[i];
        std::vector<std::string> row{r.ea->name, r.eb->name};
        row.insert(row.end(), r.cell->key.begin(), r.cell->key.end());
        row.insert(row.end(), {budget_of(*r.ea, l), budget_of(*r.eb, l), m.metric, format_number(r.mean_a),
                               format_number(r.mean_b), r.ea->group ? format_count(r.ea->values.size()) : "",
                               r.eb->group ? format_count(r.eb->values.size()) : "", r.nonfinite, r.kind,
                               format_number(r.ratio)});
        const std::vector<std::string> ci = intervals(r, adj[i].family, alpha, opt.bootstrap);
        row.insert(row.end(), ci.begin(), ci.end());
        auto num = [](double v) { return std::isnan(v) ? std::string() : format_number(v); };
        row.insert(row.end(), {num(r.p), num(r.p_min), num(adj[i].p_holm), num(adj[i].p_holm_min), verdict(r, adj[i], alpha)});
        t.rows.push_back(std::move(row));
        ticker.tick();
    }
}

std::string mirrored(const std::string& v) { return v == "a better" ? "a worse" : v == "a worse" ? "a better" : v; }

// A variant's verdict against uniform (a = the variant) as ranking_<metric>.csv's vs_uniform says it.
std::string vs_uniform_word(const std::string& v) {
    return v == "a better" ? "better" : v == "a worse" ? "worse" : v == "a=b" ? "equal" : v;
}

// The rankings of one metric from the verdicts over every row (Holm over all of them).
std::vector<RankCell> rank_cells(const MetricRows& m, const std::vector<Cell>& cells, const std::vector<Adjusted>& full,
                                 const Layout& l, double alpha) {
    std::vector<RankCell> out(cells.size());
    for (std::size_t ci = 0; ci < cells.size(); ++ci) {
        const std::vector<Entry>& E = m.entries[ci];
        RankCell& rc = out[ci];
        rc.key = cells[ci].key;
        rc.label = cells[ci].label;
        rc.metric = m.metric;
        rc.higher_is_better = m.higher_is_better;
        rc.differs.assign(E.size(), std::vector<bool>(E.size(), false));
        for (const Entry& e : E)
            rc.entries.push_back({e.name, budget_of(e, l), e.values.size(), e.nonfinite, entry_mean(e), !e.group, ""});
    }
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        const Comparison& r = m.rows[i];
        RankCell& rc = out[r.cell_index];
        const auto ia = std::size_t(r.ea - m.entries[r.cell_index].data()), ib = std::size_t(r.eb - m.entries[r.cell_index].data());
        const std::string v = verdict(r, full[i], alpha);
        rc.differs[ia][ib] = rc.differs[ib][ia] = v == "a better" || v == "a worse";
        if (!r.eb->group) rc.entries[ia].vs_uniform = vs_uniform_word(v);
        if (!r.ea->group) rc.entries[ib].vs_uniform = vs_uniform_word(mirrored(v));
    }
    out.erase(std::remove_if(out.begin(), out.end(), [](const RankCell& c) { return c.entries.empty(); }), out.end());
    return out;
}

void check_options(const CompareOptions& opt) {
    if (!(opt.alpha > 0 && opt.alpha < 1)) throw Error("--alpha: must be in (0, 1), got " + format_number(opt.alpha));
    std::vector<std::string> choices = compare_metric_names();
    choices.push_back("all");
    for (const auto& m : opt.metrics)
        if (std::find(choices.begin(), choices.end(), m) == choices.end())
            throw Error("--metric: unknown metric '" + m + "'" + suggestion(m, choices));
    if (!opt.match.empty() && opt.match != "num_features")
        throw Error("--match: unknown key '" + opt.match + "' (only num_features)" + suggestion(opt.match, {"num_features"}));
    if (opt.bootstrap < 1) throw Error("compare: bootstrap: at least 1 resample");
    if (!opt.against.empty() && !opt.pairs.empty()) throw Error("--against and --pairs: give one of them, not both");
    for (const auto& [a, b] : opt.pairs)
        if (a == b) throw Error("--pairs: '" + a + ":" + b + "' compares a variant with itself");
}

// --against / --pairs name variants of the file (or uniform).
void check_names(const CompareOptions& opt, const std::vector<Cell>& cells, const std::string& file) {
    std::vector<std::string> names{"uniform"};
    for (const Cell& c : cells)
        for (const Group& g : c.groups)
            if (std::find(names.begin(), names.end(), g.variant) == names.end()) names.push_back(g.variant);
    auto check = [&](const std::string& flag, const std::string& n) {
        if (std::find(names.begin(), names.end(), n) == names.end())
            throw Error(flag + ": no variant '" + n + "' in " + file + suggestion(n, names));
    };
    if (!opt.against.empty()) check("--against", opt.against);
    for (const auto& [a, b] : opt.pairs) check("--pairs", a), check("--pairs", b);
}

// The metric columns to compare, in the order asked ("all": the file's known metrics the
// metric table marks as compared; nothing asked: the first of them).
std::vector<std::string> resolve_metrics(const std::vector<std::string>& asked, const CsvFile& f) {
    std::vector<std::string> present;
    for (const auto& k : compare_metric_names())
        if (f.table.has_column(k) && find_metric(k)->compared) present.push_back(k);
    if (asked.empty() && !present.empty()) return {present.front()};
    std::vector<std::string> out;
    auto add = [&out](const std::string& m) {
        if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
    };
    for (const auto& m : asked) {
        if (m == "all") {
            for (const auto& k : present) add(k);
            continue;
        }
        if (!f.table.has_column(m)) throw Error(f.path + ": no column '" + m + "' (asked for by --metric)");
        add(m);
    }
    if (out.empty()) throw Error(f.path + ": no metric columns to compare");
    return out;
}

// Counts the underpowered rows of the family and the trials that would reach a verdict.
struct Power {
    std::size_t rows = 0, underpowered = 0, need = 0, n = 0, family = 0;
    double p_min = kNaN;

    void add(const Comparison& r, const Adjusted& a, const std::string& v, double alpha) {
        rows += 1;
        if (v != "underpowered") return;
        underpowered += 1;
        if (!r.tested()) return;
        need = std::max(need, trials_needed(a.family, alpha, r.kind != "no"));
        if (n == 0 || r.x.size() < n) n = r.x.size(), p_min = r.p_min, family = a.family;
    }
    std::string warning(double alpha) const {
        if (underpowered == 0) return "";
        std::string w = "compare: " + std::to_string(underpowered) + " of " + std::to_string(rows) +
                        " rows underpowered (no p_holm below " + format_number(alpha) + " reachable)";
        if (n == 0) return w + ": fewer than 2 trials";
        auto shown = [](double v) { return short_number(format_number(v), 3); };
        return w + ": the smallest p with " + std::to_string(n) + " trials is " + shown(p_min) + ", Holm over " +
               std::to_string(family) + " tests needs p < " + shown(alpha / double(family)) + "; " +
               (need ? std::to_string(need) + " trials per variant would reach it" : "no trial count up to 64 would") +
               " (or test fewer: --against, --pairs)";
    }
};

Table comparisons_header(const Layout& l) {
    Table t;
    t.columns = {"a", "b"};
    t.columns.insert(t.columns.end(), l.cell_columns.begin(), l.cell_columns.end());
    const std::string budget = l.by_features ? "m" : "num_features";
    t.columns.insert(t.columns.end(), {budget + "_a", budget + "_b", "metric", "mean_a", "mean_b", "n_a", "n_b",
                                       "nonfinite", "paired", "ratio", "ci95_low", "ci95_high", "ci_bonf_low",
                                       "ci_bonf_high", "p_value", "p_min", "p_holm", "p_holm_min", "verdict"});
    return t;
}

std::string skipped_warning(const std::set<std::string>& skipped) {
    if (skipped.empty()) return "";
    return "compare: no rows against uniform in " + std::to_string(skipped.size()) + " cell(s) with several input "
           "seeds (e.g. " + *skipped.begin() + "): summary.csv has one baseline per cell, not one per input draw";
}

}  // namespace

CompareResult compare_tables(const CompareInput& in, const CompareOptions& opt) {
    check_options(opt);
    const CsvFile errors = csv_of(in.errors, in.errors_name);
    const Layout l = layout_of(errors, in.by_num_features || opt.match == "num_features");
    const std::vector<std::string> metrics = resolve_metrics(opt.metrics, errors);
    const std::vector<Cell> cells = group_cells(errors, l);
    check_names(opt, cells, in.errors_name);
    std::optional<CsvFile> summary;
    if (in.summary) summary = csv_of(*in.summary, in.summary_name);

    CompareResult res;
    res.metrics = metrics;
    res.cell_columns = l.cell_columns;
    res.comparisons = comparisons_header(l);
    std::vector<RankCell> ranks;
    std::set<std::string> skipped;
    Power power;
    std::vector<MetricRows> all;   // every row first, so the progress knows the total
    Ticker ticker{opt.progress};
    for (const auto& metric : metrics) {
        const Baselines base{read_baselines(summary, l, metric), summary && summary->table.has_column("variant")};
        all.push_back(metric_rows(errors, l, cells, metric, base, opt, skipped));
        for (const Comparison& r : all.back().rows) all.back().member.push_back(in_family(r, opt));
        ticker.total += all.back().rows.size() + std::size_t(std::count(all.back().member.begin(), all.back().member.end(), true));
    }
    if (ticker.report) ticker.report(0, ticker.total);   // the total, before the first (slowest) test ends
    for (MetricRows& m : all)
        for (Comparison& r : m.rows) run_test(r, opt.permutations), ticker.tick();
    for (const MetricRows& m : all) {
        const std::vector<Adjusted> adj = adjust(m.rows, m.member);
        append_rows(res.comparisons, m, adj, l, opt, ticker);
        for (std::size_t i = 0; i < m.rows.size(); ++i)
            if (m.member[i]) power.add(m.rows[i], adj[i], verdict(m.rows[i], adj[i], opt.alpha), opt.alpha);
        const std::vector<Adjusted> full = adjust(m.rows, std::vector<bool>(m.rows.size(), true));
        for (RankCell& rc : rank_cells(m, cells, full, l, opt.alpha)) ranks.push_back(std::move(rc));
    }
    if (res.comparisons.rows.empty() && (!opt.against.empty() || !opt.pairs.empty()))
        throw Error((opt.against.empty() ? "--pairs" : "--against") + std::string(": no such comparison in ") +
                    in.errors_name + " (rows against uniform need summary.csv's baseline_<metric> columns)");
    res.ranking = ranking_table(ranks, l.cell_columns, l.by_features ? "m" : "num_features");
    res.summary = ranking_summary(ranks);
    for (const std::string& w : {power.warning(opt.alpha), skipped_warning(skipped)})
        if (!w.empty()) res.warnings.push_back(w);
    return res;
}

namespace {

// A result directory's member, regular files only (a FIFO is not opened, a symlink to
// /dev/zero or a directory is refused: files.cpp); nullopt when absent.
std::optional<std::string> read_member(const std::string& dir, const std::string& name) {
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::nullopt;   // follows symlinks: a dangling one is absent
    return read_regular_file(path, name == "run.json" ? "JSON file" : "CSV table", kMaxCompareBytes);
}

}  // namespace

CompareResult compare_results(const std::string& dir, const CompareOptions& opt) {
    check_options(opt);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a result directory");
    CompareInput in;
    in.errors_name = (fs::path(dir) / "errors.csv").string();
    in.summary_name = (fs::path(dir) / "summary.csv").string();
    const auto errors = read_member(dir, "errors.csv");
    if (!errors)
        throw Error(in.errors_name + ": not found; compare needs an approximation result's errors.csv "
                                     "(kernel and timing results have none)");
    in.errors = *errors;
    in.summary = read_member(dir, "summary.csv");
    if (const auto run = read_member(dir, "run.json")) {
        const nlohmann::json j = nlohmann::json::parse(*run, nullptr, false);
        if (j.is_discarded()) throw Error((fs::path(dir) / "run.json").string() + ": not valid JSON");
        in.by_num_features = j.is_object() && j.contains("config") && j["config"].is_object() &&
                             j["config"].contains("num_features");
    }
    return compare_tables(in, opt);
}

std::pair<std::string, std::string> compare_file_names(const std::string& metric) {
    return {"comparisons_" + metric + ".csv", "ranking_" + metric + ".csv"};
}

Table metric_part(const Table& t, const std::string& metric) {
    Table part;
    part.columns = t.columns;
    const std::size_t col = t.column("metric");
    for (const auto& row : t.rows)
        if (row[col] == metric) part.rows.push_back(row);
    return part;
}

void write_comparisons(const std::string& dir, const CompareResult& r) {
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& metric : r.metrics) {
        const auto [comparisons, ranking] = compare_file_names(metric);
        files.emplace_back((fs::path(dir) / comparisons).string(), to_csv(metric_part(r.comparisons, metric)));
        files.emplace_back((fs::path(dir) / ranking).string(), to_csv(metric_part(r.ranking, metric)));
    }
    write_own_files(files);
}

std::string compare_description(const CompareOptions& opt) {
    return "Tests: paired rows (same projection, seed, m and trials, so the same W): sign-flip permutation test "
           "of the paired t statistic; unpaired rows: permutation test of the Welch t statistic; one-sample "
           "rows (b = uniform, or one side deterministic): sign-flip test of x - constant; exact rows: two "
           "deterministic maps, the difference is exact, no test. Exact up to 65536 permutations, else 65536 "
           "random ones; p_holm: Holm over each metric's rows" +
           std::string(opt.against.empty() && opt.pairs.empty() ? "" : " in the family asked (--against / --pairs)") +
           "; verdict at p_holm < " + format_number(opt.alpha) +
           " (underpowered: p_holm_min >= alpha, no verdict reachable with these trials); ratio = mean_a / mean_b, "
           "bootstrap percentile intervals ci95 (95%) and ci_bonf (1 - alpha / family size).";
}

}  // namespace favor
