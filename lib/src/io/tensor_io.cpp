#include "favor/io/tensor_io.hpp"

#include <algorithm>
#include <cmath>

#include "favor/core/error.hpp"
#include "favor/io/files.hpp"
#include "favor/io/npy.hpp"
#include "favor/io/tensor_file.hpp"
#include "favor/io/tensor_layout.hpp"

namespace favor {

std::size_t key_rows(std::size_t file_L, std::size_t file_Lk, std::size_t L) { return file_Lk == file_L ? L : file_Lk; }

void check_rank(const std::vector<std::size_t>& shape, const std::string& path) {
    if (shape.size() < 2 || shape.size() > 4)
        throw Error(path + ": shape " + shape_str(shape) + " has rank " + std::to_string(shape.size()) +
                    "; expected (L, d), (H, L, d) or (B, H, L, d)");
    for (std::size_t s : shape)
        if (s == 0) throw Error(path + ": shape " + shape_str(shape) + " has an empty dimension");
}

std::string entry_position(const std::vector<std::size_t>& shape, std::size_t flat) {
    const std::size_t r = shape.size();
    const char* const axes[] = {"b", "h", "l", "d"};
    std::vector<std::size_t> at(r);
    for (std::size_t i = r; i-- > 0;) at[i] = flat % shape[i], flat /= shape[i];
    std::string names, values;
    for (std::size_t i = 0; i < r; ++i) {
        const std::string sep = i ? ", " : "";
        names += sep + (r >= 2 && r <= 4 ? std::string(axes[4 - r + i]) : "i" + std::to_string(i));
        values += sep + std::to_string(at[i]);
    }
    return "entry (" + names + ") = (" + values + ")";
}

namespace {

// The file's shape in favor's order (the layout's permutation; by rank without one).
std::vector<std::size_t> canonical(const std::vector<std::size_t>& shape, const QkvSource& s, const std::string& name) {
    return s.layout.empty() ? shape : canonical_shape(shape, s.layout, name);
}

// One tensor read whole, in favor's order, every entry finite.
NpyArray load_checked(const TensorRef& ref, const QkvSource& s) {
    NpyArray a = read_tensor(ref);
    if (!s.layout.empty()) to_canonical(a, s.layout, ref.name());
    check_rank(a.shape, ref.name());
    if (const auto i = first_nonfinite(a))
        throw Error(ref.name() + ": " + entry_position(a.shape, *i) + " is " + (std::isnan(a.data[*i]) ? "NaN" : "Inf") +
                    " (inputs must be finite)");
    return a;
}

// The (rows, cols) matrix of each head: its first `rows` rows (0: all).
std::vector<Mat<double>> split_heads(const NpyArray& a, std::size_t keep) {
    const std::size_t rows = a.shape[a.shape.size() - 2], cols = a.shape.back();
    const std::size_t used = keep ? std::min(keep, rows) : rows;
    const std::size_t heads = a.data.size() / (rows * cols);
    std::vector<Mat<double>> out;
    for (std::size_t h = 0; h < heads; ++h) {
        Mat<double> m = Mat<double>::from_shape({used, cols});
        const auto first = a.data.begin() + std::ptrdiff_t(h * rows * cols);
        std::copy(first, first + std::ptrdiff_t(used * cols), m.data());
        out.push_back(std::move(m));
    }
    return out;
}

// "(B, H, L, d)": how a tensor of this rank is read without a layout, or the layout's axes.
std::string reading(std::size_t rank, const QkvSource& s) {
    if (!s.layout.empty()) return layout_axes(s.layout);
    return rank == 2 ? "(L, d)" : rank == 3 ? "(H, L, d)" : "(B, H, L, d)";
}

// Shapes in favor's order, checked together: ranks, no L < H without a layout (the silent
// misreading of a (B, L, H, d) tensor), the row limit, then check_qkv_shapes; a warning for L < d.
QkvShapes check_source(std::vector<std::size_t> q, std::vector<std::size_t> k, std::vector<std::size_t> v,
                       const std::string& qn, const std::string& kn, const std::string& vn, const QkvSource& s) {
    check_rank(q, qn);
    check_rank(k, kn);
    check_rank(v, vn);
    const std::size_t r = q.size(), file_L = q[r - 2], file_Lk = k[k.size() - 2];
    if (s.layout.empty() && r >= 3 && file_L < q[r - 3])
        throw Error(qn + ": shape " + shape_str(q) + " read as " + reading(r, s) + " gives " + std::to_string(q[r - 3]) +
                    " heads of L = " + std::to_string(file_L) + " rows, fewer rows than heads: if the file is " +
                    (r == 4 ? "(B, L, H, d) (PyTorch's layout before .transpose(1, 2)), set " + s.layout_field + " to \"BLHD\""
                            : "(L, H, d), set " + s.layout_field + " to \"LHD\"") +
                    "; if it is " + reading(r, s) + ", set it to \"" + (r == 4 ? "BHLD" : "HLD") + "\"");
    // The files' shapes together (causal: q and k of one length in their files, whatever the
    // row limit), then the limit: q's first rows, and k's and v's as key_rows says.
    QkvShapes out = check_qkv_shapes(q, k, v, qn, kn, vn, s.causal);
    out.file_L = file_L;
    out.file_Lk = file_Lk;
    if (s.rows) {
        if (file_L < s.rows)
            throw Error(s.rows_field + ": " + std::to_string(s.rows) + " is more than the " + std::to_string(file_L) +
                        " rows (L) of " + qn + " (a tensor file gives its first L rows)");
        out.L = s.rows;
        out.Lk = key_rows(file_L, file_Lk, s.rows);
    }
    if (file_L < out.d)
        out.warnings.push_back(qn + ": L = " + std::to_string(file_L) + " rows, fewer than d = " + std::to_string(out.d) +
                               " (read as " + reading(r, s) + "); if that is not the file's layout, set " + s.layout_field);
    return out;
}

TensorRef ref_q(const QkvSource& s) { return parse_tensor_ref(s.q, "q"); }
TensorRef ref_k(const QkvSource& s) { return parse_tensor_ref(s.k, "k"); }
TensorRef ref_v(const QkvSource& s) { return parse_tensor_ref(s.v, "v"); }

QkvSource plain_source(const std::string& q, const std::string& k, const std::string& v, bool causal) {
    QkvSource s;
    s.q = q, s.k = k, s.v = v, s.causal = causal;
    s.layout_field = "the layout";
    return s;
}

}  // namespace

QkvShapes check_qkv_shapes(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                           const std::vector<std::size_t>& v, const std::string& qp, const std::string& kp,
                           const std::string& vp, bool causal) {
    check_rank(q, qp);
    check_rank(k, kp);
    check_rank(v, vp);
    QkvShapes s;
    s.lead.assign(q.begin(), q.end() - 2);
    auto check_lead = [&](const std::vector<std::size_t>& a, const std::string& p) {
        if (std::vector<std::size_t>(a.begin(), a.end() - 2) != s.lead)
            throw Error(p + ": shape " + shape_str(a) + " does not match the shape " + shape_str(q) + " of q (" + qp +
                        ") in the leading (batch, head) dimensions");
    };
    check_lead(k, kp);
    check_lead(v, vp);
    s.L = q[q.size() - 2];
    s.d = q.back();
    s.Lk = k[k.size() - 2];
    s.dv = v.back();
    s.heads = 1;
    for (std::size_t x : s.lead) s.heads *= x;
    if (k.back() != s.d)
        throw Error(kp + ": width d = " + std::to_string(k.back()) + " differs from d = " + std::to_string(s.d) + " of q (" +
                    qp + ")");
    if (v[v.size() - 2] != s.Lk)
        throw Error(vp + ": length " + std::to_string(v[v.size() - 2]) + " differs from the length " + std::to_string(s.Lk) +
                    " of k (" + kp + ")");
    if (causal && s.L != s.Lk)
        throw Error(kp + ": causal attention needs q and k of one length, got " + std::to_string(s.Lk) + " here and " +
                    std::to_string(s.L) + " in q (" + qp + ")");
    return s;
}

QkvShapes check_source_shapes(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                              const std::vector<std::size_t>& v, const std::string& qn, const std::string& kn,
                              const std::string& vn, const QkvSource& s) {
    return check_source(q, k, v, qn, kn, vn, s);
}

QkvShapes read_qkv_shapes(const QkvSource& s) {
    const TensorRef q = ref_q(s), k = ref_k(s), v = ref_v(s);
    // q, then k, then v (not as arguments of one call, whose order C++ leaves open)
    std::vector<std::size_t> qs = canonical(read_tensor_header(q).shape, s, q.name());
    std::vector<std::size_t> ks = canonical(read_tensor_header(k).shape, s, k.name());
    std::vector<std::size_t> vs = canonical(read_tensor_header(v).shape, s, v.name());
    return check_source(std::move(qs), std::move(ks), std::move(vs), q.name(), k.name(), v.name(), s);
}

HeadTensors load_qkv(const QkvSource& s) {
    // Each file read and checked (header, data, finite values) in turn, then the shapes
    // together; each array is split into heads (its first s.rows rows) before the next is read.
    const TensorRef q = ref_q(s), k = ref_k(s), v = ref_v(s);
    HeadTensors t;
    std::vector<std::size_t> qs, ks, vs;
    // q keeps its first s.rows rows; k and v (v's length checked against k's below) as many
    // as key_rows gives for k's file length.
    auto rows_of = [](const std::vector<std::size_t>& shape) { return shape[shape.size() - 2]; };
    auto load = [&s](const TensorRef& r, std::vector<std::size_t>& shape, auto keep) {
        const NpyArray a = load_checked(r, s);
        shape = a.shape;
        return split_heads(a, keep());
    };
    t.q = load(q, qs, [&] { return s.rows; });
    const auto keys = [&] { return s.rows ? key_rows(rows_of(qs), rows_of(ks), s.rows) : std::size_t(0); };
    t.k = load(k, ks, keys);
    t.v = load(v, vs, keys);
    const QkvShapes shapes = check_source(qs, ks, vs, q.name(), k.name(), v.name(), s);
    t.lead = shapes.lead;
    t.file_L = shapes.file_L;
    t.file_Lk = shapes.file_Lk;
    return t;
}

HeadTensors load_qkv(const std::string& qp, const std::string& kp, const std::string& vp, bool causal) {
    return load_qkv(plain_source(qp, kp, vp, causal));
}

void check_upstream_shape(const std::string& path, const std::vector<std::size_t>& shape,
                          std::vector<std::size_t> want, std::size_t L, std::size_t dv, const std::string& who) {
    want.insert(want.end(), {L, dv});
    if (shape != want)
        throw Error(who + ": " + path + " has shape " + shape_str(shape) + ", expected " + shape_str(want) +
                    " (the output's shape)");
}

void check_upstream_header(const std::string& path, std::vector<std::size_t> lead, std::size_t L, std::size_t dv,
                           const std::string& who, const std::string& layout) {
    const std::vector<std::size_t> shape = read_npy_header(path).shape;
    if (layout.empty()) return check_upstream_shape(path, shape, lead, L, dv, who);
    lead.insert(lead.end(), {L, dv});   // the output's shape, in the file's order
    if (shape.size() != lead.size() || shape != layout_shape(lead, layout))
        throw Error(who + ": " + path + " has shape " + shape_str(shape) + ", expected " +
                    (shape.size() == lead.size() ? shape_str(layout_shape(lead, layout)) : "rank " + std::to_string(lead.size())) +
                    " (the output's shape in the layout " + layout_axes(layout) + ")");
}

std::vector<Mat<double>> load_upstream(const std::string& path, const std::vector<std::size_t>& lead, std::size_t L,
                                       std::size_t dv, const std::string& who, const std::string& layout) {
    NpyArray a = read_npy(path);
    if (!layout.empty()) to_canonical(a, layout, who + ": " + path);
    check_upstream_shape(path, a.shape, lead, L, dv, who);
    if (const auto bad = first_nonfinite(a))
        throw Error(who + ": " + path + " " + entry_position(a.shape, *bad) + " is not finite");
    return split_heads(a, 0);   // every row
}

std::string heads_npy_bytes(const std::string& path, const std::vector<std::size_t>& lead,
                            const std::vector<Mat<double>>& heads, bool as_float32, const std::string& layout) {
    NpyArray a;
    a.shape = lead;
    a.shape.push_back(heads.empty() ? 0 : heads[0].shape(0));
    a.shape.push_back(heads.empty() ? 0 : heads[0].shape(1));
    for (const auto& h : heads) a.data.insert(a.data.end(), h.begin(), h.end());
    if (!layout.empty()) from_canonical(a, layout);
    return npy_bytes(path, a.shape, a.data.data(), as_float32);
}

void save_heads(const std::string& path, const std::vector<std::size_t>& lead,
                const std::vector<Mat<double>>& heads, bool as_float32, const std::string& layout) {
    write_file_atomic(path, heads_npy_bytes(path, lead, heads, as_float32, layout));
}

}  // namespace favor
