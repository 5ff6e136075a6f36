// Tensors from strided memory (array_view.hpp): the checks and messages of tensor_io.cpp's
// file readers, with the array's name where those name the file.
#include "favor/array_view.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "favor/apply_grad.hpp"
#include "favor/error.hpp"

namespace favor {

namespace {
// The offsets (bytes) of the heads of `a`, C order over the leading dimensions.
std::vector<std::ptrdiff_t> head_offsets(const ArrayView& a) {
    std::vector<std::ptrdiff_t> offsets{0};
    for (std::size_t dim = 0; dim + 2 < a.shape.size(); ++dim) {
        std::vector<std::ptrdiff_t> next;
        for (std::ptrdiff_t o : offsets)
            for (std::size_t j = 0; j < a.shape[dim]; ++j) next.push_back(o + std::ptrdiff_t(j) * a.strides[dim]);
        offsets = std::move(next);
    }
    return offsets;
}

// n entries of type S, `step` bytes apart, into dst as double (contiguous rows: step is
// sizeof(S), a loop the compiler vectorises). Returns whether one is NaN or Inf (exponent
// bits all set: an integer test that vectorises too).
template <class S>
bool convert(const char* p, std::ptrdiff_t step, std::size_t n, double* dst) {
    auto loop = [&](std::ptrdiff_t st) {
        std::uint64_t bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
            S x;
            std::memcpy(&x, p + std::ptrdiff_t(i) * st, sizeof x);
            dst[i] = double(x);
            std::uint64_t bits;
            std::memcpy(&bits, &dst[i], sizeof bits);
            bad |= std::uint64_t(((bits >> 52) & 0x7ff) == 0x7ff);
        }
        return bad != 0;
    };
    return step == std::ptrdiff_t(sizeof(S)) ? loop(std::ptrdiff_t(sizeof(S))) : loop(step);
}

// The heads of a checked-rank array; `bad(flat index, value)` throws for the first non-finite entry.
template <class Bad>
std::vector<Mat<double>> split(const ArrayView& a, Bad bad) {
    const std::size_t r = a.shape.size(), rows = a.shape[r - 2], cols = a.shape.back();
    const auto* base = static_cast<const char*>(a.data);
    std::vector<Mat<double>> out;
    const std::vector<std::ptrdiff_t> heads = head_offsets(a);
    for (std::size_t h = 0; h < heads.size(); ++h) {
        Mat<double> m = Mat<double>::from_shape({rows, cols});
        for (std::size_t i = 0; i < rows; ++i) {
            const char* p = base + heads[h] + std::ptrdiff_t(i) * a.strides[r - 2];
            double* dst = m.data() + i * cols;
            if (a.f32 ? convert<float>(p, a.strides[r - 1], cols, dst) : convert<double>(p, a.strides[r - 1], cols, dst))
                for (std::size_t c = 0; c < cols; ++c)
                    if (!std::isfinite(dst[c])) bad((h * rows + i) * cols + c, dst[c]);
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
