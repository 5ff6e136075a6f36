// Tensors from strided memory (array_view.hpp): the checks and messages of tensor_io.cpp's
// file readers, with the array's name where those name the file.
#include "favor/array_view.hpp"

#include <cmath>
#include <cstring>

#include "favor/apply_grad.hpp"
#include "favor/error.hpp"

namespace favor {

namespace {
// Entry (row, col) of head h (C order over the leading dimensions).
struct Strided {
    const char* base;
    bool f32;
    std::ptrdiff_t row, col;
    std::vector<std::ptrdiff_t> head_offsets;
    double at(std::size_t h, std::size_t i, std::size_t c) const {
        const char* p = base + head_offsets[h] + std::ptrdiff_t(i) * row + std::ptrdiff_t(c) * col;
        float f;
        double d;
        if (f32) return std::memcpy(&f, p, sizeof f), double(f);
        return std::memcpy(&d, p, sizeof d), d;
    }
};

Strided strided(const ArrayView& a) {
    const std::size_t r = a.shape.size();
    Strided s{static_cast<const char*>(a.data), a.f32, a.strides[r - 2], a.strides[r - 1], {0}};
    for (std::size_t dim = 0; dim + 2 < r; ++dim) {   // offsets of the heads, C order
        std::vector<std::ptrdiff_t> next;
        for (std::ptrdiff_t o : s.head_offsets)
            for (std::size_t j = 0; j < a.shape[dim]; ++j) next.push_back(o + std::ptrdiff_t(j) * a.strides[dim]);
        s.head_offsets = std::move(next);
    }
    return s;
}

// The heads of a checked-rank array; `bad(flat index, value)` throws for a non-finite entry.
template <class Bad>
std::vector<Mat<double>> split(const ArrayView& a, Bad bad) {
    const Strided s = strided(a);
    const std::size_t rows = a.shape[a.shape.size() - 2], cols = a.shape.back();
    std::vector<Mat<double>> out;
    for (std::size_t h = 0; h < s.head_offsets.size(); ++h) {
        Mat<double> m = Mat<double>::from_shape({rows, cols});
        double* dst = m.data();
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t c = 0; c < cols; ++c) {
                const double x = s.at(h, i, c);
                if (!std::isfinite(x)) bad((h * rows + i) * cols + c, x);
                *dst++ = x;
            }
        out.push_back(std::move(m));
    }
    return out;
}
}  // namespace

std::vector<Mat<double>> heads_of_array(const ArrayView& a, const std::string& name) {
    check_rank(a.shape, name);
    return split(a, [&](std::size_t i, double x) {
        throw Error(name + ": entry " + std::to_string(i) + " is " + (std::isnan(x) ? "NaN" : "Inf") +
                    " (inputs must be finite)");
    });
}

HeadTensors heads_of_arrays(const ArrayView& q, const ArrayView& k, const ArrayView& v, bool causal) {
    HeadTensors t;
    t.q = heads_of_array(q, "q");
    t.k = heads_of_array(k, "k");
    t.v = heads_of_array(v, "v");
    t.lead = check_qkv_shapes(q.shape, k.shape, v.shape, "q", "k", "v", causal).lead;
    return t;
}

std::vector<Mat<double>> upstream_of_array(const ArrayView& g, const HeadTensors& in, std::size_t dv,
                                           const std::string& name) {
    std::vector<std::size_t> want = in.lead;
    want.insert(want.end(), {in.L(), dv});
    check_upstream_shape(name, g.shape, want);
    return split(g, [&](std::size_t i, double) {
        throw Error("apply: --grad: " + name + " entry " + std::to_string(i) + " is not finite");
    });
}

}  // namespace favor
