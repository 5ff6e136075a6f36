// Tensors from strided memory (array_view.hpp): the checks and messages of tensor_io.cpp's
// file readers, with the array's name where those name the file.
#include "favor/runs/array_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"
#include "favor/io/tensor_layout.hpp"
#include "favor/runs/apply_grad.hpp"

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

// n entries of type S, `step` bytes apart, into dst as D (contiguous rows: step is sizeof(S),
// a loop the compiler vectorises). Returns whether one of them is NaN or Inf (exponent bits
// all set: an integer test that vectorises too), tested before any narrowing.
template <class S, class D>
bool convert(const char* p, std::ptrdiff_t step, std::size_t n, D* dst) {
    using Bits = std::conditional_t<sizeof(S) == 4, std::uint32_t, std::uint64_t>;
    constexpr Bits exp_mask = sizeof(S) == 4 ? Bits(0x7F800000u) : Bits(0x7FF0000000000000ull);
    auto loop = [&](std::ptrdiff_t st) {
        Bits bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
            S x;
            std::memcpy(&x, p + std::ptrdiff_t(i) * st, sizeof x);
            dst[i] = D(x);
            Bits b;
            std::memcpy(&b, &x, sizeof b);
            bad |= Bits((b & exp_mask) == exp_mask);
        }
        return bad != 0;
    };
    return step == std::ptrdiff_t(sizeof(S)) ? loop(std::ptrdiff_t(sizeof(S))) : loop(step);
}

double entry(const char* p, bool f32) {
    float f;
    double d;
    if (f32) return std::memcpy(&f, p, sizeof f), double(f);
    return std::memcpy(&d, p, sizeof d), d;
}

// The heads of a checked-rank array as T; `bad(flat index, value)` throws for the first
// non-finite entry.
template <class T, class Bad>
std::vector<Mat<T>> split(const ArrayView& a, Bad bad) {
    const std::size_t r = a.shape.size(), rows = a.shape[r - 2], cols = a.shape.back();
    const std::ptrdiff_t step = a.strides[r - 1];
    const auto* base = static_cast<const char*>(a.data);
    std::vector<Mat<T>> out;
    const std::vector<std::ptrdiff_t> heads = head_offsets(a);
    for (std::size_t h = 0; h < heads.size(); ++h) {
        Mat<T> m = Mat<T>::from_shape({rows, cols});
        for (std::size_t i = 0; i < rows; ++i) {
            const char* p = base + heads[h] + std::ptrdiff_t(i) * a.strides[r - 2];
            if (a.f32 ? convert<float>(p, step, cols, m.data() + i * cols) : convert<double>(p, step, cols, m.data() + i * cols))
                for (std::size_t c = 0; c < cols; ++c)
                    if (const double x = entry(p + std::ptrdiff_t(c) * step, a.f32); !std::isfinite(x))
                        bad((h * rows + i) * cols + c, x);
        }
        out.push_back(std::move(m));
    }
    return out;
}

// The throwers for a first non-finite entry: of an input (heads_of_array_as), of an upstream
// gradient (load_upstream's message).
auto input_entry(const ArrayView& a, const std::string& name) {
    return [&](std::size_t i, double x) {
        throw Error(name + ": " + entry_position(a.shape, i) + " is " + (std::isnan(x) ? "NaN" : "Inf") +
                    " (inputs must be finite)");
    };
}
auto upstream_entry(const ArrayView& g, const std::string& name) {
    return [&](std::size_t i, double) {
        throw Error("apply: --grad: " + name + " " + entry_position(g.shape, i) + " is not finite");
    };
}

// head_views_of_array with `bad` for the first non-finite entry (rank checked by the caller).
template <class T, class Bad>
HeadViews<T> views_of(const ArrayView& a, Bad bad, int threads) {
    const std::size_t r = a.shape.size(), rows = a.shape[r - 2], cols = a.shape.back();
    const bool in_place = a.f32 == std::is_same_v<T, float> && a.strides[r - 1] == std::ptrdiff_t(sizeof(T)) &&
                          (rows == 1 || a.strides[r - 2] == std::ptrdiff_t(cols * sizeof(T)));
    HeadViews<T> v;
    if (!in_place) {
        v.owned = split<T>(a, bad);
        v.heads.assign(v.owned.begin(), v.owned.end());
        return v;
    }
    const auto* base = static_cast<const char*>(a.data);
    for (std::ptrdiff_t offset : head_offsets(a)) {
        const T* p = reinterpret_cast<const T*>(base + offset);
        if (!all_finite(p, rows * cols, threads)) {   // the first bad entry, named as split names it
            split<T>(a, bad);
            throw std::logic_error("head_views_of_array: a non-finite entry the conversion accepted");
        }
        v.heads.emplace_back(p, rows, cols);
    }
    return v;
}
}  // namespace

template <class T>
std::vector<Mat<T>> heads_of_array_as(const ArrayView& a, const std::string& name) {
    check_rank(a.shape, name);
    return split<T>(a, input_entry(a, name));
}
template std::vector<Mat<float>> heads_of_array_as(const ArrayView&, const std::string&);
template std::vector<Mat<double>> heads_of_array_as(const ArrayView&, const std::string&);

template <class T>
bool all_finite(const T* p, std::size_t n, int threads) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr Bits mask = sizeof(T) == 4 ? Bits(0x7F800000u) : Bits(0x7FF0000000000000ull);
    constexpr std::size_t chunk = std::size_t(1) << 18;   // entries per parallel item
    const std::size_t nchunks = (n + chunk - 1) / chunk;
    std::vector<char> ok(nchunks, 1);
    parallel_for(nchunks, threads, [&](std::size_t c) {
        Bits bad = 0;
        for (std::size_t i = c * chunk, end = std::min(n, i + chunk); i < end; ++i) {
            Bits b;
            std::memcpy(&b, p + i, sizeof b);
            bad |= Bits((b & mask) == mask);
        }
        ok[c] = bad == 0;
    });
    return std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
}
template bool all_finite(const float*, std::size_t, int);
template bool all_finite(const double*, std::size_t, int);

template <class T>
HeadViews<T> head_views_of_array(const ArrayView& a, const std::string& name, int threads) {
    check_rank(a.shape, name);
    return views_of<T>(a, input_entry(a, name), threads);
}
template HeadViews<float> head_views_of_array(const ArrayView&, const std::string&, int);
template HeadViews<double> head_views_of_array(const ArrayView&, const std::string&, int);

ArrayView canonical_view(const ArrayView& a, const std::string& layout, const std::string& name) {
    if (layout.empty()) return a;
    ArrayView out = a;
    out.shape = canonical_shape(a.shape, layout, name);   // the rank checked, the message the files'
    out.strides.clear();
    for (std::size_t i : layout_permutation(layout)) out.strides.push_back(a.strides[i]);
    return out;
}

std::vector<Mat<double>> heads_of_array(const ArrayView& a, const std::string& name) {
    return heads_of_array_as<double>(a, name);
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
    check_upstream_shape(name, g.shape, in.lead, in.L(), dv, "apply: --grad");
    return split<double>(g, upstream_entry(g, name));
}

template <class T>
HeadViews<T> upstream_views_of_array(const ArrayView& g, const std::vector<std::size_t>& lead, std::size_t L,
                                     std::size_t dv, const std::string& name, int threads) {
    check_upstream_shape(name, g.shape, lead, L, dv, "apply: --grad");
    return views_of<T>(g, upstream_entry(g, name), threads);
}
template HeadViews<float> upstream_views_of_array(const ArrayView&, const std::vector<std::size_t>&, std::size_t,
                                                  std::size_t, const std::string&, int);
template HeadViews<double> upstream_views_of_array(const ArrayView&, const std::vector<std::size_t>&, std::size_t,
                                                   std::size_t, const std::string&, int);

}  // namespace favor
