// `favor apply` from files to files (apply_files.hpp).
#include "favor/runs/apply_files.hpp"

#include <tuple>

#include "favor/io/files.hpp"
#include "favor/io/output_paths.hpp"
#include "favor/io/tensor_file.hpp"

namespace favor {

std::vector<std::string> gradient_paths(const std::string& out) {
    const bool npy = out.size() > 4 && out.compare(out.size() - 4, 4, ".npy") == 0;
    const std::string stem = npy ? out.substr(0, out.size() - 4) : out;
    return {stem + "_dq.npy", stem + "_dk.npy", stem + "_dv.npy"};
}

void check_apply_files(const QkvSource& src, const std::optional<std::string>& grad, const std::string& out) {
    std::vector<NamedPath> inputs, outputs{{out, "--out"}};
    for (const auto& [flag, spec, member] : {std::tuple{"--q", &src.q, "q"}, {"--k", &src.k, "k"}, {"--v", &src.v, "v"}})
        inputs.push_back({parse_tensor_ref(*spec, member).path, flag});
    if (grad) {
        inputs.push_back({*grad, "--grad"});
        const std::vector<std::string> g = gradient_paths(out);
        for (std::size_t i = 0; i < g.size(); ++i) outputs.push_back({g[i], std::string("the d") + "qkv"[i] + " output"});
    }
    for (const NamedPath& o : outputs) check_output_file(o.path);
    check_distinct_files(inputs, outputs, "apply");
}

ApplyResults compute_apply(const HeadTensors& in, const ApplyOptions& opt, const std::optional<std::string>& grad,
                           const std::string& layout) {
    ApplyResults r;
    std::vector<Mat<double>> G;
    if (grad) G = load_upstream(*grad, in, in.v.empty() ? 0 : in.v[0].shape(1), layout);   // checked before any work
    r.out = apply_attention(in, opt);
    if (grad) r.grads = apply_gradients(in, G, opt);
    return r;
}

std::string write_apply(const ApplyResults& r, const HeadTensors& in, const ApplyOptions& opt, const std::string& out,
                        const std::string& layout) {
    save_heads(out, in.lead, r.out, opt.dtype != DType::float64, layout);
    std::string first, others;   // the first file's message, the names of the other files with some
    auto total = [](const std::vector<Mat<double>>& heads) {
        std::size_t n = 0;
        for (const auto& h : heads) n += h.size();
        return n;
    };
    if (const auto nf = find_nonfinite(in, r.out, opt)) first = nf->message(total(r.out)) + " (written to " + out + ")";
    if (!r.grads) return first;
    const std::vector<std::string> paths = gradient_paths(out);
    const std::vector<Mat<double>>* heads[] = {&r.grads->dq, &r.grads->dk, &r.grads->dv};
    for (std::size_t i = 0; i < paths.size(); ++i) {
        save_heads(paths[i], in.lead, *heads[i], opt.dtype != DType::float64, layout);
        NonfiniteReport nf = locate_nonfinite(*heads[i]);
        if (nf.count == 0) continue;
        const std::string name = std::string("d") + "qkv"[i];
        if (!first.empty()) {
            others += (others.empty() ? "" : ", ") + name;
            continue;
        }
        nf.cause = "the gradient overflowed, or divided by a denominator D near 0, in " + dtype_name(opt.dtype);
        first = nf.message(total(*heads[i]), name) + " (written to " + paths[i] + ")";
    }
    return others.empty() ? first : first + "; not finite either: " + others;
}

}  // namespace favor
