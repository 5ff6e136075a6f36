// Input families (input_families.hpp, docs/input_families.md): each knob's statistic against
// what was asked, with tolerances of a few standard deviations of the estimate at the sample
// size; nesting in L; identical numbers for any thread count and shard split; config errors
// that name the field.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <set>

#include "helpers.hpp"
#include "favor/core/error.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/structured.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/inputs.hpp"

using namespace favor;
using nlohmann::json;

namespace {

InputFamily family(const json& keys) { return parse_family(keys, Field{"t.json", "inputs"}); }

double dot(const double* a, const double* b, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Sample variance of the rows of x along the unit direction b (rows centred at 0: the
// family has no offset here), and the sample covariance along two directions.
double second_moment(const Mat<double>& x, const double* a, const double* b) {
    double s = 0;
    for (std::size_t i = 0; i < x.shape(0); ++i) s += dot(&x(i, 0), a, x.shape(1)) * dot(&x(i, 0), b, x.shape(1));
    return s / double(x.shape(0));
}

// lambda_k of the requested spectrum: (k + 1)^-alpha scaled to mean 1.
double eigenvalue(double alpha, std::size_t k, std::size_t d) {
    double sum = 0;
    for (std::size_t i = 0; i < d; ++i) sum += std::pow(double(i + 1), -alpha);
    return std::pow(double(k + 1), -alpha) * double(d) / sum;
}

// The second moments of x along the rows b_k of `basis` are lambda_k scale^2; off the diagonal
// 0. A sample second moment of n Gaussian values of variance v has standard deviation
// v sqrt(2 / n) (off-diagonal: sqrt(v_a v_b / n)); allowed: 5 of them.
void check_spectrum(const Mat<double>& x, const Mat<double>& basis, double alpha, double scale) {
    const std::size_t n = x.shape(0), d = x.shape(1);
    for (std::size_t a = 0; a < d; ++a)
        for (std::size_t b = a; b < d; ++b) {
            const double va = eigenvalue(alpha, a, d) * scale * scale, vb = eigenvalue(alpha, b, d) * scale * scale;
            const double got = second_moment(x, &basis(a, 0), &basis(b, 0));
            CAPTURE(a, b, va, vb, got);
            if (a == b) REQUIRE(std::fabs(got - va) < 5 * va * std::sqrt(2.0 / double(n)));
            else REQUIRE(std::fabs(got) < 5 * std::sqrt(va * vb / double(n)));
        }
}

Mat<double> basis_of(std::uint64_t seed, const char* name, std::size_t d) {
    return orthogonal_block(stream_key({seed, tag(name), d}), d, true);
}

}  // namespace

TEST_CASE("families: the covariance of Q and K has the requested eigenvalues along the seed's basis", "[families]") {
    const std::uint64_t seed = 7;
    const std::size_t L = 20000, d = 6;
    const double scale = 0.8;
    SECTION("shared basis: K's eigenvectors are Q's") {
        const QKV in = random_inputs(seed, L, d, 2, scale, {family({{"decay_q", 1.5}, {"decay_k", 0.7}})});
        check_spectrum(in.q, basis_of(seed, "inputs-basis-q", d), 1.5, scale);
        check_spectrum(in.k, basis_of(seed, "inputs-basis-q", d), 0.7, scale);
    }
    SECTION("separate bases") {
        const QKV in = random_inputs(seed, L, d, 2, scale, {family({{"decay_q", 2.0}, {"decay_k", 1.0}, {"shared_basis", false}})});
        check_spectrum(in.q, basis_of(seed, "inputs-basis-q", d), 2.0, scale);
        check_spectrum(in.k, basis_of(seed, "inputs-basis-k", d), 1.0, scale);
    }
}

TEST_CASE("families: the offset is a fixed vector of the requested norm, at the requested cosine", "[families]") {
    const std::uint64_t seed = 3;
    const std::size_t L = 4000, d = 16;
    const double scale = 0.5, oq = 3.0, ok = 6.0, cosine = 0.6;
    const QKV base = random_inputs(seed, L, d, 4, scale);
    const QKV in = random_inputs(seed, L, d, 4, scale, {family({{"offset_q", oq}, {"offset_k", ok}, {"offset_cos", cosine}})});
    // Every row moved by the same vector, of norm offset * scale.
    std::vector<double> uq(d), uk(d);
    for (std::size_t c = 0; c < d; ++c) {
        uq[c] = (in.q(0, c) - base.q(0, c)) / (oq * scale);
        uk[c] = (in.k(0, c) - base.k(0, c)) / (ok * scale);
    }
    REQUIRE(std::sqrt(dot(uq.data(), uq.data(), d)) == Approx(1.0).epsilon(1e-12));
    REQUIRE(std::sqrt(dot(uk.data(), uk.data(), d)) == Approx(1.0).epsilon(1e-12));
    REQUIRE(dot(uq.data(), uk.data(), d) == Approx(cosine).epsilon(1e-12));
    for (std::size_t i = 0; i < L; i += 97)
        for (std::size_t c = 0; c < d; ++c) {
            REQUIRE(in.q(i, c) - base.q(i, c) == Approx(oq * scale * uq[c]).margin(1e-12));
            REQUIRE(in.k(i, c) - base.k(i, c) == Approx(ok * scale * uk[c]).margin(1e-12));
        }
    // The sample mean of the keys estimates the offset: |mean - offset|^2 has expectation
    // d scale^2 / L; allowed 5 times its standard deviation's worth (chi^2_d: mean d, sd sqrt(2d)).
    std::vector<double> mean(d, 0.0);
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t c = 0; c < d; ++c) mean[c] += in.k(i, c) / double(L);
    double err = 0;
    for (std::size_t c = 0; c < d; ++c) err += std::pow(mean[c] - ok * scale * uk[c], 2);
    REQUIRE(err < (double(d) + 5 * std::sqrt(2.0 * double(d))) * scale * scale / double(L));
}

TEST_CASE("families: key norms get a log-normal factor of the requested tail", "[families]") {
    const std::uint64_t seed = 11;
    const std::size_t L = 20000, d = 8;
    const double sigma = 0.9, key_scale = 1.7;
    const QKV base = random_inputs(seed, L, d, 2, 1.0);
    const QKV in = random_inputs(seed, L, d, 2, 1.0, {family({{"key_norm_sigma", sigma}, {"key_scale", key_scale}})});
    std::vector<double> g(L);   // (log f + sigma^2) / sigma, f = |k_i| / (key_scale |k_i of the isotropic draw|)
    for (std::size_t i = 0; i < L; ++i) {
        const double f = std::sqrt(dot(&in.k(i, 0), &in.k(i, 0), d) / dot(&base.k(i, 0), &base.k(i, 0), d)) / key_scale;
        g[i] = (std::log(f) + sigma * sigma) / sigma;
    }
    std::sort(g.begin(), g.end());
    // Quantile p of a standard normal sample of n: standard deviation sqrt(p (1 - p) / n) /
    // phi(z_p); allowed 5 of them. z_p for p = 0.01, 0.1, 0.5, 0.9, 0.99.
    const std::vector<std::pair<double, double>> quantiles = {
        {0.01, -2.326348}, {0.1, -1.281552}, {0.5, 0.0}, {0.9, 1.281552}, {0.99, 2.326348}};
    for (auto [p, z] : quantiles) {
        const double got = g[std::size_t(p * double(L))];
        const double phi = std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
        CAPTURE(p, z, got);
        REQUIRE(std::fabs(got - z) < 5 * std::sqrt(p * (1 - p) / double(L)) / phi);
    }
    // Queries untouched.
    REQUIRE(std::equal(in.q.begin(), in.q.end(), base.q.begin()));
}

TEST_CASE("families: RoPE makes q_i . k_j of rotated constant vectors depend on i - j only", "[families]") {
    const std::size_t L = 64, d = 8;
    Mat<double> q = Mat<double>::from_shape({L, d}), k = Mat<double>::from_shape({L, d});
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t c = 0; c < d; ++c) {
            q(i, c) = 0.3 + 0.1 * double(c);
            k(i, c) = 1.0 - 0.2 * double(c);
        }
    const double unrotated = dot(&q(0, 0), &k(0, 0), d);
    apply_rope(q, 100.0);
    apply_rope(k, 100.0);
    std::set<long> offsets_not_unrotated;
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t j = 0; j < L; ++j) {
            const double s = dot(&q(i, 0), &k(j, 0), d);
            const std::size_t i0 = i - std::min(i, j), j0 = j - std::min(i, j);   // same i - j, one index 0
            REQUIRE(s == Approx(dot(&q(i0, 0), &k(j0, 0), d)).margin(1e-12));
            if (std::fabs(s - unrotated) > 1e-3) offsets_not_unrotated.insert(long(i) - long(j));
            if (i == j) REQUIRE(s == Approx(unrotated).margin(1e-12));
        }
    REQUIRE(offsets_not_unrotated.size() == 2 * L - 2);   // every offset but 0 changes the product
    // In a family: the isotropic rows, each rotated by its index.
    const QKV base = random_inputs(5, 100, d, 2, 0.7);
    const QKV in = random_inputs(5, 100, d, 2, 0.7, {family({{"rope_base", 100.0}})});
    Mat<double> rq = base.q;
    apply_rope(rq, 100.0);
    for (std::size_t i = 0; i < rq.size(); ++i) REQUIRE(in.q.data()[i] == Approx(rq.data()[i]).margin(1e-14));
}

TEST_CASE("families: clustered keys sit at the seed's centers with the requested spread", "[families]") {
    const std::uint64_t seed = 2;
    const std::size_t L = 12000, d = 8, n = 6;
    const double s = 0.4;
    const QKV in = random_inputs(seed, L, d, 2, 1.0, {family({{"key_clusters", n}, {"cluster_spread", s}})});
    const std::uint64_t of = stream_key({seed, tag("inputs-cluster-of"), d});
    const std::uint64_t centers = stream_key({seed, tag("inputs-cluster-centers"), d});
    std::vector<std::size_t> count(n, 0);
    std::vector<double> within(n, 0.0);
    std::vector<double> mu(d);
    for (std::size_t i = 0; i < L; ++i) {
        const std::size_t c = std::size_t(double(n) * uniform_at(of, i));
        fill_normal(centers, mu.data(), d, c * d);
        ++count[c];
        for (std::size_t j = 0; j < d; ++j) within[c] += std::pow(in.k(i, j) - std::sqrt(1 - s * s) * mu[j], 2);
    }
    for (std::size_t c = 0; c < n; ++c) {
        // Cluster sizes: binomial(L, 1/n); the within-cluster mean square: s^2 chi^2 / (N d).
        const double p = 1.0 / double(n), N = double(count[c]);
        CAPTURE(c, count[c], within[c] / (N * double(d)));
        REQUIRE(std::fabs(N - double(L) * p) < 5 * std::sqrt(double(L) * p * (1 - p)));
        REQUIRE(std::fabs(within[c] / (N * double(d)) - s * s) < 5 * s * s * std::sqrt(2.0 / (N * double(d))));
    }
}

TEST_CASE("families: every knob keeps the inputs nested in L and scale a plain factor", "[families]") {
    const InputFamily all = family({{"decay_q", 1.0}, {"decay_k", 2.0}, {"shared_basis", false}, {"offset_q", 1.0},
                                    {"offset_k", 4.0}, {"offset_cos", -0.3}, {"key_norm_sigma", 0.5}, {"key_scale", 2.0},
                                    {"rope_base", 1000.0}, {"key_clusters", 3}, {"cluster_spread", 0.5}});
    const QKV small = random_inputs(9, 37, 6, 3, 1.0, {all}), large = random_inputs(9, 300, 6, 3, 1.0, {all});
    const QKV scaled = random_inputs(9, 37, 6, 3, 0.25, {all});
    for (auto [a, b, c] : {std::tuple{&small.q, &large.q, &scaled.q}, {&small.k, &large.k, &scaled.k}, {&small.v, &large.v, &scaled.v}})
        for (std::size_t i = 0; i < a->size(); ++i) {
            REQUIRE(a->data()[i] == b->data()[i]);
            REQUIRE(c->data()[i] == a->data()[i] * 0.25);
        }
    // V is the isotropic draw's.
    const QKV iso = random_inputs(9, 37, 6, 3, 1.0);
    REQUIRE(std::equal(small.v.begin(), small.v.end(), iso.v.begin()));
}

TEST_CASE("families: inputs drawn in blocks, on any threads, straight to float32 or row by row, are the whole draw's bits",
          "[families]") {
    const InputFamily all = family({{"decay_q", 1.0}, {"decay_k", 2.0}, {"shared_basis", false}, {"offset_q", 1.0},
                                    {"offset_k", 4.0}, {"offset_cos", -0.3}, {"key_norm_sigma", 0.5}, {"key_scale", 2.0},
                                    {"rope_base", 1000.0}, {"key_clusters", 3}, {"cluster_spread", 0.5}});
    const std::size_t L = 2500, d = 64, dv = 48;   // 1024 rows a block at d = 64: three blocks, the last short
    // The whole draw made at once, as before blocks: every normal of each stream, the family on
    // the whole matrices, then the factor.
    const InputDraw draw{all, 3, "t.json: inputs.scale"};
    const auto stream = [&](const char* name, std::size_t dim) { return stream_key({9, tag(name), dim, 3}); };
    QKV whole{Mat<double>::from_shape({L, d}), Mat<double>::from_shape({L, d}), Mat<double>::from_shape({L, dv})};
    fill_normal(stream("inputs-q", d), whole.q.data(), whole.q.size());
    fill_normal(stream("inputs-k", d), whole.k.data(), whole.k.size());
    fill_normal(stream("inputs-v", dv), whole.v.data(), whole.v.size());
    apply_family(all, stream_key({9, tag("input-seed"), 3}), whole.q, whole.k);
    for (Mat<double>* m : {&whole.q, &whole.k, &whole.v})
        for (double& x : *m) x *= 0.75;
    const QKV one = random_inputs(9, L, d, dv, 0.75, draw, 1), two = random_inputs(9, L, d, dv, 0.75, draw, 2);
    const InputsOf<float> f = random_inputs_as<float>(9, L, d, dv, 0.75, draw, 2);
    const std::vector<std::size_t> rows = {2499, 0, 1023, 1024, 17, 2048};
    const QKV picked = random_input_rows(9, d, dv, 0.75, draw, rows);
    for (auto [w, a, b, x, p] : {std::tuple{&whole.q, &one.q, &two.q, &f.q, &picked.q}, {&whole.k, &one.k, &two.k, &f.k, &picked.k},
                                 {&whole.v, &one.v, &two.v, &f.v, &picked.v}}) {
        REQUIRE(std::equal(w->begin(), w->end(), a->begin()));
        REQUIRE(std::equal(w->begin(), w->end(), b->begin()));
        for (std::size_t i = 0; i < w->size(); ++i) REQUIRE(x->data()[i] == float(w->data()[i]));
        const std::size_t c = w->shape(1);
        for (std::size_t r = 0; r < rows.size(); ++r)
            REQUIRE(std::equal(&(*p)(r, 0), &(*p)(r, 0) + c, &(*w)(rows[r], 0)));
    }
    // An entry the factor makes infinite is named by its index in the whole tensor, whatever block made it.
    REQUIRE_THROWS_WITH(random_inputs(9, L, d, dv, 1e308, draw, 2),
                        Catch::Contains("t.json: inputs.scale: 1e+308 makes entry") && Catch::Contains(" of q infinite"));
}

TEST_CASE("families: a row-sampled run drawing its inputs in blocks gives the numbers of the whole draw",
          "[families][experiment]") {
    // Without pairwise metrics a row-sampled run draws q, k, v straight into the compute type in
    // blocks and x from its sampled rows drawn again, and the non-causal uniform baseline makes
    // one output row; with a pairwise metric it draws the float64 whole as before. The output
    // metric, its row SEM and the baseline must not tell the two apart: float32 and float64,
    // causal and not, a family on, several blocks (2048 rows a block at d = 32).
    for (const char* dtype : {"float32", "float64"})
        for (const bool causal : {false, true}) {
            json j = json::parse(R"({
                "name": "blocks", "seed": 5,
                "inputs": {"source": "random", "L": [2500], "d": 32, "scale": 0.8, "decay_k": 1.5, "rope_base": 500,
                           "key_norm_sigma": 0.5},
                "variants": [{"features": "positive", "projection": "orthogonal"}],
                "m": 16, "trials": 2, "query_rows": 40, "metrics": ["output_rel_error"]})");
            j["dtype"] = dtype;
            j["causal"] = causal;
            json with_pairwise = j;
            with_pairwise["metrics"].push_back("attention_tv");
            const RunResult a = run_experiment(parse_config(j, "b.json"), {});
            const RunResult b = run_experiment(parse_config(with_pairwise, "b.json"), {});
            for (const std::string col : {"output_rel_error", "output_rel_error_row_sem"}) {
                REQUIRE(a.errors.rows.size() == b.errors.rows.size());
                for (std::size_t r = 0; r < a.errors.rows.size(); ++r)
                    REQUIRE(a.errors.rows[r][a.errors.column(col)] == b.errors.rows[r][b.errors.column(col)]);
            }
            for (const std::string col : {"output_rel_error_mean", "baseline_output_rel_error"})
                REQUIRE(a.summary.rows.at(0)[a.summary.column(col)] == b.summary.rows.at(0)[b.summary.column(col)]);
        }
}

TEST_CASE("families: a run on a family gives the same rows for any thread count and shard split", "[families][experiment]") {
    const json j = json::parse(R"({
        "name": "fam", "seed": 4,
        "inputs": {"source": "random", "L": [48, 96], "d": 8, "scale": 0.6, "decay_q": 1.2, "decay_k": 1.5,
                   "offset_k": 3, "key_norm_sigma": 0.7, "rope_base": 500, "key_clusters": 4, "cluster_spread": 0.5},
        "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "oprf"}],
        "m": [8, 16], "trials": 2, "metrics": ["output_rel_error", "attention_tv"]})");
    const Config cfg = parse_config(j, "fam.json");
    auto run = [&](int threads, Shard shard) {
        RunOptions opt;
        opt.threads = threads;
        opt.shard = shard;
        return run_experiment(cfg, opt).errors;
    };
    const Table one = run(1, {}), two = run(2, {});
    REQUIRE(to_csv(one) == to_csv(two));
    std::multiset<std::vector<std::string>> rows;
    for (std::size_t k = 0; k < 3; ++k)
        for (const auto& r : run(2, Shard{k, 3}).rows) rows.insert(r);
    REQUIRE(rows == std::multiset<std::vector<std::string>>(one.rows.begin(), one.rows.end()));
    // The family changes the numbers (the run does use it), and run.json records it.
    json iso = j;
    for (const std::string& key : family_keys()) iso["inputs"].erase(key);
    REQUIRE(to_csv(run_experiment(parse_config(iso, "iso.json"), {}).errors) != to_csv(one));
    REQUIRE(cfg.resolved()["inputs"]["rope_base"] == 500.0);
    REQUIRE(cfg.resolved()["inputs"]["shared_basis"] == true);
    REQUIRE_FALSE(parse_config(iso, "iso.json").resolved()["inputs"].contains("shared_basis"));
}

TEST_CASE("families: config errors name the file and the field", "[families][config]") {
    auto error_of = [](const json& inputs) {
        json j = {{"name", "t"}, {"variants", json::array({{{"features", "positive"}}})}, {"m", 8}, {"inputs", inputs}};
        return favor_test::error_of([&] { parse_config(j, "c.json"); });
    };
    const json base = {{"source", "random"}, {"L", 16}, {"d", 8}};
    auto with = [&](const json& extra) {
        json j = base;
        j.update(extra);
        return j;
    };
    using Catch::Matchers::StartsWith;
    CHECK_THAT(error_of(with({{"decay_q", -1}})), StartsWith("c.json: inputs.decay_q: must be >= 0"));
    CHECK_THAT(error_of(with({{"decay_k", "fast"}})), StartsWith("c.json: inputs.decay_k: must be a number"));
    CHECK_THAT(error_of(with({{"shared_basis", false}})), StartsWith("c.json: inputs.shared_basis: applies only with decay"));
    CHECK_THAT(error_of(with({{"offset_cos", 0.5}, {"offset_q", 1}})), StartsWith("c.json: inputs.offset_cos: applies only"));
    CHECK_THAT(error_of(with({{"offset_q", 1}, {"offset_k", 1}, {"offset_cos", 1.5}})),
               StartsWith("c.json: inputs.offset_cos: must be >= -1"));
    CHECK_THAT(error_of(with({{"key_scale", 0}})), StartsWith("c.json: inputs.key_scale: must be > 0"));
    CHECK_THAT(error_of(with({{"rope_base", 1}})), StartsWith("c.json: inputs.rope_base: must be > 1"));
    CHECK_THAT(error_of(with({{"rope_base", 1e4}, {"d", json::array({8, 5})}})),
               StartsWith("c.json: inputs.rope_base: rotates pairs of coordinates: needs an even d, got d = 5"));
    CHECK_THAT(error_of(with({{"key_clusters", 4}})), StartsWith("c.json: inputs.cluster_spread: missing"));
    CHECK_THAT(error_of(with({{"cluster_spread", 0.5}})), StartsWith("c.json: inputs.key_clusters: missing"));
    CHECK_THAT(error_of(with({{"key_clusters", 0}, {"cluster_spread", 0.5}})),
               StartsWith("c.json: inputs.key_clusters: must be between 1"));
    CHECK_THAT(error_of(with({{"decay", 1}})), StartsWith("c.json: inputs.decay: unknown key, did you mean"));
    const json npy = {{"source", "npy"}, {"q", "q.npy"}, {"k", "k.npy"}, {"v", "v.npy"}, {"rope_base", 1e4}};
    CHECK_THAT(error_of(npy), StartsWith("c.json: inputs.rope_base: applies only to source \"random\""));
    // gen's flags: the same checks, named by the flag.
    CHECK_THROWS_WITH(parse_family_flags({"decay_q=-2"}), StartsWith("gen: --family decay_q: must be >= 0"));
    CHECK_THROWS_WITH(parse_family_flags({"rope=1"}), StartsWith("gen: --family rope: unknown key"));
    CHECK_THROWS_WITH(parse_family_flags({"decay_q"}), StartsWith("gen: --family: expected KEY=VALUE"));
    CHECK_THROWS_WITH(parse_family_flags({"decay_q=1", "decay_q=2"}), StartsWith("gen: --family decay_q: given twice"));
    CHECK_THROWS_WITH(parse_family_flags({"rope_base="}), StartsWith("gen: --family rope_base: empty value"));
    CHECK_THROWS_WITH(parse_family_flags({"decay_q=fast"}), StartsWith("gen: --family decay_q: must be a number"));
    REQUIRE(parse_family_flags({"decay_q=1.5", "shared_basis=false"}).decay_q == 1.5);
}
