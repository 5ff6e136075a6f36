#pragma once
// `favor merge`: combines result directories (the shards of one run, or the runs of one
// sweep) into one result set, recomputing the summary from the merged per-trial rows. It is
// strict (docs/design.md section 6, "merge"): every input is checked against its own
// run.json, and anything that could mix or drop results is refused with one line naming the
// directory and the difference.
#include <optional>
#include <string>
#include <vector>

#include "favor/experiments/experiment.hpp"

namespace favor {

struct MergeOptions {
    // Merge an incomplete shard set anyway; run.json then says "partial": true and lists the
    // missing shards.
    bool allow_partial = false;
};

// One input as read from its directory (the fuzz target builds these from bytes).
struct MergeInput {
    std::string dir;                      // for messages
    std::string run_json;                 // run.json
    std::optional<std::string> errors;    // errors.csv (approximation)
    std::optional<std::string> summary;   // summary.csv
    std::optional<std::string> baselines; // baselines.csv (approximation with input_seeds)
};

// Rules: all inputs are approximation or kernel results of the same kind; inputs with equal
// configs (ignoring output_dir) form a shard set, which must be complete (shards 0..N-1 of
// one N, each once) unless allow_partial; configs of different sets may differ only in the
// grid lists (m, L, d, scale; kernel d, m, norm, angle) and in which variants they have (a
// variant name means one definition); each input's rows must be exactly the cells its
// run.json says it owns (shard K/N, cell count), every key and number well formed; no
// (cell, trial) may come from two inputs. Rows are ordered as an unsharded run orders them:
// variants in order of first appearance, then L, d, m, scale (kernel: d, m, norm, angle)
// ascending, then trial [, head]. Throws Error otherwise.
RunResult merge_inputs(const std::vector<MergeInput>& inputs, const MergeOptions& opt = {});

// Reads each directory (regular files only, all through one open handle of the directory, so
// a set swapped in meanwhile is never mixed with the one before), refuses a directory given
// twice and favor's own temporaries, then merge_inputs.
RunResult merge_results(const std::vector<std::string>& dirs, const MergeOptions& opt = {});

}  // namespace favor
