#pragma once
// The axes of a tensor file (docs/design.md section 5, `inputs.layout`): a string of distinct
// letters from B (batch), H (head), L (sequence), D (head dimension), L and D required, in the
// file's order, e.g. "BLHD" for a (B, L, H, d) tensor (before PyTorch's transpose(1, 2)).
// favor works in the order (B, H, L, D) of the axes present; a tensor in another layout is
// permuted to it when read.
#include <string>
#include <vector>

#include "favor/io/npy.hpp"

namespace favor {

// "" when `layout` is a valid layout, else what is wrong with it.
std::string layout_problem(const std::string& layout);

// The shape in favor's order; an Error naming `name` when the rank is not the layout's length.
std::vector<std::size_t> canonical_shape(const std::vector<std::size_t>& shape, const std::string& layout,
                                         const std::string& name);
// Permutes the values (C order) and the shape of `a` into favor's order.
void to_canonical(NpyArray& a, const std::string& layout, const std::string& name);
// The inverse: a tensor in favor's order (the layout's axes in B, H, L, D order) permuted into
// the layout's order (what `apply --layout` writes its outputs in). The rank must match.
void from_canonical(NpyArray& a, const std::string& layout);
// A shape in favor's order as the layout orders it (the rank must match).
std::vector<std::size_t> layout_shape(const std::vector<std::size_t>& canonical, const std::string& layout);

// perm[j]: the axis of a `layout` tensor that becomes axis j of favor's order (B, H, L, D).
std::vector<std::size_t> layout_permutation(const std::string& layout);

// "(B, L, H, d)": the layout's axes as a shape is written.
std::string layout_axes(const std::string& layout);

}  // namespace favor
