// Rankings per cell for `favor compare`: order by mean, the group tied with the best, and a
// compact letter display of all pairwise verdicts.
#include "favor/results/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace favor {

namespace {

// Insert-absorb (Piepho 2004): start with one group of all entries; for every differing pair
// (i, j) split each group holding both into "without i" and "without j"; drop groups inside
// another. What remains are the maximal sets with no differing pair.
std::vector<std::vector<bool>> insert_absorb(const std::vector<std::vector<bool>>& differs) {
    const std::size_t n = differs.size();
    std::vector<std::vector<bool>> groups{std::vector<bool>(n, true)};
    auto inside = [n](const std::vector<bool>& a, const std::vector<bool>& b) {
        for (std::size_t k = 0; k < n; ++k)
            if (a[k] && !b[k]) return false;
        return true;
    };
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j) {
            if (!differs[i][j]) continue;
            std::vector<std::vector<bool>> next;
            for (auto& g : groups) {
                if (!(g[i] && g[j])) {
                    next.push_back(g);
                    continue;
                }
                auto gi = g, gj = g;
                gi[i] = false;
                gj[j] = false;
                next.push_back(gi);
                next.push_back(gj);
            }
            groups.clear();   // absorb: keep a group only if no other (or earlier equal) holds it
            for (std::size_t a = 0; a < next.size(); ++a) {
                bool absorbed = false;
                for (std::size_t b = 0; b < next.size() && !absorbed; ++b)
                    absorbed = a != b && inside(next[a], next[b]) && (!inside(next[b], next[a]) || b < a);
                if (!absorbed) groups.push_back(next[a]);
            }
        }
    return groups;
}

std::string letter(std::size_t k) {
    if (k < 26) return std::string(1, char('a' + k));
    if (k < 52) return std::string(1, char('A' + k - 26));
    return "{" + std::to_string(k + 1) + "}";
}

// x / y with x / x = 1 (0 / 0 too), as compare's ratios.
double ratio_of(double x, double y) { return x == y ? 1.0 : x / y; }

// Entry indices in rank order: finite means best first (ascending, or descending for a
// higher-is-better metric; ties in given order), then the entries with non-finite trials.
std::vector<std::size_t> rank_order(const RankCell& c) {
    std::vector<std::size_t> order(c.entries.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](std::size_t i) { return c.entries[i].nonfinite > 0; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) {
        if (key(i) != key(j)) return key(j);
        if (key(i)) return false;
        return c.higher_is_better ? c.entries[i].mean > c.entries[j].mean : c.entries[i].mean < c.entries[j].mean;
    });
    return order;
}

std::size_t ranked_count(const RankCell& c) {
    std::size_t k = 0;
    for (const auto& e : c.entries) k += e.nonfinite == 0;
    return k;
}

const RankEntry* uniform_of(const RankCell& c) {
    for (const auto& e : c.entries)
        if (e.uniform) return &e;
    return nullptr;
}

// The letters of the ranked entries, in rank order.
std::vector<std::string> letters_of(const RankCell& c, const std::vector<std::size_t>& order) {
    const std::size_t k = ranked_count(c);
    std::vector<std::vector<bool>> d(k, std::vector<bool>(k));
    for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < k; ++j) d[i][j] = c.differs[order[i]][order[j]];
    return letter_groups(d);
}

}  // namespace

std::vector<std::string> letter_groups(const std::vector<std::vector<bool>>& differs) {
    const std::size_t n = differs.size();
    std::vector<std::vector<bool>> groups = insert_absorb(differs);
    auto first = [n](const std::vector<bool>& g) {
        for (std::size_t k = 0; k < n; ++k)
            if (g[k]) return k;
        return n;
    };
    std::stable_sort(groups.begin(), groups.end(),
                     [&](const auto& a, const auto& b) { return first(a) < first(b) || (first(a) == first(b) && a > b); });
    std::vector<std::string> out(n);
    for (std::size_t g = 0; g < groups.size(); ++g)
        for (std::size_t k = 0; k < n; ++k)
            if (groups[g][k]) out[k] += letter(g);
    return out;
}

Table ranking_table(const std::vector<RankCell>& cells, const std::vector<std::string>& cell_columns,
                    const std::string& budget_column) {
    Table t;
    t.columns = cell_columns;
    t.columns.insert(t.columns.end(), {"metric", "rank", "variant", budget_column, "n", "nonfinite", "mean",
                                       "ratio_to_best", "ratio_to_uniform", "vs_uniform", "tied_with_best", "group"});
    for (const RankCell& c : cells) {
        const std::vector<std::size_t> order = rank_order(c);
        const std::vector<std::string> letters = letters_of(c, order);
        const RankEntry* u = uniform_of(c);
        const std::size_t ranked = letters.size();
        for (std::size_t r = 0; r < order.size(); ++r) {
            const RankEntry& e = c.entries[order[r]];
            const bool in_rank = r < ranked;
            std::vector<std::string> row = c.key;
            row.insert(row.end(), {c.metric, in_rank ? format_count(r + 1) : "", e.name, e.budget,
                                   e.uniform ? "" : format_count(e.n), format_count(e.nonfinite), format_number(e.mean),
                                   in_rank ? format_number(ratio_of(e.mean, c.entries[order[0]].mean)) : "",
                                   u ? format_number(ratio_of(e.mean, u->mean)) : "", e.vs_uniform,
                                   in_rank ? (r == 0 || !c.differs[order[0]][order[r]] ? "yes" : "no") : "",
                                   in_rank ? letters[r] : ""});
            t.rows.push_back(std::move(row));
        }
    }
    return t;
}

std::vector<std::string> ranking_summary(const std::vector<RankCell>& cells) {
    std::vector<std::string> out;
    for (const RankCell& c : cells) {
        const std::vector<std::size_t> order = rank_order(c);
        const RankEntry* u = uniform_of(c);
        std::string line = c.label + " " + c.metric + ": ";
        if (ranked_count(c) == 0) {
            out.push_back(line + "no estimator with finite trials");
            continue;
        }
        const RankEntry& best = c.entries[order[0]];
        line += "best: " + best.name;
        if (u && !best.uniform) line += " " + short_number(format_number(ratio_of(best.mean, u->mean)), 3) + "x uniform";
        std::string tied;
        for (std::size_t r = 1; r < ranked_count(c); ++r)
            if (!c.differs[order[0]][order[r]]) tied += (tied.empty() ? "" : ", ") + c.entries[order[r]].name;
        line += "; tied: " + (tied.empty() ? std::string("none") : tied);
        if (u) {
            std::size_t beat = 0, total = 0;
            for (const auto& e : c.entries)
                if (!e.uniform) total += 1, beat += e.vs_uniform == "better";
            line += "; beat uniform: " + std::to_string(beat) + " of " + std::to_string(total);
        }
        for (const auto& e : c.entries)
            if (e.nonfinite) line += "; " + e.name + ": " + std::to_string(e.nonfinite) + " of " + std::to_string(e.n) + " trials non-finite";
        out.push_back(line);
    }
    return out;
}

std::string ranking_markdown(const Table& ranking, const std::vector<std::string>& cell_columns) {
    std::string out;
    std::size_t r = 0;
    const std::size_t metric = ranking.column("metric");
    while (r < ranking.rows.size()) {
        std::size_t end = r;
        auto same = [&](std::size_t a, std::size_t b) {
            for (std::size_t k = 0; k <= cell_columns.size(); ++k)   // the cell columns and metric
                if (ranking.rows[a][k] != ranking.rows[b][k]) return false;
            return true;
        };
        while (end < ranking.rows.size() && same(r, end)) ++end;
        std::string label;
        for (std::size_t k = 0; k < cell_columns.size(); ++k) label += (k ? "," : "") + cell_columns[k] + "=" + ranking.rows[r][k];
        Table part;
        part.columns.assign(ranking.columns.begin() + long(metric) + 1, ranking.columns.end());
        for (std::size_t i = r; i < end; ++i) part.rows.emplace_back(ranking.rows[i].begin() + long(metric) + 1, ranking.rows[i].end());
        out += "\n### " + label + " " + ranking.rows[r][metric] + "\n\n" + to_markdown(part);
        r = end;
    }
    return out;
}

}  // namespace favor
