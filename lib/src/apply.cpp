#include "favor/apply.hpp"

#include "favor/attention.hpp"
#include "favor/error.hpp"
#include "favor/estimator.hpp"
#include "favor/parallel.hpp"

namespace favor {

namespace {
// A flag's text as JSON: a number, or else a word (e.g. "optimal") that the map checks.
nlohmann::json flag_value(const std::string& text) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
        return nlohmann::json(text);
    }
}

// --param KEY=VALUE into the variant object; the keys with flags of their own are refused.
std::vector<std::string> add_params(nlohmann::json& v, const std::vector<std::string>& params) {
    std::vector<std::string> keys;
    for (const std::string& p : params) {
        const std::size_t eq = p.find('=');
        if (eq == std::string::npos || eq == 0)
            throw Error("apply: --param: expected KEY=VALUE (e.g. nu=2), got \"" + p + "\"");
        const std::string key = p.substr(0, eq);
        for (const char* own : {"features", "projection", "epsilon", "A", "name"})
            if (key == own)
                throw Error("apply: --param " + key + ": " +
                            (key == "name" ? std::string("not a parameter of the map") : "use --" + key));
        if (v.contains(key)) throw Error("apply: --param " + key + ": given twice");
        v[key] = flag_value(p.substr(eq + 1));
        keys.push_back(key);
    }
    return keys;
}
}  // namespace

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
        if (!r.params.empty()) throw Error("apply: --param: applies only with --features");
        return o;
    }
    if (r.features.empty()) throw Error("apply: give --exact or --features F (with --m M)");
    // The flags as a config variant, so they are checked exactly as a config's are.
    nlohmann::json v{{"features", r.features}};
    if (!r.projection.empty()) v["projection"] = r.projection;
    if (!r.epsilon.empty()) v["epsilon"] = flag_value(r.epsilon);
    if (!r.A.empty()) v["A"] = flag_value(r.A);
    const std::vector<std::string> param_keys = add_params(v, r.params);
    try {
        o.variant = parse_variant(v, flags, false, "use --exact for exact attention");
        if (o.variant->map->uses_projection() && r.projection.empty()) {   // apply's default
            v["projection"] = "orthogonal";
            o.variant = parse_variant(v, flags, false, "use --exact for exact attention");
        }
    } catch (const Error& e) {
        // Errors of --param keys name the flag as typed: "apply: --param nu: ...".
        const std::string msg = e.what();
        for (const std::string& k : param_keys)
            if (msg.rfind("apply: --" + k + ":", 0) == 0) throw Error("apply: --param " + k + msg.substr(9 + k.size()));
        throw;
    }
    const FeatureMap& map = *o.variant->map;
    if (map.uses_m()) {
        if (r.m == 0) throw Error("apply: --m must be >= 1");
        o.m = r.m;
    } else {
        if (r.m != 0) throw Error("apply: --m: does not apply to '" + map.name() + "' (its features do not depend on m)");
        o.m = 1;   // the size of the unused W placeholder
    }
    if (o.causal && !map.supports_causal())
        throw Error("apply: --causal: '" + map.name() + "' has no causal form (its landmarks average over the whole sequence)");
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
    if (opt.variant && !in.q.empty())
        if (const auto p = opt.variant->map->check_sizes(opt.m, in.d(), in.L(), in.k[0].shape(0)))
            throw Error("apply: --" + (p->key.empty() ? std::string("features") : p->key == "m" ? "m" : "param " + p->key) +
                        ": " + p->message);
    std::vector<Mat<double>> out;
    for (std::size_t h = 0; h < in.q.size(); ++h)
        out.push_back(with_dtype(opt.dtype, [&](auto t) {
            return apply_one<decltype(t)>(in.q[h], in.k[h], in.v[h], opt);
        }));
    return out;
}

}  // namespace favor
