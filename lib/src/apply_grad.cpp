// `favor apply --grad`: gradients of exact or approximate attention of given tensors.
#include "favor/apply_grad.hpp"

#include <cmath>
#include <filesystem>

#include "favor/backward_linear.hpp"
#include "favor/error.hpp"
#include "favor/npy.hpp"
#include "favor/parallel.hpp"

namespace favor {

namespace {
template <class T>
Gradients<T> head_gradients(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, const Mat<double>& g,
                            const ApplyOptions& o) {
    const Mat<T> Q = cast_mat<T>(q), K = cast_mat<T>(k), V = cast_mat<T>(v), G = cast_mat<T>(g);
    const int threads = resolve_threads(o.threads);
    if (!o.variant) return exact_attention_backward(Q, K, V, G, o.causal, threads);
    const Estimator<T> est = make_estimator<T>(*o.variant, o.m, q.shape(1), o.seed, o.trial).for_inputs(Q, K);
    return favor_backward(est, Q, K, V, G, o.causal, threads);
}
}  // namespace


void check_apply_grad(const ApplyOptions& opt, const std::string& grad_path, const QkvShapes* shapes) {
    if (opt.dtype != DType::float64 && opt.dtype != DType::float32)
        throw Error("apply: --grad: no gradient with --dtype " + dtype_name(opt.dtype) +
                    " (the half dtypes are emulated; use float32 or float64)");
    if (opt.variant && opt.variant->hybrid.active())
        throw Error("apply: --grad: no gradient for hybrids (--window, --sinks) yet");
    if (opt.variant)
        if (const std::string why = opt.variant->map->gradient_refusal(); !why.empty())
            throw Error("apply: --grad: '" + opt.variant->map->name() + "' has no gradient (" + why + ")");
    if (grad_path.empty() || !shapes) return;
    check_upstream_header(grad_path, shapes->lead, shapes->L, shapes->dv, "apply: --grad");
}

std::vector<Mat<double>> load_upstream(const std::string& path, const HeadTensors& in, std::size_t dv) {
    return load_upstream(path, in.lead, in.L(), dv, "apply: --grad");
}

HeadGradients apply_gradients(const HeadTensors& in, const std::vector<Mat<double>>& G, const ApplyOptions& opt) {
    check_apply_grad(opt);
    HeadGradients out;
    for (std::size_t h = 0; h < in.q.size(); ++h) {
        auto keep = [&](const auto& g) {
            out.dq.push_back(cast_mat<double>(g.dQ));
            out.dk.push_back(cast_mat<double>(g.dK));
            out.dv.push_back(cast_mat<double>(g.dV));
        };
        if (opt.dtype == DType::float32)
            keep(head_gradients<float>(in.q[h], in.k[h], in.v[h], G[h], opt));
        else
            keep(head_gradients<double>(in.q[h], in.k[h], in.v[h], G[h], opt));
    }
    return out;
}

void write_apply_gradients(const std::string& grad_path, const std::string& out_path, const HeadTensors& in,
                           const ApplyOptions& opt) {
    const std::size_t dv = in.v.empty() ? 0 : in.v[0].shape(1);
    const HeadGradients g = apply_gradients(in, load_upstream(grad_path, in, dv), opt);
    const std::filesystem::path dir = std::filesystem::path(out_path).parent_path();
    const bool f32 = opt.dtype != DType::float64;
    save_heads((dir / "dq.npy").string(), in.lead, g.dq, f32);
    save_heads((dir / "dk.npy").string(), in.lead, g.dk, f32);
    save_heads((dir / "dv.npy").string(), in.lead, g.dv, f32);
}

}  // namespace favor
