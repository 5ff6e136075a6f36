#pragma once
// The weights of a fitted feature map (hedgehog or t2r fitted to a capture's heads by
// scripts/fit_maps.py; docs/estimators.md "Fitted maps", docs/design.md section 5 "weights"):
// a .npz (or .safetensors) file with, per layer, arrays <layer>.q_A, <layer>.k_A (heads, d, w)
// and <layer>.q_b, <layer>.k_b (heads, w), and beside it a manifest <file>.json naming the
// kind of map and the capture each layer was fitted on.
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "favor/estimators/fields.hpp"

namespace favor {

struct FittedWeights {
    std::string ref;    // "PATH:LAYER" or "PATH:LAYER.headN", as written
    std::string kind;   // "hedgehog" or "t2r" (the manifest's)
    std::size_t heads = 0, d = 0, width = 0;   // A is d x width per head and side
    std::optional<std::size_t> head;   // the one head a ".headN" reference names
    // [0]: queries, [1]: keys; A (heads, d, width) and b (heads, width), row-major.
    std::array<std::vector<double>, 2> A, b;
    // The sha256 of the q file of the capture the layer was fitted on ("" for weights not
    // fitted to a capture: a fit's initial weights).
    std::string fitted_on_q_sha256;

    // Heads the inputs must have for these weights: 0 when one head is named (any input).
    std::size_t heads_required() const { return head ? 0 : heads; }
    // Which stored head serves input head h (h itself, or the named one).
    std::size_t stored_head(std::size_t h) const { return head ? *head : h; }
};

// Reads the weights a variant's "weights" names for a map of `kind`, failing at `where` with
// one line: no such file or array, a manifest of another kind, shapes that disagree, a
// non-finite value, a head past the stored ones.
std::shared_ptr<const FittedWeights> load_fitted_weights(const std::string& ref, const std::string& kind,
                                                         const Field& where);

}  // namespace favor
