// The axes of tensor files (tensor_layout.hpp): a layout's check and the permutation into
// favor's (B, H, L, D) order.
#include "favor/io/tensor_layout.hpp"

#include <algorithm>

#include "favor/core/error.hpp"

namespace favor {

namespace {
constexpr const char* kOrder = "BHLD";

// perm[j]: the file axis that becomes axis j of favor's order.
std::vector<std::size_t> permutation(const std::string& layout) {
    std::vector<std::size_t> perm;
    for (const char* c = kOrder; *c; ++c)
        if (const std::size_t i = layout.find(*c); i != std::string::npos) perm.push_back(i);
    return perm;
}
}  // namespace

std::vector<std::size_t> layout_permutation(const std::string& layout) { return permutation(layout); }

std::string layout_problem(const std::string& layout) {
    for (std::size_t i = 0; i < layout.size(); ++i) {
        if (std::string(kOrder).find(layout[i]) == std::string::npos)
            return "letters are B (batch), H (head), L (sequence), D (head dimension); got \"" + layout + "\"";
        if (layout.find(layout[i]) != i) return "axis " + std::string(1, layout[i]) + " twice in \"" + layout + "\"";
    }
    if (layout.find('L') == std::string::npos || layout.find('D') == std::string::npos)
        return "needs the axes L and D, got \"" + layout + "\"";
    return "";
}

std::string layout_axes(const std::string& layout) {
    std::string s = "(";
    for (std::size_t i = 0; i < layout.size(); ++i) s += (i ? ", " : "") + std::string(1, layout[i] == 'D' ? 'd' : layout[i]);
    return s + ")";
}

std::vector<std::size_t> canonical_shape(const std::vector<std::size_t>& shape, const std::string& layout,
                                         const std::string& name) {
    if (shape.size() != layout.size())
        throw Error(name + ": shape " + shape_str(shape) + " has rank " + std::to_string(shape.size()) + ", layout \"" +
                    layout + "\" " + layout_axes(layout) + " has " + std::to_string(layout.size()) + " axes");
    std::vector<std::size_t> out;
    for (std::size_t i : permutation(layout)) out.push_back(shape[i]);
    return out;
}

namespace {
// `a` with its axes reordered: axis j of the result is axis perm[j] of `a` (values in C order).
void permute_axes(NpyArray& a, const std::vector<std::size_t>& perm) {
    const std::size_t r = a.shape.size();
    std::vector<std::size_t> to(r);
    for (std::size_t j = 0; j < r; ++j) to[j] = a.shape[perm[j]];
    if (std::is_sorted(perm.begin(), perm.end())) {   // the identity: nothing moves
        a.shape = to;
        return;
    }
    std::vector<std::size_t> stride(r, 1);   // C-order strides of the source's axes
    for (std::size_t k = r; k-- > 1;) stride[k - 1] = stride[k] * a.shape[k];
    std::vector<double> out(a.data.size());
    std::vector<std::size_t> idx(r, 0);
    std::size_t from = 0;   // offset in the source of the output index idx
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = a.data[from];
        for (std::size_t j = r; j-- > 0;) {   // odometer over the output, last axis fastest
            from += stride[perm[j]];
            if (++idx[j] < to[j]) break;
            from -= stride[perm[j]] * to[j];
            idx[j] = 0;
        }
    }
    a.data = std::move(out);
    a.shape = to;
}
}  // namespace

void to_canonical(NpyArray& a, const std::string& layout, const std::string& name) {
    canonical_shape(a.shape, layout, name);   // the rank checked
    permute_axes(a, permutation(layout));
}

namespace {
// inverse[i]: the axis of favor's order that becomes axis i of the layout.
std::vector<std::size_t> inverse_permutation(const std::string& layout) {
    const std::vector<std::size_t> perm = permutation(layout);
    std::vector<std::size_t> inverse(perm.size());
    for (std::size_t j = 0; j < perm.size(); ++j) inverse[perm[j]] = j;
    return inverse;
}
}  // namespace

void from_canonical(NpyArray& a, const std::string& layout) { permute_axes(a, inverse_permutation(layout)); }

std::vector<std::size_t> layout_shape(const std::vector<std::size_t>& canonical, const std::string& layout) {
    std::vector<std::size_t> out;
    for (std::size_t i : inverse_permutation(layout)) out.push_back(canonical[i]);
    return out;
}

}  // namespace favor
