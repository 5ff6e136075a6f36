#include "favor/apply.hpp"

#include "favor/attention.hpp"
#include "favor/error.hpp"
#include "favor/estimator.hpp"
#include "favor/parallel.hpp"

namespace favor {

ApplyOptions resolve_apply(const ApplyRequest& r) {
    const Field flags{"apply", "", "--"};
    ApplyOptions o;
    o.causal = r.causal;
    o.seed = r.seed;
    o.trial = r.trial;
    o.threads = r.threads;
    o.dtype = parse_dtype(r.dtype, flags.at("dtype"));
    if (r.exact) {
        if (!r.features.empty()) throw Error("apply: give either --exact or --features, not both");
        return o;
    }
    if (r.features.empty()) throw Error("apply: give --exact or --features F (with --m M)");
    if (r.m == 0) throw Error("apply: --m must be >= 1");
    o.m = r.m;
    // The flags as a config variant, so they are checked exactly as a config's are.
    nlohmann::json v{{"features", r.features}, {"projection", r.projection}};
    // A flag's text as JSON: a number, or else a word (e.g. "optimal") that the map checks.
    auto value = [](const std::string& text) {
        try {
            return nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception&) {
            return nlohmann::json(text);
        }
    };
    if (!r.epsilon.empty()) v["epsilon"] = value(r.epsilon);
    if (!r.A.empty()) v["A"] = value(r.A);
    // --param KEY=VALUE: the map's other keys (e.g. gerf's "t"), VALUE read as --A's is.
    std::vector<std::string> param_keys;
    for (const std::string& kv : r.params) {
        const std::size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            throw Error("apply: --param: expected KEY=VALUE, got \"" + kv + "\"");
        const std::string key = kv.substr(0, eq);
        if (key == "features" || key == "projection" || key == "name")
            throw Error("apply: --param " + key + ": use --" + key);
        if (v.contains(key)) throw Error("apply: --param " + key + ": given twice");
        v[key] = value(kv.substr(eq + 1));
        param_keys.push_back(key);
    }
    try {
        o.variant = parse_variant(v, flags, false, "use --exact for exact attention");
    } catch (const Error& e) {
        // A key given by --param is named as such, not as a flag of its own.
        const std::string msg = e.what();
        for (const std::string& key : param_keys) {
            const std::string as_flag = "apply: --" + key + ":";
            if (msg.compare(0, as_flag.size(), as_flag) == 0)
                throw Error("apply: --param " + key + ":" + msg.substr(as_flag.size()));
        }
        throw;
    }
    return o;
}

namespace {
template <class T>
Mat<double> apply_one(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, const ApplyOptions& o) {
    const Mat<T> Q = cast_mat<T>(q), K = cast_mat<T>(k), V = cast_mat<T>(v);
    if (!o.variant) return cast_mat<double>(exact_attention(Q, K, V, o.causal, resolve_threads(o.threads)));
    const Estimator<T> est = make_estimator<T>(*o.variant, o.m, q.shape(1), o.seed, o.trial).for_inputs(Q, K);
    return cast_mat<double>(favor_attention(est, Q, K, V, o.causal).out);
}
}  // namespace

std::vector<Mat<double>> apply_attention(const HeadTensors& in, const ApplyOptions& opt) {
    std::vector<Mat<double>> out;
    for (std::size_t h = 0; h < in.q.size(); ++h)
        out.push_back(with_dtype(opt.dtype, [&](auto t) {
            return apply_one<decltype(t)>(in.q[h], in.k[h], in.v[h], opt);
        }));
    return out;
}

}  // namespace favor
