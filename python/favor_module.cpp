// favor._core: the Python bindings of the library (docs/design.md section 9). Conversions and
// dispatch only: every check and every number comes from lib/ through the entry points the
// CLI calls (tensor_requests.hpp, apply.hpp, apply_grad.hpp, run_session.hpp), so results and
// messages are the CLI's. The keyword handling, dtype policy and DataFrames are in
// python/favor/__init__.py; values arrive here as the CLI's flag texts.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "favor/attention/backward_linear.hpp"
#include "favor/core/blas.hpp"
#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/core/parallel.hpp"
#include "favor/estimators/variant.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/io/tensor_layout.hpp"
#include "favor/runs/apply.hpp"
#include "favor/runs/apply_grad.hpp"
#include "favor/runs/array_view.hpp"
#include "favor/runs/run_session.hpp"
#include "favor/runs/tensor_requests.hpp"

namespace py = pybind11;
using Text = std::optional<std::string>;

namespace {

// A library text (a message, a path: bytes that need not be UTF-8) as a Python str, decoded as
// Python decodes file names (os.fsdecode: UTF-8, surrogateescape), so no byte is lost and
// os.fsencode gives the bytes back. Texts go the other way as bytes (__init__.py's _text).
py::str text_of(const std::string& s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "surrogateescape");
    if (o == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(o);
}
py::list texts_of(const std::vector<std::string>& v) {
    py::list out;
    for (const auto& s : v) out.append(text_of(s));
    return out;
}

// A numpy array as the library's strided view (no copy). The Python layer passes float32 or
// float64 arrays in native byte order only.
favor::ArrayView view_of(const py::array& a) {
    favor::ArrayView v;
    v.data = a.data();
    v.f32 = a.itemsize() == 4;
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        v.shape.push_back(std::size_t(a.shape(i)));
        v.strides.push_back(a.strides(i));
    }
    return v;
}

// Per-head (rows, cols) matrices of T as one array of shape lead + (rows, cols); one head is
// handed over without a copy.
template <class T>
py::array to_numpy(std::vector<favor::Mat<T>>&& heads, const std::vector<std::size_t>& lead) {
    std::vector<py::ssize_t> shape(lead.begin(), lead.end());
    shape.push_back(py::ssize_t(heads[0].shape(0)));
    shape.push_back(py::ssize_t(heads[0].shape(1)));
    if (heads.size() == 1) {
        auto* m = new favor::Mat<T>(std::move(heads[0]));
        py::capsule owner(m, [](void* p) { delete static_cast<favor::Mat<T>*>(p); });
        return py::array_t<T>(shape, m->data(), owner);
    }
    py::array_t<T> out(shape);
    T* dst = out.mutable_data();
    for (const auto& h : heads) dst = std::copy(h.begin(), h.end(), dst);
    return std::move(out);
}

// Float64 heads as float32 when the CLI writes a float32 file (any dtype but float64).
py::array to_numpy(std::vector<favor::Mat<double>>&& heads, const std::vector<std::size_t>& lead, bool f32) {
    if (!f32) return to_numpy<double>(std::move(heads), lead);
    std::vector<favor::Mat<float>> narrow;
    for (const auto& h : heads) narrow.push_back(favor::cast_mat<float>(h));
    return to_numpy<float>(std::move(narrow), lead);
}

// `favor apply --layout` for arrays: the layout checked as the CLI checks it and named as the
// CLI names it, so read_qkv_shapes' rules and messages apply (check_source_shapes: no L < H
// without a layout, the L < d warning); the arrays are viewed in favor's order (canonical_view).
favor::QkvSource layout_source(const Text& layout, bool causal) {
    favor::QkvSource s;
    s.layout_field = "--layout";
    s.causal = causal;
    if (layout) {
        s.layout = *layout;
        if (const std::string why = favor::layout_problem(s.layout); !why.empty())
            throw favor::Error("apply: --layout: " + why);
    }
    return s;
}

// A flag's text from the dict the Python layer builds (absent: not given).
Text flag_of(const py::dict& flags, const char* key) {
    return flags.contains(key) ? flags[key].cast<Text>() : Text{};
}

favor::ApplyRequest apply_request(bool exact, bool causal, const py::dict& flags, const std::vector<std::string>& params) {
    favor::ApplyRequest r;
    r.exact = exact;
    r.causal = causal;
    auto text = [&](const char* key) { return flag_of(flags, key); };
    r.features = text("features");
    r.projection = text("projection");
    r.m = text("m");
    r.seed = text("seed");
    r.trial = text("trial");
    r.epsilon = text("epsilon");
    r.epsilon_after = text("epsilon_after");
    r.A = text("A");
    r.window = text("window");
    r.sinks = text("sinks");
    r.support = text("support");
    r.dtype = text("dtype");
    r.threads = text("threads");
    r.params = params;
    return r;
}

// Resolves the options and plans as `favor apply` does, from the shapes; the threads set.
struct Prepared {
    favor::ApplyOptions opt;
    favor::ArrayView q, k, v;
    favor::QkvShapes shapes;
    std::vector<std::string> warnings;
};
Prepared prepare(const py::array& q, const py::array& k, const py::array& v, const favor::ApplyRequest& req,
                 const py::dict& flags, const Text& max_memory, bool grad) {
    Prepared p;
    p.opt = favor::resolve_apply(req);
    const favor::QkvSource src = layout_source(flag_of(flags, "layout"), p.opt.causal);
    p.q = favor::canonical_view(view_of(q), src.layout, "q");
    p.k = favor::canonical_view(view_of(k), src.layout, "k");
    p.v = favor::canonical_view(view_of(v), src.layout, "v");
    p.shapes = favor::check_source_shapes(p.q.shape, p.k.shape, p.v.shape, "q", "k", "v", src);
    if (grad) favor::check_apply_grad(p.opt);
    const favor::ApplyPlan plan = favor::plan_apply(p.opt, p.shapes, favor::budget_of_text("apply", max_memory), grad);
    p.opt.threads = plan.threads;
    p.warnings = p.shapes.warnings;
    p.warnings.insert(p.warnings.end(), plan.warnings.begin(), plan.warnings.end());
    favor::set_blas_single_threaded();   // as the CLI runs (favor's own threads split the work)
    return p;
}

// Raises KeyboardInterrupt (or what a signal handler raised) when Ctrl-C came meanwhile.
void check_signals() {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// q, k, v's heads in the compute type: read in place where they are C-contiguous arrays of it,
// converted into it otherwise (what apply_attention casts its float64 heads to: the same
// values); the sizes checked for the map.
template <class T>
struct Heads {
    favor::HeadViews<T> q, k, v;
};
template <class T>
Heads<T> heads_of(const Prepared& p) {
    py::gil_scoped_release free;
    const int threads = favor::resolve_threads(p.opt.threads);
    Heads<T> h{favor::head_views_of_array<T>(p.q, "q", threads), favor::head_views_of_array<T>(p.k, "k", threads),
               favor::head_views_of_array<T>(p.v, "v", threads)};
    favor::check_apply_sizes(p.opt, p.shapes.d, p.shapes.L, p.shapes.Lk, favor::weight_heads(p.shapes.lead));
    return h;
}

// fn(h, o) for every head h with o.head its weights' head, the GIL released, Ctrl-C checked between.
template <class Fn>
void each_head(const Prepared& p, std::size_t heads, Fn fn) {
    favor::ApplyOptions o = p.opt;
    const std::size_t H = favor::weight_heads(p.shapes.lead);
    for (std::size_t h = 0; h < heads; ++h) {
        {
            py::gil_scoped_release free;
            o.head = h % H;
            fn(h, o);
        }
        check_signals();
    }
}

// apply's explanation when an output entry is not finite (from the inputs as float64 heads),
// else empty; the test a vectorised scan on the call's threads.
template <class T>
std::string nonfinite_of(const Prepared& p, const std::vector<favor::MatView<T>>& out) {
    const int threads = favor::resolve_threads(p.opt.threads);
    if (std::all_of(out.begin(), out.end(), [&](const auto& h) { return favor::all_finite(h.data(), h.size(), threads); }))
        return "";
    const favor::HeadTensors in = favor::heads_of_arrays(p.q, p.k, p.v, p.opt.causal);
    std::vector<favor::Mat<double>> wide;
    std::size_t total = 0;
    for (const auto& h : out) wide.push_back(favor::cast_mat<double>(h)), total += h.size();
    const auto bad = favor::find_nonfinite(in, wide, p.opt);
    return bad ? bad->message(total) : "";
}

// attention's result: the heads as one array (its dtype the compute type: float32 for every
// dtype but float64, as `favor apply --out` writes), the plan's warnings, the non-finite
// explanation, and no saved state.
template <class T>
py::tuple attention_of(const Prepared& p) {
    const Heads<T> in = heads_of<T>(p);
    std::vector<favor::Mat<T>> out;
    each_head(p, in.q.heads.size(), [&](std::size_t h, const favor::ApplyOptions& o) {
        out.push_back(favor::apply_head_native<T>(in.q.heads[h], in.k.heads[h], in.v.heads[h], o));
    });
    const std::string nonfinite = nonfinite_of<T>(p, {out.begin(), out.end()});
    return py::make_tuple(to_numpy(std::move(out), p.shapes.lead), texts_of(p.warnings), text_of(nonfinite), py::none());
}

// favor.torch's forward kept for its backward (docs/design.md 9.2): the call's options and
// shapes, q, k, v (kept alive: the heads may view their memory) and every head's SavedHead
// (apply_head_saved: the fitted estimator, the output, the key sums and denominators).
template <class T>
struct SavedCall {
    Prepared p;
    py::tuple arrays;
    Heads<T> in;
    std::vector<favor::SavedHead<T>> heads;
};
// What Python holds (opaque): one call's SavedCall in its compute type.
struct Saved {
    std::unique_ptr<SavedCall<float>> f32;
    std::unique_ptr<SavedCall<double>> f64;
    template <class T>
    std::unique_ptr<SavedCall<T>>& slot() {
        if constexpr (std::is_same_v<T, float>) return f32;
        else return f64;
    }
};

// attention_of's result from apply_head_saved (W drawn once for every head), the Saved state
// last. The output of a single head is its state's, viewed in place (the array keeps the state
// alive; favor.torch saves it so that autograd refuses an in-place change before the backward).
template <class T>
py::tuple attention_saved_of(Prepared&& p, py::tuple arrays) {
    auto owned = std::make_unique<Saved>();
    SavedCall<T>& c = *(owned->slot<T>() = std::make_unique<SavedCall<T>>());
    c.p = std::move(p);
    c.arrays = std::move(arrays);
    c.in = heads_of<T>(c.p);
    favor::Estimator<T> drawn;
    {
        py::gil_scoped_release free;
        drawn = favor::make_estimator<T>(*c.p.opt.variant, c.p.opt.m, c.p.shapes.d, c.p.opt.seed, c.p.opt.trial);
    }
    each_head(c.p, c.in.q.heads.size(), [&](std::size_t h, const favor::ApplyOptions& o) {
        c.heads.push_back(favor::apply_head_saved<T>(drawn, c.in.q.heads[h], c.in.k.heads[h], c.in.v.heads[h], o));
    });
    std::vector<favor::MatView<T>> outs;
    for (const auto& s : c.heads) outs.emplace_back(s.state.out);
    const std::string nonfinite = nonfinite_of<T>(c.p, outs);
    py::object state = py::cast(std::move(owned));
    std::vector<py::ssize_t> shape(c.p.shapes.lead.begin(), c.p.shapes.lead.end());
    shape.push_back(py::ssize_t(c.p.shapes.L));
    shape.push_back(py::ssize_t(c.p.shapes.dv));
    py::array_t<T> out;
    if (outs.size() == 1) {
        out = py::array_t<T>(shape, outs[0].data(), state);
    } else {
        out = py::array_t<T>(shape);
        T* dst = out.mutable_data();
        for (const auto& h : outs) dst = std::copy(h.data(), h.data() + h.size(), dst);
    }
    return py::make_tuple(out, texts_of(c.p.warnings), text_of(nonfinite), state);
}

// `save`: favor.torch's forward, which keeps a state for attention_backward where
// apply_head_saved serves (saves_head); the state is None otherwise (and without `save`).
py::tuple attention(const py::array& q, const py::array& k, const py::array& v, bool exact, bool causal,
                    const py::dict& flags, const std::vector<std::string>& params, const Text& max_memory, bool save) {
    Prepared p = prepare(q, k, v, apply_request(exact, causal, flags, params), flags, max_memory, false);
    const bool f64 = p.opt.dtype == favor::DType::float64;
    if (save && favor::saves_head(p.opt))
        return f64 ? attention_saved_of<double>(std::move(p), py::make_tuple(q, k, v))
                   : attention_saved_of<float>(std::move(p), py::make_tuple(q, k, v));
    return f64 ? attention_of<double>(p) : attention_of<float>(p);
}

// (dq, dk, dv) of a saved call for g (lead + (L, dv) in favor's order, checked as attention_grad
// checks it): favor_backward_saved per head, attention_grad's numbers bit for bit, in the
// compute type. The state is only read: a second backward gives the same.
template <class T>
py::tuple backward_of(const SavedCall<T>& c, const py::array& g) {
    const Prepared& p = c.p;
    const int threads = favor::resolve_threads(p.opt.threads);
    favor::HeadViews<T> G;
    {
        py::gil_scoped_release free;
        G = favor::upstream_views_of_array<T>(view_of(g), p.shapes.lead, p.shapes.L, p.shapes.dv, "g", threads);
    }
    favor::set_blas_single_threaded();   // as prepare (the causal backward's products)
    std::vector<favor::Mat<T>> dq, dk, dv;
    each_head(p, c.heads.size(), [&](std::size_t h, const favor::ApplyOptions& o) {
        const favor::SavedHead<T>& s = c.heads[h];
        favor::Gradients<T> r = favor::favor_backward_saved(s.est, c.in.q.heads[h], c.in.k.heads[h], c.in.v.heads[h],
                                                            G.heads[h], s.state, o.causal, threads);
        dq.push_back(std::move(r.dQ)), dk.push_back(std::move(r.dK)), dv.push_back(std::move(r.dV));
    });
    return py::make_tuple(to_numpy(std::move(dq), p.shapes.lead), to_numpy(std::move(dk), p.shapes.lead),
                          to_numpy(std::move(dv), p.shapes.lead));
}

py::tuple attention_backward(Saved& s, const py::array& g) {
    return s.f64 ? backward_of(*s.f64, g) : backward_of(*s.f32, g);
}

py::tuple attention_grad(const py::array& q, const py::array& k, const py::array& v, const py::array& g, bool exact,
                         bool causal, const py::dict& flags, const std::vector<std::string>& params,
                         const Text& max_memory) {
    const Prepared p = prepare(q, k, v, apply_request(exact, causal, flags, params), flags, max_memory, true);
    const favor::ArrayView gv = view_of(g);
    favor::HeadGradients grads;
    favor::HeadTensors in;
    std::vector<favor::Mat<double>> G;
    {
        py::gil_scoped_release free;
        in = favor::heads_of_arrays(p.q, p.k, p.v, p.opt.causal);
        favor::check_apply_sizes(p.opt, p.shapes.d, p.shapes.L, p.shapes.Lk, favor::weight_heads(p.shapes.lead));   // as heads_of
        G = favor::upstream_of_array(gv, in, p.shapes.dv, "g");
    }
    each_head(p, in.q.size(), [&](std::size_t h, const favor::ApplyOptions&) { favor::add_head_gradients(in, G, p.opt, h, grads); });
    const bool f32 = p.opt.dtype == favor::DType::float32;
    return py::make_tuple(to_numpy(std::move(grads.dq), p.shapes.lead, f32),
                          to_numpy(std::move(grads.dk), p.shapes.lead, f32),
                          to_numpy(std::move(grads.dv), p.shapes.lead, f32), texts_of(p.warnings));
}

py::tuple features(const py::array& x, const py::object& other, bool key_side, const py::dict& flags,
                   const std::vector<std::string>& params) {
    favor::ApplyOptions opt = favor::resolve_apply(apply_request(false, false, flags, params));
    favor::set_blas_single_threaded();
    const char *xname = key_side ? "k" : "q", *oname = key_side ? "q" : "k";
    const favor::QkvSource src = layout_source(flag_of(flags, "layout"), false);
    const favor::ArrayView xv = favor::canonical_view(view_of(x), src.layout, xname);
    const favor::ArrayView ov = other.is_none() ? xv : favor::canonical_view(view_of(other.cast<py::array>()), src.layout, oname);
    // Both sides' shapes checked as apply checks q and k (with no other: x as both)
    const favor::QkvShapes s = key_side ? favor::check_source_shapes(ov.shape, xv.shape, xv.shape, "q", "k", "k", src)
                                        : favor::check_source_shapes(xv.shape, ov.shape, ov.shape, "q", "k", "k", src);
    const std::vector<std::size_t> lead = s.lead;
    std::vector<favor::Mat<double>> xs, ys, phi, logs;
    {
        py::gil_scoped_release free;
        if (!other.is_none()) ys = favor::heads_of_array(ov, oname);
        xs = favor::heads_of_array(xv, xname);
        const std::size_t H = favor::weight_heads(lead);
        favor::check_apply_sizes(opt, s.d, s.L, s.Lk, H);
        for (std::size_t h = 0; h < xs.size(); ++h) {
            opt.head = h % H;
            const favor::Mat<double>& y = ys.empty() ? xs[h] : ys[h];
            favor::HeadFeatures f = key_side ? favor::apply_features(y, xs[h], favor::Side::key, opt)
                                             : favor::apply_features(xs[h], y, favor::Side::query, opt);
            phi.push_back(std::move(f.phi));
            favor::Mat<double> l = favor::Mat<double>::from_shape({f.log_scale.size(), 1});
            std::copy(f.log_scale.begin(), f.log_scale.end(), l.begin());
            logs.push_back(std::move(l));
        }
    }
    const bool f32 = opt.dtype != favor::DType::float64;
    return py::make_tuple(to_numpy(std::move(phi), lead, f32), to_numpy(std::move(logs), lead, false),
                          texts_of(s.warnings));
}

py::array projection(const std::string& name, const std::string& m, const std::string& d, const std::string& seed,
                     const Text& trial) {
    const favor::ProjectionDraw w = favor::resolve_projection({name, m, d, seed, trial});
    std::vector<favor::Mat<double>> W;
    {
        py::gil_scoped_release free;
        W.push_back(favor::draw_projection(w.projection, w.m, w.d, w.seed, w.trial));
    }
    return to_numpy(std::move(W), {}, false);
}

// A config variant (docs/design.md section 5) as a run resolves it, for favor.swap_in, whose
// result sets have a run's columns: its table name, features and projection cells, its feature
// columns at m in dimension d (the num_features cell; 0 for "exact", favor's exact attention;
// a non-causal window's 2w - 1 keys counted when causal is false), whether its map uses m, and
// its resolved object (JSON text).
// Messages name `file` and `path` as a config's do ("swap_in: variants[1].features: ...").
py::dict variant_info(const std::string& text, const std::string& file, const std::string& path, std::size_t m,
                      std::size_t d, bool causal) {
    const favor::Variant v = favor::parse_variant(nlohmann::json::parse(text), favor::Field(file, path), true, "");
    py::dict out;
    out["name"] = text_of(v.name);
    out["features"] = text_of(v.features_label());
    out["projection"] = text_of(v.projection_label());
    out["num_features"] = v.num_features(m, d, causal);
    out["uses_m"] = !v.exact && v.map->uses_m();
    out["resolved"] = text_of(v.resolved().dump());
    return out;
}

favor::ConfigSource source_of(const std::string& config, const Text& text) { return {config, text}; }

// The CSV files of a result set, by name, and run.json.
py::dict files_of(const favor::RunResult& r) {
    py::dict files;
    for (const auto& [name, bytes] : favor::result_files(r)) files[py::str(name)] = py::bytes(bytes);
    return files;
}

py::dict run(const std::string& config, const Text& text, const py::dict& flags, const std::vector<std::string>& sets,
             bool resume) {
    favor::RunRequest r;
    r.source = source_of(config, text);
    auto get = [&](const char* key) { return flag_of(flags, key); };
    r.out = get("out");
    r.m = get("m");
    r.num_features = get("num_features");
    r.L = get("L");
    r.trials = get("trials");
    r.seed = get("seed");
    r.dtype = get("dtype");
    r.shard = get("shard");
    r.threads = get("threads");
    r.max_memory = get("max_memory");
    r.sets = sets;
    r.resume = resume;
    std::vector<std::string> warnings, notes;
    favor::RunHooks hooks;
    hooks.warn = [&](const std::string& w) { warnings.push_back(w); };
    hooks.note = [&](const std::string& n) { notes.push_back(n); };
    favor::RunOutcome o;
    {
        py::gil_scoped_release free;
        o = favor::run_session(r, hooks);
    }
    if (!o.result.complete) {
        PyErr_SetString(PyExc_KeyboardInterrupt,
                        (favor::stop_report(o) + "; continue with favor.run(..., resume=True)").c_str());
        throw py::error_already_set();
    }
    py::dict d;
    d["files"] = files_of(o.result);
    d["out"] = text_of(o.out);
    d["notes_md"] = text_of(o.result.notes_md);
    d["warnings"] = texts_of(warnings);
    d["notes"] = texts_of(notes);
    return d;
}

py::dict validate(const std::string& config, const Text& text, const std::vector<std::string>& sets, const Text& threads,
                  const Text& max_memory, const Text& shard, const Text& m, const Text& num_features, const Text& L) {
    favor::ValidateReport v;
    {
        py::gil_scoped_release free;
        v = favor::validate_session({source_of(config, text), sets, threads, max_memory, shard, m, num_features, L});
    }
    py::dict d;
    d["text"] = text_of(v.text);
    d["warnings"] = texts_of(v.warnings);
    d["config"] = text_of(v.config.resolved().dump());
    d["cells"] = v.cells;
    d["threads"] = v.plan.threads;
    d["peak_bytes"] = v.plan.cost.peak;
    d["seconds"] = v.plan.cost.seconds;
    d["estimate"] = v.plan.cost.summary();
    d["budget_bytes"] = v.budget.bytes;
    d["budget_source"] = text_of(v.budget.source);
    return d;
}

py::dict compare(const std::string& dir, const std::vector<std::string>& metrics, const Text& alpha, const Text& pairs,
                 const Text& against, const Text& match, bool write) {
    favor::CompareResult r;
    favor::CompareOptions used;
    {
        py::gil_scoped_release free;
        r = favor::compare_session({dir, metrics, alpha, pairs, against, match, write}, &used);
    }
    py::dict d;   // the tables as CSV bytes (every metric's rows; written, one file per metric, with write)
    d["comparisons"] = py::bytes(favor::to_csv(r.comparisons));
    d["ranking"] = py::bytes(favor::to_csv(r.ranking));
    d["metrics"] = texts_of(r.metrics);
    d["description"] = text_of(favor::compare_description(used));
    d["warnings"] = texts_of(r.warnings);
    d["summary"] = texts_of(r.summary);
    return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "favor's library: the computations behind the favor command line (see the favor package)";
    // favor.Error (a ValueError) with the library's message decoded by text_of: a message
    // naming a non-UTF-8 path keeps every byte (register_exception's strict decode would
    // leave an empty exception).
    static py::exception<favor::Error> error(m, "Error", PyExc_ValueError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const favor::Error& e) {
            PyErr_SetObject(error.ptr(), text_of(e.what()).ptr());
        }
    });
    py::class_<Saved>(m, "Saved", "favor.torch's saved forward (opaque): what attention_backward reads");
    m.def("attention", &attention);
    m.def("attention_backward", &attention_backward);
    m.def("attention_grad", &attention_grad);
    m.def("features", &features);
    m.def("projection", &projection);
    m.def("run", &run);
    m.def("validate", &validate);
    m.def("compare", &compare);
    m.def("variant_info", &variant_info, py::arg("text"), py::arg("file"), py::arg("path"), py::arg("m"), py::arg("d"),
          py::arg("causal") = true);
    m.def("version", &favor::version_text);
    m.def("utf8_problem", [](const py::bytes& b) { return favor::utf8_problem(std::string(b)); });
    // perm[j]: the axis of a `layout` array that becomes axis j of favor's order; empty for a
    // layout that is not valid (the reading function then refuses it with the CLI's line).
    m.def("layout_permutation", [](const std::string& layout) {
        return favor::layout_problem(layout).empty() ? favor::layout_permutation(layout) : std::vector<std::size_t>{};
    });
}
