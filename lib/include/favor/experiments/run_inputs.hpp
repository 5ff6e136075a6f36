#pragma once
// The files a run reads (docs/design.md section 6, "Resume" and "The output directory").
#include <string>
#include <utility>
#include <vector>

#include "favor/experiments/config.hpp"

namespace favor {

// Every file the config reads, as (field, path): inputs.q, inputs.k, inputs.v (the file of a
// PATH:NAME reference), inputs.grad, pairs.q, pairs.k, in that order, those that are set. The
// journal's identity hashes each; a run refuses each inside its output directory.
std::vector<std::pair<std::string, std::string>> run_input_files(const Config& cfg);

}  // namespace favor
