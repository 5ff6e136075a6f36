#pragma once
// Q, K, V tensors from tensor files (.npy, .npz, .safetensors: tensor_file.hpp), split into
// (batch, head) slices, and attention outputs written back (.npy) with the same leading shape.
// Accepted shapes: (L, d), (H, L, d), (B, H, L, d), or any order of those axes named by a
// layout (tensor_layout.hpp).
#include <string>
#include <vector>

#include "favor/core/tensor.hpp"

namespace favor {

struct HeadTensors {
    std::vector<std::size_t> lead;   // leading dimensions: (), (H) or (B, H)
    std::vector<Mat<double>> q, k, v;   // one (L, d) / (Lk, d) / (Lk, dv) matrix per head
    std::size_t file_L = 0;             // q's rows in its file (L, unless a row limit cut them)
    std::size_t file_Lk = 0;            // k's rows in its file
    std::size_t L() const { return q.empty() ? 0 : q[0].shape(0); }
    std::size_t d() const { return q.empty() ? 0 : q[0].shape(1); }
};

// The keys (and values) a problem of L query rows attends to, from files whose q has file_L
// rows and k file_Lk (docs/design.md section 5, inputs.L): self-attention files (file_Lk ==
// file_L) their first L rows, like the queries; other files (cross-attention, a cache) all
// file_Lk, whatever L.
std::size_t key_rows(std::size_t file_L, std::size_t file_Lk, std::size_t L);

// Throws Error "PATH: shape ... has rank r; expected (L, d), (H, L, d) or (B, H, L, d)" or "...
// has an empty dimension" unless `shape` is one of those, every dimension > 0.
void check_rank(const std::vector<std::size_t>& shape, const std::string& path);

// Where the C-order entry `flat` of a tensor of `shape` (in favor's order, after the layout)
// sits, for the readers' messages: "entry (b, h, l, d) = (0, 1, 7, 2)" ("(h, l, d)" at rank 3,
// "(l, d)" at rank 2; other ranks by index: "entry (i0, i1, i2) = (...)").
std::string entry_position(const std::vector<std::size_t>& shape, std::size_t flat);

// The sizes of a q, k, v triple (after the layout and the row limit).
// The heads a fitted map's weights are indexed by, for inputs of leading shape `lead` ((), (H)
// or (B, H)): H, and 1 for a single matrix. Input head h of the flattened list (batch element
// h / H) uses stored head h % H: every batch element's head h is the same model head (apply
// and run alike).
inline std::size_t weight_heads(const std::vector<std::size_t>& lead) { return lead.empty() ? 1 : lead.back(); }

struct QkvShapes {
    std::vector<std::size_t> lead;
    std::size_t heads = 0, L = 0, Lk = 0, d = 0, dv = 0;
    std::size_t file_L = 0, file_Lk = 0; // q's and k's rows in their files
    std::vector<std::string> warnings;   // one line each (an L below d)
};

// Where q, k, v come from and how they are read (a config's inputs, or apply's flags).
struct QkvSource {
    std::string q, k, v;          // PATH or PATH:NAME; a .npz / .safetensors path alone means its array q, k, v
    std::string layout;           // the files' axes ("BLHD"); empty: by rank (L, d), (H, L, d), (B, H, L, d)
    std::string layout_field;     // names the layout setting in messages ("inputs.layout", "--layout")
    std::size_t rows = 0;         // the first `rows` rows of q (inputs.L), and of k, v as key_rows says; 0: all
    std::string rows_field;       // names the row limit in errors
    bool causal = false;
};
// Checks the shapes of q, k, v (as load_qkv does, but not the values) and returns their sizes.
QkvShapes check_qkv_shapes(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                           const std::vector<std::size_t>& v, const std::string& q_path, const std::string& k_path,
                           const std::string& v_path, bool causal);
// The same from the files' headers only (existence, regular file, header, data size, shapes),
// with the layout and the row limit applied (the files' shapes checked together first, so
// causal files of unequal lengths are refused whatever `rows`): an Error when q has fewer rows than `rows`,
// or when, with no layout given, a rank 3 or 4 tensor would have fewer rows L than heads H
// (a (B, L, H, d) tensor read as (B, H, L, d)); a warning when L < d.
QkvShapes read_qkv_shapes(const QkvSource& src);
// read_qkv_shapes' checks on shapes given in favor's order (a layout already applied; src's
// layout and layout_field name it in the messages), the tensors named qn, kn, vn.
QkvShapes check_source_shapes(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                              const std::vector<std::size_t>& v, const std::string& qn, const std::string& kn,
                              const std::string& vn, const QkvSource& src);

// Loads and checks q, k, v: rank 2 to 4, the same leading dimensions, q and k the same
// width d, k and v the same length, q and k the same length when `causal`, every entry
// finite, and the checks of read_qkv_shapes. Messages name the offending file. Throws Error.
HeadTensors load_qkv(const QkvSource& src);
HeadTensors load_qkv(const std::string& q, const std::string& k, const std::string& v, bool causal);

// An upstream gradient G = dLoss/dOut from `path`, one (L, dv) matrix per head, checked to
// have the output's shape lead + (L, dv) and finite entries; errors read
// "<who>: <path> has shape ..., expected ... (the output's shape)" / "<who>: <path> entry N is
// not finite" (who: "apply: --grad", "<config>: inputs.grad"). check_upstream_header checks
// the shape from the header alone; check_upstream_shape a shape given (a numpy array's).
void check_upstream_shape(const std::string& path, const std::vector<std::size_t>& shape,
                          std::vector<std::size_t> lead, std::size_t L, std::size_t dv, const std::string& who);
// `layout` (non-empty): G's file holds these axes, as q, k, v do (permuted when read).
std::vector<Mat<double>> load_upstream(const std::string& path, const std::vector<std::size_t>& lead, std::size_t L,
                                       std::size_t dv, const std::string& who, const std::string& layout = "");
void check_upstream_header(const std::string& path, std::vector<std::size_t> lead, std::size_t L, std::size_t dv,
                           const std::string& who, const std::string& layout = "");

// Writes per-head (L, c) matrices as one array of shape lead + (L, c), or with `layout` that
// array's axes in the layout's order (from_canonical: `apply --layout BLHD` writes (B, L, H, c)).
// heads_npy_bytes: the file's bytes (for a set written together, e.g. `favor gen`'s).
std::string heads_npy_bytes(const std::string& path, const std::vector<std::size_t>& lead,
                            const std::vector<Mat<double>>& heads, bool as_float32, const std::string& layout = "");
void save_heads(const std::string& path, const std::vector<std::size_t>& lead,
                const std::vector<Mat<double>>& heads, bool as_float32, const std::string& layout = "");

}  // namespace favor
