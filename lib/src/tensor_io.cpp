#include "favor/tensor_io.hpp"

#include <cmath>

#include "favor/error.hpp"
#include "favor/npy.hpp"

namespace favor {

namespace {

NpyArray load_checked(const std::string& path) {
    NpyArray a = read_npy(path);
    if (a.shape.size() < 2 || a.shape.size() > 4)
        throw Error(path + ": shape " + shape_str(a.shape) + " has rank " + std::to_string(a.shape.size()) +
                    "; expected (L, d), (H, L, d) or (B, H, L, d)");
    if (const auto i = first_nonfinite(a))
        throw Error(path + ": entry " + std::to_string(*i) + " is " + (std::isnan(a.data[*i]) ? "NaN" : "Inf") +
                    " (inputs must be finite)");
    for (std::size_t s : a.shape)
        if (s == 0) throw Error(path + ": shape " + shape_str(a.shape) + " has an empty dimension");
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

HeadTensors load_qkv(const std::string& qp, const std::string& kp, const std::string& vp, bool causal) {
    const NpyArray q = load_checked(qp), k = load_checked(kp), v = load_checked(vp);
    const std::vector<std::size_t> lead(q.shape.begin(), q.shape.end() - 2);
    auto check_lead = [&](const NpyArray& a, const std::string& p) {
        if (std::vector<std::size_t>(a.shape.begin(), a.shape.end() - 2) != lead)
            throw Error(p + ": shape " + shape_str(a.shape) + " does not match q's " + shape_str(q.shape) +
                        " in the leading (batch, head) dimensions");
    };
    check_lead(k, kp);
    check_lead(v, vp);
    const std::size_t Lq = q.shape[q.shape.size() - 2], d = q.shape.back();
    const std::size_t Lk = k.shape[k.shape.size() - 2];
    if (k.shape.back() != d)
        throw Error(kp + ": width d = " + std::to_string(k.shape.back()) + " differs from q's d = " + std::to_string(d));
    if (v.shape[v.shape.size() - 2] != Lk)
        throw Error(vp + ": length " + std::to_string(v.shape[v.shape.size() - 2]) + " differs from k's L = " + std::to_string(Lk));
    if (causal && Lq != Lk)
        throw Error(kp + ": causal attention needs q and k of one length, got " + std::to_string(Lq) + " and " + std::to_string(Lk));
    HeadTensors t;
    t.lead = lead;
    t.q = split_heads(q);
    t.k = split_heads(k);
    t.v = split_heads(v);
    return t;
}

void save_heads(const std::string& path, const std::vector<std::size_t>& lead,
                const std::vector<Mat<double>>& heads, bool as_float32) {
    std::vector<std::size_t> shape = lead;
    shape.push_back(heads.empty() ? 0 : heads[0].shape(0));
    shape.push_back(heads.empty() ? 0 : heads[0].shape(1));
    std::vector<double> data;
    for (const auto& h : heads) data.insert(data.end(), h.begin(), h.end());
    write_npy(path, shape, data.data(), as_float32);
}

}  // namespace favor
