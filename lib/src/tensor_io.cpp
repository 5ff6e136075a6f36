#include "favor/tensor_io.hpp"

#include <cmath>

#include "favor/error.hpp"
#include "favor/files.hpp"
#include "favor/npy.hpp"

namespace favor {

void check_rank(const std::vector<std::size_t>& shape, const std::string& path) {
    if (shape.size() < 2 || shape.size() > 4)
        throw Error(path + ": shape " + shape_str(shape) + " has rank " + std::to_string(shape.size()) +
                    "; expected (L, d), (H, L, d) or (B, H, L, d)");
    for (std::size_t s : shape)
        if (s == 0) throw Error(path + ": shape " + shape_str(shape) + " has an empty dimension");
}

namespace {

NpyArray load_checked(const std::string& path) {
    NpyArray a = read_npy(path);
    check_rank(a.shape, path);
    if (const auto i = first_nonfinite(a))
        throw Error(path + ": entry " + std::to_string(*i) + " is " + (std::isnan(a.data[*i]) ? "NaN" : "Inf") +
                    " (inputs must be finite)");
    return a;
}

std::vector<Mat<double>> split_heads(const NpyArray& a) {
    const std::size_t rows = a.shape[a.shape.size() - 2], cols = a.shape.back();
    const std::size_t heads = a.data.size() / (rows * cols);
    std::vector<Mat<double>> out;
    for (std::size_t h = 0; h < heads; ++h) {
        Mat<double> m = Mat<double>::from_shape({rows, cols});
        std::copy(a.data.begin() + std::ptrdiff_t(h * rows * cols), a.data.begin() + std::ptrdiff_t((h + 1) * rows * cols), m.data());
        out.push_back(std::move(m));
    }
    return out;
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

QkvShapes read_qkv_shapes(const std::string& qp, const std::string& kp, const std::string& vp, bool causal) {
    return check_qkv_shapes(read_npy_header(qp).shape, read_npy_header(kp).shape, read_npy_header(vp).shape, qp, kp, vp,
                            causal);
}

HeadTensors load_qkv(const std::string& qp, const std::string& kp, const std::string& vp, bool causal) {
    // Each file read and checked (header, data, finite values) in turn, then the shapes
    // together; each array is split into heads before the next is read.
    HeadTensors t;
    std::vector<std::size_t> qs, ks, vs;
    auto load = [](const std::string& p, std::vector<std::size_t>& shape) {
        const NpyArray a = load_checked(p);
        shape = a.shape;
        return split_heads(a);
    };
    t.q = load(qp, qs);
    t.k = load(kp, ks);
    t.v = load(vp, vs);
    t.lead = check_qkv_shapes(qs, ks, vs, qp, kp, vp, causal).lead;
    return t;
}

std::string heads_npy_bytes(const std::string& path, const std::vector<std::size_t>& lead,
                            const std::vector<Mat<double>>& heads, bool as_float32) {
    std::vector<std::size_t> shape = lead;
    shape.push_back(heads.empty() ? 0 : heads[0].shape(0));
    shape.push_back(heads.empty() ? 0 : heads[0].shape(1));
    std::vector<double> data;
    for (const auto& h : heads) data.insert(data.end(), h.begin(), h.end());
    return npy_bytes(path, shape, data.data(), as_float32);
}

void save_heads(const std::string& path, const std::vector<std::size_t>& lead,
                const std::vector<Mat<double>>& heads, bool as_float32) {
    write_file_atomic(path, heads_npy_bytes(path, lead, heads, as_float32));
}

}  // namespace favor
