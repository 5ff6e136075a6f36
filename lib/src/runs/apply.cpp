#include "favor/runs/apply.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "favor/attention/attention_blocks.hpp"
#include "favor/attention/exact_attention.hpp"
#include "favor/attention/favor_forward.hpp"
#include "favor/attention/hybrid_attention.hpp"
#include "favor/attention/hybrid_fast.hpp"
#include "favor/attention/linear_attention.hpp"
#include "favor/core/error.hpp"
#include "favor/core/flag_values.hpp"
#include "favor/core/parallel.hpp"
#include "favor/estimators/estimator.hpp"

namespace favor {

namespace {
// A flag's text as JSON: a number, or else a word (e.g. "optimal") that the map checks.
nlohmann::json flag_value(const std::string& text) {
    try {
        return parse_json_text(text, "apply");   // nesting depth checked before parsing
    } catch (const JsonSyntaxError&) {
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
        for (const char* own : {"features", "projection", "epsilon", "epsilon_after", "A", "name", "window", "sinks", "support"})
            if (key == own)
                throw Error("apply: --param " + key + ": " +
                            (key == "name"            ? std::string("not a parameter of the map")
                             : key == "epsilon_after" ? std::string("use --epsilon-after")
                                                      : "use --" + key));
        if (v.contains(key)) throw Error("apply: --param " + key + ": given twice");
        v[key] = flag_value(p.substr(eq + 1));
        keys.push_back(key);
    }
    return keys;
}

// --exact with a flag of --features: which one, as an error.
void check_exact_flags(const ApplyRequest& r) {
    if (r.features) throw Error("apply: give either --exact or --features, not both");
    if (r.projection || r.m || r.epsilon || r.epsilon_after || r.A || r.window || r.sinks || r.support)
        throw Error(std::string("apply: --") +
                    (r.m ? "m" : r.projection ? "projection" : r.epsilon ? "epsilon" : r.epsilon_after ? "epsilon-after"
                     : r.A ? "A" : r.window ? "window" : r.sinks ? "sinks" : "support") +
                    ": applies to --features only, not to --exact");
    if (!r.params.empty()) throw Error("apply: --param: applies only with --features");
}

// The flags of --features as a config variant (without --param), so they are checked exactly
// as a config's are; words a number parser would take ("inf", "nan") refused for epsilon and A.
nlohmann::json variant_of_flags(const ApplyRequest& r, const Field& flags) {
    nlohmann::json v{{"features", *r.features}};
    auto value = [](const std::string& flag, const std::string& text) {
        if (text.empty()) throw Error("apply: --" + flag + ": empty value");
        return flag_value(text);
    };
    if (r.projection) {
        if (r.projection->empty()) throw Error("apply: --projection: empty value");
        v["projection"] = *r.projection;
    }
    if (r.epsilon) v["epsilon"] = value("epsilon", *r.epsilon);
    if (r.epsilon_after) v["epsilon_after"] = value("epsilon-after", *r.epsilon_after);
    if (r.A) v["A"] = value("A", *r.A);
    // Key counts: digits only, as every integer flag (" 3" is not 3); the variant checks the range.
    const auto count = [](const std::string& flag, const std::string& text) {
        return parse_uint_text("apply: --" + flag, text, 0, std::numeric_limits<std::uint64_t>::max());
    };
    if (r.window) v["window"] = count("window", *r.window);
    if (r.sinks) v["sinks"] = count("sinks", *r.sinks);
    if (r.support) v["support"] = value("support", *r.support);
    for (const char* key : {"epsilon", "A"})
        if (v.contains(key) && v[key].is_string()) {
            const std::string t = v[key].get<std::string>();
            const std::string low = [&] {
                std::string s;
                for (char c : t) s += char(std::tolower(static_cast<unsigned char>(c)));
                return s;
            }();
            for (const char* w : {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "-nan", "+nan"})
                if (low == w) flags.at(key).fail("must be a finite number, got \"" + t + "\"");
        }
    return v;
}

// The variant v parsed as a config's (with apply's default projection, orthogonal, when the
// map uses one, takes it, and --projection is not given); its errors name the flags as typed (--param KEY,
// --epsilon-after).
Variant parse_apply_variant(nlohmann::json v, const Field& flags, const std::vector<std::string>& param_keys,
                            bool projection_given) {
    try {
        Variant variant = parse_variant(v, flags, false, "use --exact for exact attention");
        // apply's default, where the map takes it (maclaurin takes iid only: its default stays)
        if (variant.map->uses_projection() && !projection_given && variant.map->projection_refusal("orthogonal").empty()) {
            v["projection"] = "orthogonal";
            variant = parse_variant(v, flags, false, "use --exact for exact attention");
        }
        return variant;
    } catch (const Error& e) {
        std::string msg = e.what();
        // Errors of --param keys name the flag as typed: "apply: --param nu: ...".
        for (const std::string& k : param_keys)
            if (msg.rfind("apply: --" + k + ":", 0) == 0) throw Error("apply: --param " + k + msg.substr(9 + k.size()));
        // The config key epsilon_after is the flag --epsilon-after.
        const std::string key = "--epsilon_after";
        if (const auto at = msg.find(key); at != std::string::npos) msg.replace(at, key.size(), "--epsilon-after");
        throw Error(msg);
    }
}

// --m for `map`: required where the map uses m, refused where it does not (then 1, the size
// of the unused W placeholder).
std::size_t m_of_flags(const ApplyRequest& r, const FeatureMap& map) {
    if (map.uses_m()) {
        if (!r.m) throw Error("apply: --m: missing (number of random features, 1 to " + std::to_string(kMaxM) + ")");
        return parse_uint_text("apply: --m", *r.m, 1, kMaxM);
    }
    if (r.m) throw Error("apply: --m: does not apply to '" + map.name() + "' (its features do not depend on m)");
    return 1;
}
}  // namespace

ApplyOptions resolve_apply(const ApplyRequest& r) {
    const Field flags{"apply", "", "--"};
    ApplyOptions o;
    o.causal = r.causal;
    if (r.seed) o.seed = parse_uint_text("apply: --seed", *r.seed, 0, std::numeric_limits<std::uint64_t>::max());
    if (r.trial) o.trial = parse_uint_text("apply: --trial", *r.trial, 0, std::numeric_limits<std::uint64_t>::max());
    if (r.threads) o.threads = int(parse_uint_text("apply: --threads", *r.threads, 0, 1000000));
    if (r.dtype) o.dtype = parse_dtype(*r.dtype, flags.at("dtype"));
    if (r.exact) {
        check_exact_flags(r);
        return o;
    }
    if (!r.features) throw Error("apply: give --exact or --features F (with --m M)");
    nlohmann::json v = variant_of_flags(r, flags);
    const std::vector<std::string> param_keys = add_params(v, r.params);
    o.variant = parse_apply_variant(std::move(v), flags, param_keys, bool(r.projection));
    const FeatureMap& map = *o.variant->map;
    o.m = m_of_flags(r, map);
    if (o.causal && !map.supports_causal())
        throw Error("apply: --causal: '" + map.name() + "' has no causal form (its landmarks average over the whole sequence)");
    return o;
}

template <class T>
Mat<T> apply_head_native(MatView<T> Q, MatView<T> K, MatView<T> V, const ApplyOptions& o) {
    const Rounding r = dtype_rounding(o.dtype);   // half dtypes: T = float, values rounded
    const int threads = resolve_threads(o.threads);
    std::array<Mat<T>, 3> rounded;   // the half dtypes' rounded copies (the views' memory is the caller's)
    if (r != Rounding::none) {
        rounded = {to_mat<T>(Q), to_mat<T>(K), to_mat<T>(V)};
        for (Mat<T>& m : rounded) round_to(r, m.data(), m.size());
        Q = rounded[0], K = rounded[1], V = rounded[2];
    }
    if (!o.variant) {
        if constexpr (std::is_same_v<T, float>)
            if (r != Rounding::none) return exact_attention_rounded(rounded[0], rounded[1], rounded[2], r, o.causal, threads);
        return exact_attention<T>(Q, K, V, o.causal, threads);
    }
    const Estimator<T> est = make_estimator<T>(*o.variant, o.m, Q.shape(1), o.seed, o.trial, r).for_inputs(Q, K, o.head);
    if (est.hybrid.active()) return hybrid_forward(est, Q, K, V, o.causal, threads);   // window/sinks: 2.8, the fast path
    // The fused forward where the map allows it (favor_forward.hpp; otherwise it is
    // favor_attention's output), on favor's threads: the numbers do not depend on their count.
    return favor_forward(est, Q, K, V, o.causal, threads);
}
template Mat<float> apply_head_native<float>(MatView<float>, MatView<float>, MatView<float>, const ApplyOptions&);
template Mat<double> apply_head_native<double>(MatView<double>, MatView<double>, MatView<double>, const ApplyOptions&);

bool saves_head(const ApplyOptions& o) {
    return o.variant && !o.variant->hybrid.active() && o.variant->shift &&
           (o.dtype == DType::float32 || o.dtype == DType::float64) && o.variant->map->gradient_refusal().empty();
}

template <class T>
SavedHead<T> apply_head_saved(const Estimator<T>& drawn, MatView<T> Q, MatView<T> K, MatView<T> V,
                              const ApplyOptions& o) {
    SavedHead<T> s{drawn.for_inputs(Q, K, o.head), {}};
    s.state = favor_forward_saved(s.est, Q, K, V, o.causal, resolve_threads(o.threads));
    return s;
}
template SavedHead<float> apply_head_saved(const Estimator<float>&, MatView<float>, MatView<float>, MatView<float>,
                                           const ApplyOptions&);
template SavedHead<double> apply_head_saved(const Estimator<double>&, MatView<double>, MatView<double>,
                                            MatView<double>, const ApplyOptions&);

template <class T>
Mat<double> apply_head(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const ApplyOptions& o) {
    return cast_mat<double>(apply_head_native<T>(Q, K, V, o));
}
template Mat<double> apply_head(const Mat<float>&, const Mat<float>&, const Mat<float>&, const ApplyOptions&);
template Mat<double> apply_head(const Mat<double>&, const Mat<double>&, const Mat<double>&, const ApplyOptions&);

namespace {
double max_abs(const Mat<double>& a) {
    double m = 0;
    for (double x : a) m = std::max(m, std::fabs(x));
    return m;
}
double max_norm2(const Mat<double>& a) {
    double m = 0;
    for (std::size_t i = 0; i < a.shape(0); ++i) {
        double s = 0;
        for (std::size_t c = 0; c < a.shape(1); ++c) s += a(i, c) * a(i, c);
        m = std::max(m, s);
    }
    return m;
}
}  // namespace

void check_apply_sizes(const ApplyOptions& opt, std::size_t d, std::size_t L, std::size_t Lk, std::size_t heads) {
    if (!opt.variant) return;
    std::optional<SizeProblem> p = opt.variant->map->check_sizes(opt.m, d, L, Lk);
    if (!p && heads > 0) p = opt.variant->map->check_heads(heads);
    if (p)
        throw Error("apply: --" + (p->key.empty() ? std::string("features") : p->key == "m" ? "m" : "param " + p->key) +
                    ": " + p->message);
    const Variant& v = *opt.variant;
    if (const std::string why = v.hybrid.empty_rows_problem(v.map->num_features(1, d) != 0, opt.causal, L, Lk); !why.empty())
        throw Error("apply: --window: " + why);
}


std::vector<Mat<double>> apply_attention(const HeadTensors& in, const ApplyOptions& opt) {
    const std::size_t H = weight_heads(in.lead);
    if (!in.q.empty()) check_apply_sizes(opt, in.d(), in.L(), in.k[0].shape(0), H);
    std::vector<Mat<double>> out;
    ApplyOptions o = opt;
    for (std::size_t h = 0; h < in.q.size(); ++h) {
        o.head = h % H;
        out.push_back(with_dtype(opt.dtype, [&](auto t) {
            using T = decltype(t);
            return apply_head<T>(cast_mat<T>(in.q[h]), cast_mat<T>(in.k[h]), cast_mat<T>(in.v[h]), o);
        }));
    }
    return out;
}

std::string NonfiniteReport::message(std::size_t total, const std::string& what) const {
    return "apply: " + std::to_string(count) + " of " + std::to_string(total) + " " + what +
           " entries are not finite (first: head " + std::to_string(head) + ", row " + std::to_string(row) +
           "); likely cause: " + cause;
}

NonfiniteReport locate_nonfinite(const std::vector<Mat<double>>& heads) {
    NonfiniteReport r;
    bool first = true;
    for (std::size_t h = 0; h < heads.size(); ++h)
        for (std::size_t i = 0; i < heads[h].shape(0); ++i)
            for (std::size_t c = 0; c < heads[h].shape(1); ++c)
                if (!std::isfinite(heads[h](i, c))) {
                    ++r.count;
                    if (first) r.head = h, r.row = i, first = false;
                }
    return r;
}

std::optional<NonfiniteReport> find_nonfinite(const HeadTensors& in, const std::vector<Mat<double>>& out,
                                              const ApplyOptions& opt) {
    NonfiniteReport r = locate_nonfinite(out);
    if (r.count == 0) return std::nullopt;
    const bool f32 = opt.dtype != DType::float64;   // float32 or a half dtype: suggest float64
    const double big = f32 ? rounding_max(dtype_rounding(opt.dtype)) : std::numeric_limits<double>::max();
    const std::string type = dtype_name(opt.dtype);
    const Mat<double>&q = in.q[r.head], &k = in.k[r.head], &v = in.v[r.head];
    const double d = double(q.shape(1));
    const double mq = max_abs(q), mk = max_abs(k), mv = max_abs(v);
    auto fmt = [](double x) {
        char b[32];
        std::snprintf(b, sizeof b, "%.3g", x);
        return std::string(b);
    };
    if (std::max({mq, mk, mv}) > big) {
        r.cause = std::string("input entries up to ") + fmt(std::max({mq, mk, mv})) + " do not fit " + type +
                  (f32 ? " (use --dtype float64)" : "");
    } else if (opt.variant && (max_norm2(q) / std::sqrt(d) > big || max_norm2(k) / std::sqrt(d) > big)) {
        r.cause = std::string("|q|^2 / sqrt(d) or |k|^2 / sqrt(d) overflows ") + type + " (inputs too large)" +
                  (f32 ? "; use --dtype float64" : "");
    } else if (!opt.variant && mq * mk * d / std::sqrt(d) > big) {
        r.cause = std::string("the scores q.k / sqrt(d) can overflow ") + type + " (inputs too large)" +
                  (f32 ? "; use --dtype float64" : "");
    } else if (opt.variant && opt.variant->map->name() == "relu") {
        r.cause = "the row's relu features are all 0 (w.x <= 0 for every w), so its denominator D is 0; "
                  "relu attention is undefined there";
    } else if (opt.variant && opt.variant->map->epsilon() * opt.variant->map->epsilon() * double(k.shape(0)) > big / 1e6) {
        r.cause = "--epsilon " + fmt(opt.variant->map->epsilon()) + " makes the features' sums overflow " + type;
    } else if (opt.variant && opt.variant->map->name() == "oprf" && opt.variant->map->params()["A"].is_number() &&
               std::fabs(opt.variant->map->params()["A"].get<double>()) > 1e3) {
        r.cause = "--A " + fmt(opt.variant->map->params()["A"].get<double>()) + " makes the features overflow " + type;
    } else if (opt.variant && !opt.variant->shift) {
        r.cause = "the features without their max shift (--param shift=false) overflow or underflow " + type;
    } else if (opt.variant && opt.variant->map->name() == "trig") {
        r.cause = "trig's denominator D of the row is 0 (its features change sign)";
    } else {
        r.cause = std::string("the row's denominator D underflowed to 0 or overflowed in ") + type;
    }
    return r;
}

}  // namespace favor
