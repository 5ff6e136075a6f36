// `favor apply --grad`: gradients of exact or approximate attention of given tensors.
#include "favor/runs/apply_grad.hpp"

#include <cmath>

#include "favor/attention/backward_linear.hpp"
#include "favor/attention/hybrid_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/core/parallel.hpp"
#include "favor/io/npy.hpp"

namespace favor {

namespace {
template <class T>
Gradients<T> head_gradients(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, const Mat<double>& g,
                            const ApplyOptions& o) {
    const Mat<T> Q = cast_mat<T>(q), K = cast_mat<T>(k), V = cast_mat<T>(v), G = cast_mat<T>(g);
    const int threads = resolve_threads(o.threads);
    if (!o.variant) return exact_attention_backward(Q, K, V, G, o.causal, threads);
    const Estimator<T> est = make_estimator<T>(*o.variant, o.m, q.shape(1), o.seed, o.trial).for_inputs(Q, K, o.head);
    if (est.hybrid.active()) return hybrid_backward(est, Q, K, V, G, o.causal, threads);   // docs/design.md 2.8
    return favor_backward(est, Q, K, V, G, o.causal, threads);
}
}  // namespace


void check_apply_grad(const ApplyOptions& opt, const std::string& grad_path, const QkvShapes* shapes,
                      const std::string& layout) {
    if (opt.dtype != DType::float64 && opt.dtype != DType::float32)
        throw Error("apply: --grad: no gradient with --dtype " + dtype_name(opt.dtype) +
                    " (the half dtypes are emulated; use float32 or float64)");
    if (opt.variant)
        if (const std::string why = opt.variant->map->gradient_refusal(); !why.empty())
            throw Error("apply: --grad: '" + opt.variant->map->name() + "' has no gradient (" + why + ")");
    if (grad_path.empty() || !shapes) return;
    check_upstream_header(grad_path, shapes->lead, shapes->L, shapes->dv, "apply: --grad", layout);
}

std::vector<Mat<double>> load_upstream(const std::string& path, const HeadTensors& in, std::size_t dv,
                                       const std::string& layout) {
    return load_upstream(path, in.lead, in.L(), dv, "apply: --grad", layout);
}

void add_head_gradients(const HeadTensors& in, const std::vector<Mat<double>>& G, const ApplyOptions& opt,
                        std::size_t h, HeadGradients& out) {
    auto keep = [&](const auto& g) {
        out.dq.push_back(cast_mat<double>(g.dQ));
        out.dk.push_back(cast_mat<double>(g.dK));
        out.dv.push_back(cast_mat<double>(g.dV));
    };
    ApplyOptions o = opt;
    o.head = h % weight_heads(in.lead);
    if (opt.dtype == DType::float32)
        keep(head_gradients<float>(in.q[h], in.k[h], in.v[h], G[h], o));
    else
        keep(head_gradients<double>(in.q[h], in.k[h], in.v[h], G[h], o));
}

HeadGradients apply_gradients(const HeadTensors& in, const std::vector<Mat<double>>& G, const ApplyOptions& opt) {
    check_apply_grad(opt);
    HeadGradients out;
    for (std::size_t h = 0; h < in.q.size(); ++h) add_head_gradients(in, G, opt, h, out);
    return out;
}

}  // namespace favor
