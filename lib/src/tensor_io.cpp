#include "favor/tensor_io.hpp"

#include <cmath>

#include "favor/attention.hpp"
#include "favor/error.hpp"
#include "favor/npy.hpp"
#include "favor/parallel.hpp"

namespace favor {

namespace {

std::string shape_text(const std::vector<std::size_t>& s) {
    std::string t = "(";
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + (s.size() == 1 ? ",)" : ")");
}

NpyArray load_checked(const std::string& path) {
    NpyArray a = read_npy(path);
    if (a.shape.size() < 2 || a.shape.size() > 4)
        throw Error(path + ": shape " + shape_text(a.shape) + " has rank " + std::to_string(a.shape.size()) +
                    "; expected (L, d), (H, L, d) or (B, H, L, d)");
    for (std::size_t i = 0; i < a.data.size(); ++i)
        if (!std::isfinite(a.data[i]))
            throw Error(path + ": entry " + std::to_string(i) + " is " + (std::isnan(a.data[i]) ? "NaN" : "Inf") +
                        " (inputs must be finite)");
    for (std::size_t s : a.shape)
        if (s == 0) throw Error(path + ": shape " + shape_text(a.shape) + " has an empty dimension");
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
            throw Error(p + ": shape " + shape_text(a.shape) + " does not match q's " + shape_text(q.shape) +
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

namespace {
template <class T>
Mat<double> apply_one(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, const ApplyOptions& o) {
    const Mat<T> Q = cast_mat<T>(q), K = cast_mat<T>(k), V = cast_mat<T>(v);
    if (o.exact) return cast_mat<double>(exact_attention(Q, K, V, o.causal, resolve_threads(o.threads)));
    const Mat<T> W = cast_mat<T>(draw_projection(o.projection, o.m, q.shape(1), o.seed, o.trial));
    return cast_mat<double>(favor_attention(o.map, W, Q, K, V, o.causal).out);
}
}  // namespace

ApplyOptions resolve_apply(const ApplyRequest& r) {
    ApplyOptions o;
    o.exact = r.exact;
    o.causal = r.causal;
    o.seed = r.seed;
    o.trial = r.trial;
    o.threads = r.threads;
    if (r.dtype != "float32" && r.dtype != "float64") throw Error("apply: --dtype must be float32 or float64, got " + r.dtype);
    o.float32 = r.dtype == "float32";
    if (r.exact) {
        if (!r.features.empty()) throw Error("apply: give either --exact or --features, not both");
        return o;
    }
    if (r.features.empty()) throw Error("apply: give --exact or --features F (with --m M)");
    if (r.m == 0) throw Error("apply: --m must be >= 1");
    o.m = r.m;
    o.map.kind = parse_features(r.features);
    o.projection = parse_projection(r.projection);
    if (!(r.epsilon >= 0)) throw Error("apply: --epsilon must be >= 0");
    o.map.epsilon = r.epsilon;
    if (o.map.kind != FeatureKind::oprf) {
        if (!r.A.empty()) throw Error("apply: --A applies only to --features oprf");
        return o;
    }
    o.map.A_optimal = r.A.empty() || r.A == "optimal";
    if (!o.map.A_optimal) {
        std::size_t used = 0;
        try {
            o.map.A = std::stod(r.A, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != r.A.size()) throw Error("apply: --A must be a number < 1/8 or 'optimal', got " + r.A);
        if (!(o.map.A < kOprfAMax)) throw Error("apply: --A must be < 1/8, got " + r.A);
    }
    return o;
}

std::vector<Mat<double>> apply_attention(const HeadTensors& in, const ApplyOptions& opt) {
    std::vector<Mat<double>> out;
    for (std::size_t h = 0; h < in.q.size(); ++h)
        out.push_back(opt.float32 ? apply_one<float>(in.q[h], in.k[h], in.v[h], opt)
                                  : apply_one<double>(in.q[h], in.k[h], in.v[h], opt));
    return out;
}

}  // namespace favor
