#include "favor/experiments/input_families.hpp"

#include <cmath>

#include "favor/core/error.hpp"
#include "favor/core/rng.hpp"
#include "favor/estimators/structured.hpp"
#include "favor/io/json_text.hpp"

namespace favor {

using nlohmann::json;

bool InputFamily::any() const {
    return decay_q != 0 || decay_k != 0 || offset_q != 0 || offset_k != 0 || key_norm_sigma != 0 || key_scale != 1 ||
           rope_base.has_value() || key_clusters != 0;
}

json InputFamily::resolved() const {
    json j = json::object();
    if (decay_q != 0) j["decay_q"] = decay_q;
    if (decay_k != 0) j["decay_k"] = decay_k;
    if (decay_q != 0 || decay_k != 0) j["shared_basis"] = shared_basis;
    if (offset_q != 0) j["offset_q"] = offset_q;
    if (offset_k != 0) j["offset_k"] = offset_k;
    if (offset_cos) j["offset_cos"] = *offset_cos;
    if (key_norm_sigma != 0) j["key_norm_sigma"] = key_norm_sigma;
    if (key_scale != 1) j["key_scale"] = key_scale;
    if (rope_base) j["rope_base"] = *rope_base;
    if (key_clusters != 0) {
        j["key_clusters"] = key_clusters;
        j["cluster_spread"] = cluster_spread;
    }
    return j;
}

const std::vector<std::string>& family_keys() {
    static const std::vector<std::string> k = {"decay_q",   "decay_k",        "shared_basis", "offset_q",
                                               "offset_k",  "offset_cos",     "key_norm_sigma", "key_scale",
                                               "rope_base", "key_clusters",   "cluster_spread"};
    return k;
}

namespace {
// A number of `inputs` in [lo, hi] (or > lo when open), else an error naming the key.
double ranged(const FieldObject& o, const std::string& key, double fallback, double lo, double hi, bool open_lo = false) {
    if (!o.has(key)) return fallback;
    const double x = read_number(o.value(key), o.at(key));
    if (x < lo || x > hi || (open_lo && x == lo))
        o.at(key).fail("must be " + std::string(open_lo ? "> " : ">= ") + json(lo).dump() + " and <= " + json(hi).dump() +
                       ", got " + o.value(key).dump());
    return x;
}
}  // namespace

InputFamily parse_family(const json& inputs, const Field& w) {
    const FieldObject o{inputs, w};
    InputFamily f;
    f.decay_q = ranged(o, "decay_q", 0, 0, 16);
    f.decay_k = ranged(o, "decay_k", 0, 0, 16);
    if (o.has("shared_basis")) {
        f.shared_basis = read_bool(o.value("shared_basis"), o.at("shared_basis"));
        if (f.decay_q == 0 && f.decay_k == 0) o.at("shared_basis").fail("applies only with decay_q or decay_k > 0");
    }
    f.offset_q = ranged(o, "offset_q", 0, 0, 1e6);
    f.offset_k = ranged(o, "offset_k", 0, 0, 1e6);
    if (o.has("offset_cos")) {
        f.offset_cos = ranged(o, "offset_cos", 0, -1, 1);
        if (f.offset_q == 0 || f.offset_k == 0) o.at("offset_cos").fail("applies only with offset_q and offset_k > 0");
    }
    f.key_norm_sigma = ranged(o, "key_norm_sigma", 0, 0, 5);
    f.key_scale = ranged(o, "key_scale", 1, 0, 1e6, true);
    if (o.has("rope_base")) f.rope_base = ranged(o, "rope_base", 0, 1, 1e12, true);
    if (o.has("key_clusters") != o.has("cluster_spread"))
        o.at(o.has("key_clusters") ? "cluster_spread" : "key_clusters")
            .fail(o.has("key_clusters") ? "missing (the within-cluster spread s in [0, 1], key_clusters is set)"
                                        : "missing (the number of key clusters, cluster_spread is set)");
    if (o.has("key_clusters")) {
        f.key_clusters = read_uint(o.value("key_clusters"), o.at("key_clusters"), 1, 65536);
        f.cluster_spread = ranged(o, "cluster_spread", 1, 0, 1);
    }
    return f;
}

void check_family_dimension(const InputFamily& f, std::size_t d, const Field& w) {
    if (f.rope_base && d % 2 != 0)
        w.at("rope_base").fail("rotates pairs of coordinates: needs an even d, got d = " + std::to_string(d));
    if (f.offset_cos && d < 2) w.at("offset_cos").fail("needs d >= 2 (two directions at an angle), got d = 1");
}

InputFamily parse_family_flags(const std::vector<std::string>& assignments) {
    json obj = json::object();
    for (const std::string& a : assignments) {
        const std::size_t eq = a.find('=');
        if (eq == std::string::npos || eq == 0)
            throw Error("gen: --family: expected KEY=VALUE (e.g. decay_q=1.5), got \"" + a + "\"");
        const std::string key = a.substr(0, eq);
        if (obj.contains(key)) throw Error("gen: --family " + key + ": given twice");
        if (eq + 1 == a.size()) throw Error("gen: --family " + key + ": empty value (e.g. " + key + "=1)");
        apply_set(obj, a);
    }
    check_keys(obj, family_keys(), Field{"gen", "", "--family "});
    return parse_family(obj, Field{"gen", "", "--family "});
}

namespace {
// Eigenvalues (i + 1)^-alpha, i < d, scaled to mean 1: the trace stays d.
std::vector<double> power_spectrum(double alpha, std::size_t d) {
    std::vector<double> l(d);
    double sum = 0;
    for (std::size_t i = 0; i < d; ++i) sum += l[i] = std::pow(double(i + 1), -alpha);
    for (double& x : l) x *= double(d) / sum;
    return l;
}

// Row i <- sum_k sqrt(lambda_k) z_ik b_k, b_k row k of the basis: covariance B^T diag(lambda) B.
// One fixed-order loop per row, so row i depends on row i alone (nested in L, any threads).
void anisotropic(const RowBlock& x, const Mat<double>& basis, const std::vector<double>& root) {
    const std::size_t d = x.d;
    std::vector<double> row(d);
    for (std::size_t i = 0; i < x.rows; ++i) {
        double* z = x.row(i);
        std::fill(row.begin(), row.end(), 0.0);
        for (std::size_t k = 0; k < d; ++k) {
            const double a = root[k] * z[k];
            const double* b = &basis(k, 0);
            for (std::size_t c = 0; c < d; ++c) row[c] += a * b[c];
        }
        std::copy(row.begin(), row.end(), z);
    }
}

// sqrt(lambda_k) of the power spectrum (the anisotropy's factors).
std::vector<double> spectrum_roots(double alpha, std::size_t d) {
    std::vector<double> root = power_spectrum(alpha, d);
    for (double& r : root) r = std::sqrt(r);
    return root;
}

// A unit vector uniform on the sphere: d normals of the stream, normalised.
std::vector<double> unit_direction(std::uint64_t key, std::size_t d) {
    std::vector<double> u(d);
    fill_normal(key, u.data(), d);
    double n = 0;
    for (double v : u) n += v * v;
    for (double& v : u) v /= std::sqrt(n);
    return u;
}

// The key direction at cosine c to the query's: c u + sqrt(1 - c^2) (v without its u part).
std::vector<double> direction_at(const std::vector<double>& u, std::vector<double> v, double c) {
    double dot = 0, n = 0;
    for (std::size_t j = 0; j < u.size(); ++j) dot += u[j] * v[j];
    for (std::size_t j = 0; j < u.size(); ++j) n += (v[j] -= dot * u[j]) * v[j];
    const double s = std::sqrt(std::max(0.0, 1 - c * c)) / std::sqrt(n);
    for (std::size_t j = 0; j < u.size(); ++j) v[j] = c * u[j] + s * v[j];
    return v;
}

void add_offset(const RowBlock& x, const std::vector<double>& u, double norm) {
    for (std::size_t i = 0; i < x.rows; ++i)
        for (std::size_t c = 0; c < u.size(); ++c) x.row(i)[c] += norm * u[c];
}

// Key i <- sqrt(1 - s^2) mu_c + s z_i, c = floor(n u_i): u_i from (seed, "inputs-cluster-of", d),
// center c's entry j normal c d + j of (seed, "inputs-cluster-centers", d).
void cluster_keys(const RowBlock& k, std::uint64_t seed, std::size_t n, double s) {
    const std::size_t d = k.d;
    const std::uint64_t of = stream_key({seed, tag("inputs-cluster-of"), d});
    const std::uint64_t centers = stream_key({seed, tag("inputs-cluster-centers"), d});
    const double a = std::sqrt(std::max(0.0, 1 - s * s));
    std::vector<double> mu(d);
    for (std::size_t i = 0; i < k.rows; ++i) {
        const std::size_t c = std::min(n - 1, std::size_t(double(n) * uniform_at(of, k.first + i)));
        fill_normal(centers, mu.data(), d, std::uint64_t(c) * d);
        double* r = k.row(i);
        for (std::size_t j = 0; j < d; ++j) r[j] = a * mu[j] + s * r[j];
    }
}

// Key i times exp(sigma g_i - sigma^2), g_i normal i of (seed, "inputs-key-norms", d).
void heavy_tail_norms(const RowBlock& k, std::uint64_t seed, double sigma) {
    const std::uint64_t key = stream_key({seed, tag("inputs-key-norms"), std::uint64_t(k.d)});
    for (std::size_t i = 0; i < k.rows; ++i) {
        const double f = std::exp(sigma * normal_at(key, k.first + i) - sigma * sigma);
        for (std::size_t j = 0; j < k.d; ++j) k.row(i)[j] *= f;
    }
}

void rope_rows(const RowBlock& x, double base) {
    const std::size_t d = x.d;
    std::vector<double> freq(d / 2);
    for (std::size_t p = 0; p < d / 2; ++p) freq[p] = std::pow(base, -2.0 * double(p) / double(d));
    for (std::size_t i = 0; i < x.rows; ++i)
        for (std::size_t p = 0; p < d / 2; ++p) {
            const double t = double(x.first + i) * freq[p], c = std::cos(t), s = std::sin(t);
            double* r = x.row(i);
            const double a = r[2 * p], b = r[2 * p + 1];
            r[2 * p] = a * c - b * s;
            r[2 * p + 1] = a * s + b * c;
        }
}
}  // namespace

void apply_rope(Mat<double>& x, double base) {
    rope_rows(RowBlock{x.data(), x.shape(0), x.shape(1), 0}, base);
}

FamilyTransform::FamilyTransform(const InputFamily& f, std::uint64_t seed, std::size_t d) : f_(f), seed_(seed) {
    if (f.decay_q != 0 || f.decay_k != 0) {
        bq_ = orthogonal_block(stream_key({seed, tag("inputs-basis-q"), d}), d, true);
        bk_ = f.shared_basis ? bq_ : orthogonal_block(stream_key({seed, tag("inputs-basis-k"), d}), d, true);
        root_q_ = spectrum_roots(f.decay_q, d);
        root_k_ = spectrum_roots(f.decay_k, d);
    }
    if (f.offset_q != 0 || f.offset_k != 0) {
        uq_ = unit_direction(stream_key({seed, tag("inputs-offset-q"), d}), d);
        uk_ = unit_direction(stream_key({seed, tag("inputs-offset-k"), d}), d);
        if (f.offset_cos) uk_ = direction_at(uq_, uk_, *f.offset_cos);
    }
}

// Order (docs/design.md section 7): clusters (keys), anisotropy, key norm factors (the
// centred part), offsets, key_scale, RoPE. Every step is row by row, so a block of rows
// gets the bits those rows get in the whole.
void FamilyTransform::apply(const RowBlock& q, const RowBlock& k) const {
    const InputFamily& f = f_;
    if (f.key_clusters) cluster_keys(k, seed_, f.key_clusters, f.cluster_spread);
    if (f.decay_q != 0) anisotropic(q, bq_, root_q_);
    if (f.decay_k != 0) anisotropic(k, bk_, root_k_);
    if (f.key_norm_sigma != 0) heavy_tail_norms(k, seed_, f.key_norm_sigma);
    if (f.offset_q != 0 || f.offset_k != 0) {
        add_offset(q, uq_, f.offset_q);
        add_offset(k, uk_, f.offset_k);
    }
    if (f.key_scale != 1)
        for (std::size_t i = 0; i < k.rows; ++i)
            for (std::size_t j = 0; j < k.d; ++j) k.row(i)[j] *= f.key_scale;
    if (f.rope_base) {
        rope_rows(q, *f.rope_base);
        rope_rows(k, *f.rope_base);
    }
}

void apply_family(const InputFamily& f, std::uint64_t seed, Mat<double>& q, Mat<double>& k) {
    const FamilyTransform t(f, seed, q.shape(1));
    t.apply(RowBlock{q.data(), q.shape(0), q.shape(1), 0}, RowBlock{k.data(), k.shape(0), k.shape(1), 0});
}

}  // namespace favor
