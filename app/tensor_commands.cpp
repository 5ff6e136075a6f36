// `favor gen`, `favor projection` and `favor apply`: the tensors a run draws (q, k, v and W),
// written as .npy files, and attention of given .npy tensors.
#include <iostream>
#include <limits>

#include "command.hpp"
#include "favor/core/error.hpp"
#include "favor/estimators/projections.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/io/files.hpp"
#include "favor/io/npy.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/io/tensor_layout.hpp"
#include "favor/runs/apply.hpp"
#include "favor/runs/apply_files.hpp"
#include "favor/runs/tensor_requests.hpp"

namespace favor::cli {
namespace {

struct GenFlags {
    Text L, d, dv, scale, seed, dtype, out, max_memory;
    std::vector<std::string> family;   // KEY=VALUE: input family keys (input_families.hpp)
};
GenFlags& gen_flags() {
    static GenFlags f;
    return f;
}

struct ProjectionFlags {
    Text projection, m, d, seed, trial, out, max_memory;
};
ProjectionFlags& projection_flags() {
    static ProjectionFlags f;
    return f;
}

struct ApplyFlags {
    Text q, k, v, layout, out, features, projection, m, seed, trial, epsilon, epsilon_after, A, window, sinks, support, dtype,
        threads, max_memory, grad;
    std::vector<std::string> params;
    bool exact = false, causal = false;
};
ApplyFlags& apply_flags() {
    static ApplyFlags f;
    return f;
}

}  // namespace

void setup_gen(CLI::App& gen) {
    GenFlags& gf = gen_flags();
    bind(gen, gf.L, "--L", "sequence length");
    gf.L.opt->required();
    bind(gen, gf.d, "--d", "head dimension");
    gf.d.opt->required();
    bind(gen, {
        {&gf.dv, "--dv", "value dimension (default d)"},
        {&gf.scale, "--scale", "entries N(0, scale^2) (default 1)"},
        {&gf.seed, "--seed", "seed (default 0)"},
        {&gf.dtype, "--dtype", "float32, float64 (default), float16 or bfloat16 (float32 files, values rounded)"},
    });
    gen.add_option("--family", gf.family,
                   "an input family key as in a random inputs object, KEY=VALUE (repeatable), e.g. decay_q=1.5, "
                   "rope_base=10000 (docs/input_families.md)");
    bind(gen, gf.out, "--out", "output directory");
    gf.out.opt->required();
    bind(gen, gf.max_memory, "--max-memory", "memory budget, e.g. 8G");
}

// Writes q.npy, k.npy, v.npy: exactly the random inputs a run with these values uses.
int run_gen(const std::vector<std::string>&) {
    const GenFlags& g = gen_flags();
    const std::size_t L = parse_uint_text("gen: --L", *g.L, 1, kMaxL);
    const std::size_t d = parse_uint_text("gen: --d", *g.d, 1, kMaxD);
    const std::size_t dv = g.dv ? parse_uint_text("gen: --dv", *g.dv, 1, kMaxD) : d;
    const double scale = g.scale ? parse_number_text("gen: --scale", *g.scale) : 1.0;
    if (!(scale > 0)) throw Error("gen: --scale: must be > 0, got " + *g.scale);
    const std::uint64_t seed =
        g.seed ? parse_uint_text("gen: --seed", *g.seed, 0, std::numeric_limits<std::uint64_t>::max()) : 0;
    const DType dtype =
        g.dtype ? parse_dtype(*g.dtype, Field{"gen", "", "--"}.at("dtype")) : DType::float64;
    const bool f32 = dtype != DType::float64;   // half dtypes: float32 files holding the rounded values
    const InputFamily family = parse_family_flags(g.family);
    check_family_dimension(family, d, Field{"gen", "", "--family "});
    if (g.out->empty()) throw Error("gen: --out: empty value (expected a directory)");
    const Cost cost = estimate_gen(L, d, dv, family.decay_q != 0 || family.decay_k != 0);
    const MemoryBudget budget = budget_of("gen", g.max_memory);
    check_memory(cost, budget, "gen");
    note_estimate(cost.peak, budget);
    check_output_dir(*g.out);
    OutputDir dir(*g.out, SetKind::tensors);   // q, k, v swapped in together
    QKV in = random_inputs(seed, L, d, dv, scale, {family, 0, "gen: --scale"});
    for (Mat<double>* m : {&in.q, &in.k, &in.v}) {   // as a run in a half dtype rounds them
        if (dtype_rounding(dtype) == Rounding::none) break;
        Mat<float> f = cast_mat<float>(*m);
        round_to(dtype_rounding(dtype), f.data(), f.size());
        *m = cast_mat<double>(f);
    }
    ResultFiles files;
    for (const auto& [name, m] : {std::pair{"q.npy", &in.q}, {"k.npy", &in.k}, {"v.npy", &in.v}})
        files.emplace_back(name, heads_npy_bytes(dir.file(name), {}, {*m}, f32));
    dir.replace(files);
    return 0;
}

void setup_projection(CLI::App& proj) {
    ProjectionFlags& pf = projection_flags();
    bind(proj, {
        {&pf.projection, "--projection", "iid, orthogonal, ... (favor list)"},
        {&pf.m, "--m", "number of random vectors"},
        {&pf.d, "--d", "dimension"},
        {&pf.seed, "--seed", "seed"},
        {&pf.trial, "--trial", "trial (default 0)"},
        {&pf.out, "--out", "output .npy file"},
        {&pf.max_memory, "--max-memory", "memory budget, e.g. 8G"},
    });
    for (Text* t : {&pf.projection, &pf.m, &pf.d, &pf.seed, &pf.out}) t->opt->required();
}

// Writes W (m, d): exactly the matrix a run draws for (seed, projection, m, d, trial).
int run_projection(const std::vector<std::string>&) {
    const ProjectionFlags& p = projection_flags();
    const ProjectionDraw w = resolve_projection({*p.projection, *p.m, *p.d, *p.seed, p.trial.get()});
    if (p.out->empty()) throw Error("projection: --out: empty value (expected a .npy file)");
    const Cost cost = estimate_projection(w.m, w.d);
    const MemoryBudget budget = budget_of("projection", p.max_memory);
    check_memory(cost, budget, "projection");
    note_estimate(cost.peak, budget);
    check_output_file(*p.out);
    const Mat<double> W = draw_projection(w.projection, w.m, w.d, w.seed, w.trial);
    write_npy(*p.out, {w.m, w.d}, W.data(), false);
    return 0;
}

void setup_apply(CLI::App& apply) {
    ApplyFlags& af = apply_flags();
    bind(apply, {
        {&af.q, "--q", "queries: Q.npy, Q.npz[:NAME] or Q.safetensors[:NAME] (NAME default q); (L, d), (H, L, d) "
                       "or (B, H, L, d), or the axes --layout names"},
        {&af.k, "--k", "keys (as --q; NAME default k), same leading shape and d"},
        {&af.v, "--v", "values (as --q; NAME default v), same leading shape and length as k"},
        {&af.layout, "--layout", "axes of the three files, e.g. BLHD for (B, L, H, d) (default: by rank, BHLD); --grad's "
                                 "G is read and the outputs written in it too"},
    });
    apply.add_flag("--exact", af.exact, "exact softmax attention");
    bind(apply, {
        {&af.features, "--features", "feature map (favor list)"},
        {&af.projection, "--projection", "projection (default orthogonal, iid for maclaurin; not for the maps `favor list` marks \"no projection\")"},
        {&af.m, "--m", "number of random vectors (nystrom: landmarks; not for the maps of a fixed F, e.g. elu)"},
        {&af.seed, "--seed", "seed of W (default 0)"},
        {&af.trial, "--trial", "trial of W (default 0)"},
        {&af.epsilon, "--epsilon", "stabiliser added to each feature (default 0)"},
        {&af.epsilon_after, "--epsilon-after",
         "where epsilon is added: max_exponent (after subtracting max(w.x - |x|^2/2), default) or max_wx "
         "(after subtracting max(w.x), the official code's)"},
        {&af.A, "--A", "oprf/gerf parameter: a number < 1/8 or 'optimal' (default)"},
        {&af.window, "--window", "hybrid: keys within this distance of the query exact, the rest by the features "
                                 "(default 0; --features none: sliding-window softmax)"},
        {&af.sinks, "--sinks", "hybrid: the first this many keys exact (attention sinks; default 0)"},
        {&af.support, "--support", "hybrid support: window (default) or topk (oracle: each row's --window largest scores exact)"},
    });
    apply.add_option("--param", af.params,
                     "a parameter of the feature map as in a config variant, KEY=VALUE (repeatable), e.g. t=0.8 "
                     "(gerf), nu=2 (dpfp), pinv=exact (nystrom)");
    apply.add_flag("--causal", af.causal, "unidirectional (causal) attention");
    bind(apply, {
        {&af.dtype, "--dtype", "compute and output precision: float32, float64 (default), float16 or bfloat16 (emulated)"},
        {&af.threads, "--threads", "threads (default all; the numbers do not depend on it)"},
        {&af.out, "--out", "output .npy file"},
        {&af.grad, "--grad", "upstream gradient dLoss/dOut .npy (the output's shape): also writes OUT_dq.npy, OUT_dk.npy, OUT_dv.npy (OUT: --out without .npy)"},
        {&af.max_memory, "--max-memory", "memory budget, e.g. 8G"},
    });
    for (Text* t : {&af.q, &af.k, &af.v, &af.out}) t->opt->required();
    apply.footer("Exit code 3: the output was written but some entries are not finite (one line says how many, "
                 "the first row and the likely cause).");
}

// Writes the exact or approximate attention output of given tensors (shape lead + (L, d_v)).
// Exit 3 (after writing) when some output entry is not finite.
int run_apply(const std::vector<std::string>&) {
    const ApplyFlags& a = apply_flags();
    for (const Text* t : {&a.q, &a.k, &a.v, &a.out})
        if (t->value.empty())
            throw Error("apply: " + t->opt->get_name() + ": empty value (expected a .npy file)");
    ApplyRequest req;
    req.exact = a.exact;
    req.causal = a.causal;
    req.features = a.features.get();
    req.projection = a.projection.get();
    req.m = a.m.get();
    req.seed = a.seed.get();
    req.trial = a.trial.get();
    req.epsilon = a.epsilon.get();
    req.epsilon_after = a.epsilon_after.get();
    req.A = a.A.get();
    req.window = a.window.get();
    req.sinks = a.sinks.get();
    req.support = a.support.get();
    req.dtype = a.dtype.get();
    req.threads = a.threads.get();
    req.params = a.params;
    ApplyOptions o = resolve_apply(req);
    QkvSource src;
    src.q = *a.q, src.k = *a.k, src.v = *a.v, src.causal = o.causal;
    src.layout_field = "--layout";
    if (a.layout.get()) {
        src.layout = *a.layout;
        if (const std::string why = layout_problem(src.layout); !why.empty()) throw Error("apply: --layout: " + why);
    }
    const QkvShapes shapes = read_qkv_shapes(src);
    for (const auto& w : shapes.warnings) warn(w);
    if (a.grad.get()) check_apply_grad(o, *a.grad, &shapes, src.layout);
    const MemoryBudget budget = budget_of("apply", a.max_memory);
    const ApplyPlan plan = plan_apply(o, shapes, budget, bool(a.grad.get()));
    check_apply_files(src, a.grad.get(), *a.out);
    for (const auto& w : plan.warnings) warn(w);
    o.threads = plan.threads;
    note_estimate(plan.cost.peak, budget);
    const HeadTensors in = load_qkv(src);
    const std::string nonfinite = write_apply(compute_apply(in, o, a.grad.get(), src.layout), in, o, *a.out, src.layout);
    if (nonfinite.empty()) return 0;
    std::cerr << "favor: " << one_line(nonfinite) << "\n";
    return 3;
}

}  // namespace favor::cli
