#pragma once
// Q, K, V tensors from .npy files, split into (batch, head) slices, and attention outputs
// written back with the same leading shape. Accepted shapes: (L, d), (H, L, d), (B, H, L, d).
#include <string>
#include <vector>

#include "favor/tensor.hpp"

namespace favor {

struct HeadTensors {
    std::vector<std::size_t> lead;   // leading dimensions: (), (H) or (B, H)
    std::vector<Mat<double>> q, k, v;   // one (L, d) / (Lk, d) / (Lk, dv) matrix per head
    std::size_t L() const { return q.empty() ? 0 : q[0].shape(0); }
    std::size_t d() const { return q.empty() ? 0 : q[0].shape(1); }
};

// Throws Error "PATH: shape ... has rank r; expected (L, d), (H, L, d) or (B, H, L, d)" or "...
// has an empty dimension" unless `shape` is one of those, every dimension > 0.
void check_rank(const std::vector<std::size_t>& shape, const std::string& path);

// The sizes of a q, k, v triple.
struct QkvShapes {
    std::vector<std::size_t> lead;
    std::size_t heads = 0, L = 0, Lk = 0, d = 0, dv = 0;
};
// Checks the shapes of q, k, v (as load_qkv does, but not the values) and returns their sizes.
QkvShapes check_qkv_shapes(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                           const std::vector<std::size_t>& v, const std::string& q_path, const std::string& k_path,
                           const std::string& v_path, bool causal);
// The same from the files' headers only (existence, regular file, header, data size, shapes).
QkvShapes read_qkv_shapes(const std::string& q, const std::string& k, const std::string& v, bool causal);

// Loads and checks q, k, v: rank 2 to 4, the same leading dimensions, q and k the same
// width d, k and v the same length, q and k the same length when `causal`, every entry
// finite. Messages name the offending file. Throws Error.
HeadTensors load_qkv(const std::string& q, const std::string& k, const std::string& v, bool causal);

// Writes per-head (L, c) matrices as one array of shape lead + (L, c).
// heads_npy_bytes: the file's bytes (for a set written together, e.g. `favor gen`'s).
std::string heads_npy_bytes(const std::string& path, const std::vector<std::size_t>& lead,
                            const std::vector<Mat<double>>& heads, bool as_float32);
void save_heads(const std::string& path, const std::vector<std::size_t>& lead,
                const std::vector<Mat<double>>& heads, bool as_float32);

}  // namespace favor
