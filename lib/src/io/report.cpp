#include "favor/io/report.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "favor/core/error.hpp"

namespace favor {

std::size_t Table::column(const std::string& name) const {
    for (std::size_t i = 0; i < columns.size(); ++i)
        if (columns[i] == name) return i;
    throw Error("table has no column '" + name + "'");
}

bool Table::has_column(const std::string& name) const {
    for (const auto& c : columns)
        if (c == name) return true;
    return false;
}

std::string format_number(std::optional<double> v) {
    if (!v) return "";
    if (std::isnan(*v)) return "nan";
    if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, *v);   // shortest round-trip form
    return std::string(buf, r.ptr);
}

std::string format_count(std::size_t v) { return std::to_string(v); }

bool parse_count(const std::string& s, std::size_t& v) {
    if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_real(const std::string& s, double& v, bool nonfinite) {
    if (s == "nan" || s == "inf" || s == "-inf") {
        v = s == "nan" ? std::nan("") : (s == "inf" ? HUGE_VAL : -HUGE_VAL);
        return nonfinite;
    }
    if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-')) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(v);
}

std::string to_csv(const Table& t) {
    std::string out;
    auto line = [&out](const std::vector<std::string>& cells) {
        for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
        out += '\n';
    };
    line(t.columns);
    for (const auto& r : t.rows) line(r);
    return out;
}

std::string short_number(const std::string& cell, int digits) {
    char* end = nullptr;
    const double v = std::strtod(cell.c_str(), &end);
    if (cell.empty() || end != cell.c_str() + cell.size() || !std::isfinite(v)) return cell;
    if (v == std::floor(v) && std::fabs(v) < 1e9) return cell;   // counts and sizes as they are
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

std::string to_markdown(const Table& t, int digits) {
    std::string out = "|";
    for (const auto& c : t.columns) out += " " + c + " |";
    out += "\n|";
    for (std::size_t i = 0; i < t.columns.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& r : t.rows) {
        out += "|";
        for (const auto& c : r) out += " " + short_number(c, digits) + " |";
        out += "\n";
    }
    return out;
}

Table parse_csv(const std::string& text, const std::string& file) {
    Table t;
    std::stringstream ss(text);
    std::string line;
    std::size_t lineno = 0;
    auto split = [](const std::string& s) {
        std::vector<std::string> cells;
        std::string cell;
        std::stringstream ls(s);
        while (std::getline(ls, cell, ',')) cells.push_back(cell);
        if (!s.empty() && s.back() == ',') cells.push_back("");
        return cells;
    };
    while (std::getline(ss, line)) {
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find('"') != std::string::npos)
            throw Error(file + ": line " + std::to_string(lineno) + ": a quoted cell (favor writes none: no name may hold a comma or quote)");
        if (lineno == 1) {
            t.columns = split(line);
            continue;
        }
        if (line.empty()) continue;
        auto cells = split(line);
        if (cells.size() != t.columns.size())
            throw Error(file + ": line " + std::to_string(lineno) + ": " + std::to_string(cells.size()) +
                        " cells, expected " + std::to_string(t.columns.size()));
        t.rows.push_back(std::move(cells));
    }
    if (t.columns.empty()) throw Error(file + ": empty CSV");
    return t;
}

Table read_csv(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::stringstream buf;
    buf << in.rdbuf();
    return parse_csv(buf.str(), path);
}

double quantile(std::vector<double> xs, double p) {
    if (xs.empty()) return std::nan("");
    std::sort(xs.begin(), xs.end());
    const double h = p * double(xs.size() - 1);
    const std::size_t lo = std::size_t(std::floor(h));
    if (lo + 1 >= xs.size()) return xs.back();
    return xs[lo] + (h - double(lo)) * (xs[lo + 1] - xs[lo]);
}

Stats describe(const std::vector<double>& xs) {
    Stats s;
    s.n = xs.size();
    if (xs.empty()) return s;
    s.median = quantile(xs, 0.5);
    s.p10 = quantile(xs, 0.1);
    s.p90 = quantile(xs, 0.9);
    for (double x : xs) s.mean += x;
    s.mean /= double(xs.size());
    if (xs.size() < 2) {
        s.std = s.sem = std::nan("");
        return s;
    }
    double ss = 0.0;
    for (double x : xs) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / double(xs.size() - 1));
    s.sem = s.std / std::sqrt(double(xs.size()));
    return s;
}

namespace {
using RowGroup = std::vector<const std::vector<std::string>*>;

// The rows of `t` grouped by their values in the columns key_idx, groups in order of first
// appearance; keys[g]: group g's key values.
std::vector<RowGroup> group_rows(const Table& t, const std::vector<std::size_t>& key_idx,
                                 std::vector<std::vector<std::string>>& keys) {
    std::map<std::vector<std::string>, std::size_t> index;
    std::vector<RowGroup> groups;
    for (const auto& r : t.rows) {
        std::vector<std::string> k;
        for (std::size_t i : key_idx) k.push_back(r[i]);
        auto [it, fresh] = index.emplace(k, groups.size());
        if (fresh) {
            groups.emplace_back();
            keys.push_back(k);
        }
        groups[it->second].push_back(&r);
    }
    return groups;
}

// A group's values of column i; `all` is false if any row's cell is blank (not applicable,
// or attention_kl's infinite divergence), and then the statistics are blank too.
std::vector<double> column_values(const RowGroup& g, std::size_t i, bool& all) {
    std::vector<double> xs;
    all = !g.empty();
    for (const auto* r : g) {
        if ((*r)[i].empty()) {
            all = false;
            continue;
        }
        xs.push_back(std::strtod((*r)[i].c_str(), nullptr));
    }
    return xs;
}
}  // namespace

Table summarize(const Table& errors, const std::vector<std::string>& key_columns,
                const std::vector<std::string>& metric_columns,
                const std::vector<std::string>& plain_columns) {
    std::vector<std::size_t> key_idx, metric_idx, plain_idx;
    for (const auto& c : key_columns) key_idx.push_back(errors.column(c));
    for (const auto& c : metric_columns) metric_idx.push_back(errors.column(c));
    for (const auto& c : plain_columns) plain_idx.push_back(errors.column(c));

    Table out;
    out.columns = key_columns;
    out.columns.push_back("trials");
    for (const auto& c : metric_columns)
        for (const char* s : {"_mean", "_std", "_sem", "_median", "_p10", "_p90"}) out.columns.push_back(c + s);
    for (const auto& c : plain_columns) out.columns.push_back(c);

    std::vector<std::vector<std::string>> keys;
    const std::vector<RowGroup> groups = group_rows(errors, key_idx, keys);
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::vector<std::string> row = keys[g];
        row.push_back(std::to_string(groups[g].size()));
        for (std::size_t i : metric_idx) {
            bool all;
            const Stats s = describe(column_values(groups[g], i, all));
            for (double v : {s.mean, s.std, s.sem, s.median, s.p10, s.p90}) row.push_back(all ? format_number(v) : "");
        }
        for (std::size_t i : plain_idx) {
            bool all;
            const Stats s = describe(column_values(groups[g], i, all));
            row.push_back(all ? format_number(s.mean) : "");
        }
        out.rows.push_back(std::move(row));
    }
    return out;
}

Table group_means(const Table& t, const std::vector<std::string>& on, const std::vector<std::string>& value_columns) {
    Table out = summarize(t, on, {}, value_columns);
    const auto n = std::ptrdiff_t(on.size());
    out.columns.erase(out.columns.begin() + n);   // the count column
    for (auto& r : out.rows) r.erase(r.begin() + n);
    return out;
}

Table join_columns(const Table& left, const Table& right, const std::vector<std::string>& on) {
    std::vector<std::size_t> li, ri, extra;
    for (const auto& c : on) li.push_back(left.column(c)), ri.push_back(right.column(c));
    for (std::size_t c = 0; c < right.columns.size(); ++c)
        if (std::find(on.begin(), on.end(), right.columns[c]) == on.end()) extra.push_back(c);
    std::map<std::vector<std::string>, const std::vector<std::string>*> index;
    for (const auto& r : right.rows) {
        std::vector<std::string> k;
        for (std::size_t i : ri) k.push_back(r[i]);
        index.emplace(std::move(k), &r);
    }
    Table out = left;
    for (std::size_t c : extra) out.columns.push_back(right.columns[c]);
    for (auto& r : out.rows) {
        std::vector<std::string> k;
        for (std::size_t i : li) k.push_back(r[i]);
        const auto it = index.find(k);
        for (std::size_t c : extra) r.push_back(it == index.end() ? "" : (*it->second)[c]);
    }
    return out;
}

}  // namespace favor
