// libFuzzer target for `favor compare`'s reader: the bytes are split at lines "@@" into
// errors.csv, summary.csv (absent when missing or "-") and an options line ("against=NAME",
// "pairs=A:B", "match" for num_features cells, "features" for a run.json num_features grid).
// Any input must either compare or raise favor::Error naming the file or the option; anything
// else (a crash, a sanitizer report, another exception) is a bug. The tables must also write
// out as CSV and Markdown. Small permutation and bootstrap sizes keep each input fast; inputs
// over 2000 lines are skipped (the cost is quadratic in the variants of a cell), long lines
// are not. Seeds: fuzz/corpus/compare. Build and run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/results/compare.hpp"
#include "sections.hpp"
#include "favor/results/ranking.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::size_t lines = 0;
    for (char c : text) lines += c == '\n';
    if (lines > 2000) return 0;
    const std::vector<std::string> parts = split_sections(text);
    favor::CompareInput in;
    in.errors_name = "in/errors.csv";
    in.errors = parts[0];
    in.summary_name = "in/summary.csv";
    if (parts.size() > 1 && parts[1] != "-") in.summary = parts[1];
    favor::CompareOptions opt;
    opt.metrics = {"all"};
    opt.permutations.exact_limit = 256;
    opt.permutations.monte_carlo = 64;
    opt.bootstrap = 32;
    const std::string o = parts.size() > 2 ? parts[2] : "";
    if (o.rfind("against=", 0) == 0) opt.against = o.substr(8);
    if (o.rfind("pairs=", 0) == 0 && o.find(':') != std::string::npos)
        opt.pairs = {{o.substr(6, o.find(':') - 6), o.substr(o.find(':') + 1)}};
    if (o == "match") opt.match = "num_features";
    in.by_num_features = o == "features";
    try {
        const favor::CompareResult r = favor::compare_tables(in, opt);
        (void)favor::to_csv(r.comparisons);
        (void)favor::to_markdown(r.comparisons);
        (void)favor::ranking_markdown(r.ranking, r.cell_columns);
    } catch (const favor::Error& e) {
        // Every refusal names an input file or an option.
        const std::string msg = e.what();
        if (msg.rfind("in/", 0) != 0 && msg.rfind("--", 0) != 0 && msg.rfind("compare: ", 0) != 0) std::abort();
    }
    return 0;
}
