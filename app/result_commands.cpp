// `favor merge`, `favor compare` and `favor list`: result directories combined and compared,
// and the registries printed.
#include <iostream>

#include "command.hpp"
#include "progress.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/io/files.hpp"
#include "favor/io/report.hpp"
#include "favor/metrics/metric_table.hpp"
#include "favor/results/compare.hpp"
#include "favor/results/merge.hpp"
#include "favor/results/ranking.hpp"
#include "favor/runs/run_session.hpp"

namespace favor::cli {
namespace {

struct MergeFlags {
    std::string out;
    std::vector<std::string> dirs;
    bool quiet = false;
    MergeOptions opt;
};
MergeFlags& merge_flags() {
    static MergeFlags f;
    return f;
}

struct CompareFlags {
    std::string dir;
    Text alpha, pairs;
    bool summary = false;
    CompareOptions opt;
    CLI::Option *against = nullptr, *match = nullptr;
};
CompareFlags& compare_flags() {
    static CompareFlags f;
    return f;
}

// Prints the comparisons compare_session wrote as Markdown after a line naming the tests
// (--summary: one line per cell and metric instead).
int compare_and_print(CompareRequest req, bool summary) {
    CompareOptions opt;
    Progress progress(false, 10.0, "comparisons");   // as run's: a bar on a terminal, else a line every 10 s
    req.progress = [&progress](std::size_t done, std::size_t total) { progress.update(done, total); };
    progress.start();
    const CompareResult r = compare_session(req, &opt);
    progress.finish();
    for (const auto& w : r.warnings) warn(w);
    if (summary) {
        for (const auto& line : r.summary) std::cout << line << "\n";
        return 0;
    }
    std::cout << compare_description(opt) << "\n\n" << to_markdown(r.comparisons) << "\n## Rankings\n"
              << ranking_markdown(r.ranking, r.cell_columns);
    return 0;
}

}  // namespace

void setup_merge(CLI::App& merge) {
    MergeFlags& f = merge_flags();
    merge.add_option("out_dir", f.out, "output directory")->required();
    merge.add_option("dirs", f.dirs, "result directories to combine")->required();
    merge.add_flag("--quiet", f.quiet, "print nothing but errors");
    merge.add_flag("--allow-partial", f.opt.allow_partial,
                   "merge an incomplete shard set anyway (run.json then says partial)");
}

int run_merge(const std::vector<std::string>&) {
    const MergeFlags& f = merge_flags();
    const std::string& out = f.out;
    const std::vector<std::string>& dirs = f.dirs;
    const MergeOptions& opt = f.opt;
    const bool quiet = f.quiet;
    if (out.empty()) throw Error("merge: OUT_DIR: empty path");
    for (const auto& d : dirs)
        if (d.empty()) throw Error("merge: DIR: empty path");
    OutputDir dir(out);
    const RunResult r = merge_results(dirs, opt);
    write_results(r, dir);
    if (!quiet)
        std::cout << "merged " << dirs.size() << " result directories into " << absolute_dir(out) << "/ ("
                  << (r.errors.rows.empty() ? r.summary.rows.size() : r.errors.rows.size()) << " rows"
                  << (r.info.value("partial", false) ? "; PARTIAL: shards missing, see run.json" : "") << ")\n";
    if (r.info.value("partial", false))
        std::cerr << "favor: merge: partial result (missing " << r.info["missing_shards"].dump() << ")\n";
    return 0;
}

void setup_compare(CLI::App& compare) {
    CompareFlags& f = compare_flags();
    CompareOptions& cf = f.opt;
    compare.add_option("dir", f.dir, "result directory with errors.csv")->required();
    compare.add_option("--metric", cf.metrics,
                       "metric column (default: the first compared metric errors.csv has, in favor list's "
                       "order; repeatable; 'all': every compared metric present)");
    bind(compare, f.alpha, "--alpha", "level for the verdict, in (0, 1) (default 0.05)");
    f.against = compare.add_option("--against", cf.against,
                                   "only every variant against NAME (a variant, or uniform); Holm over those rows");
    bind(compare, f.pairs, "--pairs", "only these pairs, A:B,C:D,...; Holm over those rows");
    f.match = compare.add_option("--match", cf.match,
                                 "num_features: cells of equal feature columns F (each variant at its own m)");
    compare.add_flag("--summary", f.summary,
                     "print one line per cell and metric (best, tied, beat uniform) instead of the tables");
    compare.footer(
        "Tests (two-sided, valid for heavy-tailed samples with unequal variances): when both variants\n"
        "have the same projection, seed and trials (trial t used the same W on the same inputs), a\n"
        "sign-flip permutation test of the paired t statistic of d_t = a_t - b_t; otherwise a\n"
        "permutation test of the Welch t statistic (exact under exchangeability, asymptotically valid\n"
        "for unequal variances, Janssen 1997). Exact enumeration up to 65536 sign patterns / splits,\n"
        "else 65536 random ones, p = (1 + #{|t*| >= |t|}) / (1 + 65536). With baseline_<metric> in\n"
        "summary.csv, every variant is also tested against it (b = uniform, one-sample sign-flip).\n"
        "Deterministic maps (no projection, every trial the same value, e.g. elu): two are not tested\n"
        "(paired = exact, the difference is exact); against a random map, a one-sample sign-flip test.\n"
        "p_holm: Holm-Bonferroni over each metric's rows (or the --against / --pairs family); verdict\n"
        "a better / a worse (in the metric's direction: lower errors, higher grad_cosine) when\n"
        "p_holm < alpha; underpowered when p_holm_min (the smallest p_holm these trials can give)\n"
        ">= alpha; non-finite when a trial is NaN / Inf (column nonfinite: k of n; not tested).\n"
        "ratio = mean_a / mean_b, bootstrap percentile intervals ci95 (95%) and ci_bonf (1 - alpha / k\n"
        "over a family of k tests). Written per metric: DIR/comparisons_<metric>.csv and\n"
        "DIR/ranking_<metric>.csv (per cell, estimators best first, tied_with_best and letter groups:\n"
        "estimators sharing a letter do not differ; from Holm over every row of the metric).");

}

int run_compare(const std::vector<std::string>&) {
    const CompareFlags& f = compare_flags();
    CompareRequest req{f.dir, f.opt.metrics, f.alpha.get(), f.pairs.get(), {}, {}};
    if (f.against->count()) req.against = f.opt.against;
    if (f.match->count()) req.match = f.opt.match;
    return compare_and_print(req, f.summary);
}

void setup_list(CLI::App&) {}

int run_list(const std::vector<std::string>&) {
    std::cout << "feature maps (exact: timing experiments only):\n  exact  exact softmax attention\n";
    for (const auto& e : feature_map_registry()) std::cout << "  " << e.name << "  " << e.summary << "\n";
    std::cout << "projections:\n";
    for (const auto& e : projection_registry()) std::cout << "  " << e.name << "  " << e.summary << "\n";
    std::cout << "metrics:\n";
    for (const auto& m : metric_table())
        std::cout << "  " << m.name << "  " << m.description << (m.higher_is_better ? " (higher is better)" : "") << "\n";
    std::cout << "experiment kinds:\n  approximation, kernel, timing\n";
    return 0;
}

}  // namespace favor::cli
