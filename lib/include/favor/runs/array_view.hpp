#pragma once
// Tensors given in memory rather than as .npy files (the Python module's numpy arrays): a
// strided view of float32 or float64 entries, checked as the .npy inputs of `favor apply`
// are (tensor_io.hpp) and split into the per-head matrices the library computes on.
#include <cstddef>
#include <string>
#include <vector>

#include "favor/io/tensor_io.hpp"

namespace favor {

// An array in memory: shape and strides (in bytes, any sign, any order: C, Fortran or a
// slice) of `data`, whose entries are float (f32) or double.
struct ArrayView {
    const void* data = nullptr;
    bool f32 = false;
    std::vector<std::size_t> shape;
    std::vector<std::ptrdiff_t> strides;
};

// `a` with its axes in favor's order (B, H, L, D) when they are in `layout`'s order
// (tensor_layout.hpp; "" leaves it as it is): shape and strides permuted, no copy. An Error
// naming `name` when the rank is not the layout's length (canonical_shape's message).
ArrayView canonical_view(const ArrayView& a, const std::string& layout, const std::string& name);

// The heads of `a` (rank 2 to 4: (L, d), (H, L, d), (B, H, L, d)) as (L, d) float64 matrices,
// read straight from the strided memory (one pass, no intermediate copy). Throws Error
// "NAME: ..." with load_qkv's messages (rank, empty dimension, first non-finite entry).
std::vector<Mat<double>> heads_of_array(const ArrayView& a, const std::string& name);

// The same converted straight to T (float or double: apply_head's compute type), the
// finiteness tested on the values as given.
template <class T>
std::vector<Mat<T>> heads_of_array_as(const ArrayView& a, const std::string& name);

// Whether the n entries at p are all finite: an exponent-bits test without an early exit, so
// the loop vectorises (float or double); in chunks on up to `threads` threads (a scan of
// 12 MB is ~4% of a 13 ms attention call on one thread).
template <class T>
bool all_finite(const T* p, std::size_t n, int threads = 1);

// The heads of `a` as T, read in place where the layout allows and converted otherwise:
// `heads` views the array's own memory when its entries are T and each head's rows are
// C-contiguous (the caller keeps the array alive while it uses them), else views `owned`,
// heads_of_array_as' copies. The same checks and messages as heads_of_array_as.
template <class T>
struct HeadViews {
    std::vector<Mat<T>> owned;
    std::vector<MatView<T>> heads;
};
template <class T>
HeadViews<T> head_views_of_array(const ArrayView& a, const std::string& name, int threads = 1);

// q, k, v as load_qkv reads and checks them from files, with the names "q", "k", "v" where
// load_qkv names the files.
HeadTensors heads_of_arrays(const ArrayView& q, const ArrayView& k, const ArrayView& v, bool causal);

// An upstream gradient G given in memory, as load_upstream reads one from a file: shape
// in.lead + (L, dv), finite; one matrix per head. Messages name it `name` ("g").
std::vector<Mat<double>> upstream_of_array(const ArrayView& g, const HeadTensors& in, std::size_t dv,
                                           const std::string& name);
// The same (the checks and messages) as T, read in place where the layout allows
// (head_views_of_array's rule): favor.torch's backward from a saved forward.
template <class T>
HeadViews<T> upstream_views_of_array(const ArrayView& g, const std::vector<std::size_t>& lead, std::size_t L,
                                     std::size_t dv, const std::string& name, int threads = 1);

}  // namespace favor
