// favor._core: the Python bindings of the library (docs/design.md section 9). Conversions and
// dispatch only: every check and every number comes from lib/ through the entry points the
// CLI calls (tensor_requests.hpp, apply.hpp, apply_grad.hpp, run_session.hpp), so results and
// messages are the CLI's. The keyword handling, dtype policy and DataFrames are in
// python/favor/__init__.py; values arrive here as the CLI's flag texts.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "favor/apply.hpp"
#include "favor/apply_grad.hpp"
#include "favor/array_view.hpp"
#include "favor/blas.hpp"
#include "favor/error.hpp"
#include "favor/experiment.hpp"
#include "favor/parallel.hpp"
#include "favor/run_session.hpp"
#include "favor/tensor_requests.hpp"

namespace py = pybind11;
using Text = std::optional<std::string>;

namespace {

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
                 const Text& max_memory, bool grad) {
    Prepared p;
    p.opt = favor::resolve_apply(req);
    p.q = view_of(q), p.k = view_of(k), p.v = view_of(v);
    p.shapes = favor::check_qkv_shapes(p.q.shape, p.k.shape, p.v.shape, "q", "k", "v", p.opt.causal);
    if (grad) favor::check_apply_grad(p.opt);
    const favor::ApplyPlan plan = favor::plan_apply(p.opt, p.shapes, favor::budget_of_text("apply", max_memory), grad);
    p.opt.threads = plan.threads;
    p.warnings = plan.warnings;
    favor::set_blas_single_threaded();   // as the CLI runs (favor's own threads split the work)
    return p;
}

// Raises KeyboardInterrupt (or what a signal handler raised) when Ctrl-C came meanwhile.
void check_signals() {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// The heads' outputs in the compute type: q, k, v read in place where they are C-contiguous
// arrays of it, converted into it otherwise (what apply_attention casts its float64 heads to:
// the same values), then apply_head_native head by head, Ctrl-C checked between.
template <class T>
std::vector<favor::Mat<T>> attend(const Prepared& p) {
    favor::HeadViews<T> Q, K, V;
    {
        py::gil_scoped_release free;
        const int threads = favor::resolve_threads(p.opt.threads);
        Q = favor::head_views_of_array<T>(p.q, "q", threads);
        K = favor::head_views_of_array<T>(p.k, "k", threads);
        V = favor::head_views_of_array<T>(p.v, "v", threads);
        favor::check_apply_sizes(p.opt, p.shapes.d, p.shapes.L, p.shapes.Lk);
    }
    std::vector<favor::Mat<T>> out;
    for (std::size_t h = 0; h < Q.heads.size(); ++h) {
        {
            py::gil_scoped_release free;
            out.push_back(favor::apply_head_native<T>(Q.heads[h], K.heads[h], V.heads[h], p.opt));
        }
        check_signals();
    }
    return out;
}

// Whether every entry is finite (favor::all_finite per head: a vectorised scan on the call's threads).
template <class T>
bool all_finite(const std::vector<favor::Mat<T>>& out, int threads) {
    for (const auto& h : out)
        if (!favor::all_finite(h.data(), h.size(), threads)) return false;
    return true;
}

// attention's result: the heads as one array (its dtype the compute type: float32 for every
// dtype but float64, as `favor apply --out` writes), the plan's warnings, and apply's
// explanation when an output is not finite (from the inputs as float64 heads).
template <class T>
py::tuple attention_of(const Prepared& p) {
    std::vector<favor::Mat<T>> out = attend<T>(p);
    std::string nonfinite;
    if (!all_finite(out, favor::resolve_threads(p.opt.threads))) {
        const favor::HeadTensors in = favor::heads_of_arrays(p.q, p.k, p.v, p.opt.causal);
        std::vector<favor::Mat<double>> wide;
        std::size_t total = 0;
        for (const auto& h : out) wide.push_back(favor::cast_mat<double>(h)), total += h.size();
        if (const auto bad = favor::find_nonfinite(in, wide, p.opt)) nonfinite = bad->message(total);
    }
    return py::make_tuple(to_numpy(std::move(out), p.shapes.lead), p.warnings, nonfinite);
}

py::tuple attention(const py::array& q, const py::array& k, const py::array& v, bool exact, bool causal,
                    const py::dict& flags, const std::vector<std::string>& params, const Text& max_memory) {
    const Prepared p = prepare(q, k, v, apply_request(exact, causal, flags, params), max_memory, false);
    return p.opt.dtype == favor::DType::float64 ? attention_of<double>(p) : attention_of<float>(p);
}

py::tuple attention_grad(const py::array& q, const py::array& k, const py::array& v, const py::array& g, bool exact,
                         bool causal, const py::dict& flags, const std::vector<std::string>& params,
                         const Text& max_memory) {
    const Prepared p = prepare(q, k, v, apply_request(exact, causal, flags, params), max_memory, true);
    const favor::ArrayView gv = view_of(g);
    favor::HeadGradients grads;
    {
        py::gil_scoped_release free;
        const favor::HeadTensors in = favor::heads_of_arrays(p.q, p.k, p.v, p.opt.causal);
        const std::vector<favor::Mat<double>> G = favor::upstream_of_array(gv, in, p.shapes.dv, "g");
        grads = favor::apply_gradients(in, G, p.opt);
    }
    const bool f32 = p.opt.dtype == favor::DType::float32;
    return py::make_tuple(to_numpy(std::move(grads.dq), p.shapes.lead, f32),
                          to_numpy(std::move(grads.dk), p.shapes.lead, f32),
                          to_numpy(std::move(grads.dv), p.shapes.lead, f32), p.warnings);
}

py::tuple features(const py::array& x, const py::object& other, bool key_side, const py::dict& flags,
                   const std::vector<std::string>& params) {
    const favor::ApplyOptions opt = favor::resolve_apply(apply_request(false, false, flags, params));
    favor::set_blas_single_threaded();
    const char* xname = key_side ? "k" : "q";
    const favor::ArrayView xv = view_of(x);
    std::vector<favor::Mat<double>> xs, ys, phi, logs;
    std::vector<std::size_t> lead;
    if (!other.is_none()) {   // the other side, as in apply: its shapes checked with the same messages
        const favor::ArrayView ov = view_of(other.cast<py::array>());
        const auto s = key_side ? favor::check_qkv_shapes(ov.shape, xv.shape, xv.shape, "q", "k", "k", false)
                                : favor::check_qkv_shapes(xv.shape, ov.shape, ov.shape, "q", "k", "k", false);
        lead = s.lead;
        py::gil_scoped_release free;
        ys = favor::heads_of_array(ov, key_side ? "q" : "k");
    }
    {
        py::gil_scoped_release free;
        xs = favor::heads_of_array(xv, xname);
        if (other.is_none()) lead.assign(xv.shape.begin(), xv.shape.end() - 2);
        for (std::size_t h = 0; h < xs.size(); ++h) {
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
    return py::make_tuple(to_numpy(std::move(phi), lead, f32), to_numpy(std::move(logs), lead, false));
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
    d["out"] = o.out;
    d["notes_md"] = o.result.notes_md;
    d["warnings"] = warnings;
    d["notes"] = notes;
    return d;
}

py::dict validate(const std::string& config, const Text& text, const std::vector<std::string>& sets, const Text& threads,
                  const Text& max_memory, const Text& shard) {
    favor::ValidateReport v;
    {
        py::gil_scoped_release free;
        v = favor::validate_session({source_of(config, text), sets, threads, max_memory, shard});
    }
    py::dict d;
    d["text"] = v.text;
    d["warnings"] = v.warnings;
    d["config"] = v.config.resolved().dump();
    d["cells"] = v.cells;
    d["threads"] = v.plan.threads;
    d["peak_bytes"] = v.plan.cost.peak;
    d["seconds"] = v.plan.cost.seconds;
    d["estimate"] = v.plan.cost.summary();
    d["budget_bytes"] = v.budget.bytes;
    d["budget_source"] = v.budget.source;
    return d;
}

py::dict compare(const std::string& dir, const std::vector<std::string>& metrics, const Text& alpha, const Text& pairs,
                 const Text& against, const Text& match) {
    favor::CompareResult r;
    favor::CompareOptions used;
    {
        py::gil_scoped_release free;
        r = favor::compare_session({dir, metrics, alpha, pairs, against, match}, &used);
    }
    py::dict d;   // the tables: DIR/comparisons.csv and DIR/ranking.csv, as written
    d["description"] = favor::compare_description(used);
    d["warnings"] = r.warnings;
    d["summary"] = r.summary;
    return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "favor's library: the computations behind the favor command line (see the favor package)";
    py::register_exception<favor::Error>(m, "Error", PyExc_ValueError);
    m.def("attention", &attention);
    m.def("attention_grad", &attention_grad);
    m.def("features", &features);
    m.def("projection", &projection);
    m.def("run", &run);
    m.def("validate", &validate);
    m.def("compare", &compare);
    m.def("version", &favor::version_text);
}
