#include "favor/experiments/inputs.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/core/memory.hpp"
#include "favor/core/parallel.hpp"
#include "favor/core/rng.hpp"
#include "favor/io/report.hpp"

namespace favor {

namespace {
Mat<double> normal_matrix(std::uint64_t key, std::size_t rows, std::size_t cols) {
    Mat<double> a = Mat<double>::from_shape({rows, cols});
    fill_normal(key, a.data(), a.size());
    return a;
}

// The stream of one input tensor (docs/design.md section 7): (seed, name, dim), with the
// input seed appended only when it is not 0, so input seed 0 is the one draw of a run
// without input_seeds.
std::uint64_t input_key(std::uint64_t seed, const char* name, std::size_t dim, std::uint64_t input_seed) {
    return input_seed == 0 ? stream_key({seed, tag(name), dim}) : stream_key({seed, tag(name), dim, input_seed});
}

// The rows a draw makes at once: ~64k entries of the widest tensor.
std::size_t block_rows(std::size_t width) {
    return std::max<std::size_t>(1, std::size_t(65536) / std::max<std::size_t>(width, 1));
}

constexpr std::size_t kNone = std::size_t(-1);

// The streams, family and scale of one draw, for any rows: row i of each tensor depends on
// i alone (normals i*d .. i*d + d - 1 of its stream, the family row by row, the factor), so
// blocks made apart, on any threads, hold the bits of the whole made at once.
struct Draw {
    std::uint64_t kq, kk, kv;
    std::size_t d, dv;
    double scale;
    std::optional<FamilyTransform> family;
    Draw(std::uint64_t seed, std::size_t d_, std::size_t d_v, double s, const InputDraw& draw)
        : kq(input_key(seed, "inputs-q", d_, draw.input_seed)), kk(input_key(seed, "inputs-k", d_, draw.input_seed)),
          kv(input_key(seed, "inputs-v", d_v, draw.input_seed)), d(d_), dv(d_v), scale(s) {
        // The family's own draws (bases, offsets, centres) are new for every input seed too.
        const std::uint64_t is = draw.input_seed;
        if (draw.family.any()) family.emplace(draw.family, is == 0 ? seed : stream_key({seed, tag("input-seed"), is}), d);
    }
    // Rows [r0, r0 + n) of q, k, v in float64 (n x d, n x d, n x dv): the normals, the family
    // at scale 1, the factor. Returns, per tensor, the whole tensor's index of the first entry
    // the factor made infinite (kNone: none).
    std::array<std::size_t, 3> rows(std::size_t r0, std::size_t n, double* q, double* k, double* v) const {
        fill_normal(kq, q, n * d, std::uint64_t(r0) * d);
        fill_normal(kk, k, n * d, std::uint64_t(r0) * d);
        fill_normal(kv, v, n * dv, std::uint64_t(r0) * dv);
        if (family) family->apply(RowBlock{q, n, d, r0}, RowBlock{k, n, d, r0});
        std::array<std::size_t, 3> bad{kNone, kNone, kNone};
        const std::size_t width[3] = {d, d, dv};
        double* x[3] = {q, k, v};
        for (int t = 0; t < 3; ++t) {
            const std::size_t size = n * width[t];
            for (std::size_t i = 0; i < size; ++i) x[t][i] *= scale;
            for (std::size_t i = 0; i < size && bad[t] == kNone; ++i)
                if (!std::isfinite(x[t][i])) bad[t] = r0 * width[t] + i;
        }
        return bad;
    }
};

// An entry that overflowed: an Error naming `field` (the first tensor of q, k, v that has one).
void check_finite(const std::vector<std::array<std::size_t, 3>>& bad, double scale, const std::string& field) {
    const char* names[3] = {"q", "k", "v"};
    for (int t = 0; t < 3; ++t) {
        std::size_t first = kNone;
        for (const auto& b : bad) first = std::min(first, b[t]);
        if (first != kNone)
            throw Error(field + ": " + format_number(scale) + " makes entry " + std::to_string(first) + " of " +
                        names[t] + " infinite (a normal draw times the scale beyond 1.8e308); inputs must be finite, " +
                        "as in a .npy file: lower the scale");
    }
}
}  // namespace

std::size_t input_block_bytes(std::size_t d, std::size_t d_v) {
    return block_rows(std::max(d, d_v)) * (2 * d + d_v) * sizeof(double);
}

template <class T>
InputsOf<T> random_inputs_as(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                             const InputDraw& draw, int threads) {
    const Draw dr(seed, d, d_v, scale, draw);
    InputsOf<T> out{Mat<T>::from_shape({L, d}), Mat<T>::from_shape({L, d}), Mat<T>::from_shape({L, d_v})};
    for (Mat<T>* m : {&out.q, &out.k, &out.v}) advise_hugepages(m->data(), m->size() * sizeof(T));   // before the first write
    const std::size_t rb = block_rows(std::max(d, d_v)), nb = (L + rb - 1) / rb;
    std::vector<std::array<std::size_t, 3>> bad(nb);
    parallel_for(nb, threads, [&](std::size_t b) {
        const std::size_t r0 = b * rb, n = std::min(rb, L - r0);
        T* dst[3] = {out.q.data() + r0 * d, out.k.data() + r0 * d, out.v.data() + r0 * d_v};
        if constexpr (std::is_same_v<T, double>) {
            bad[b] = dr.rows(r0, n, dst[0], dst[1], dst[2]);
        } else {   // float64 rows in a block of scratch, then rounded into the result
            thread_local std::vector<double> buf;
            double* q = grown(buf, n * (2 * d + d_v));
            bad[b] = dr.rows(r0, n, q, q + n * d, q + 2 * n * d);
            const std::size_t width[3] = {d, d, d_v};
            for (int t = 0; t < 3; ++t) {
                std::transform(q, q + n * width[t], dst[t], [](double x) { return T(x); });
                q += n * width[t];
            }
        }
    });
    check_finite(bad, scale, draw.field);
    return out;
}

QKV random_inputs(std::uint64_t seed, std::size_t L, std::size_t d, std::size_t d_v, double scale,
                  const InputDraw& draw, int threads) {
    return random_inputs_as<double>(seed, L, d, d_v, scale, draw, threads);
}

QKV random_input_rows(std::uint64_t seed, std::size_t d, std::size_t d_v, double scale, const InputDraw& draw,
                      const std::vector<std::size_t>& rows) {
    const Draw dr(seed, d, d_v, scale, draw);
    const std::size_t n = rows.size();
    QKV out{Mat<double>::from_shape({n, d}), Mat<double>::from_shape({n, d}), Mat<double>::from_shape({n, d_v})};
    std::vector<std::array<std::size_t, 3>> bad(n);
    for (std::size_t i = 0; i < n; ++i)
        bad[i] = dr.rows(rows[i], 1, out.q.data() + i * d, out.k.data() + i * d, out.v.data() + i * d_v);
    check_finite(bad, scale, draw.field);
    return out;
}

template InputsOf<float> random_inputs_as<float>(std::uint64_t, std::size_t, std::size_t, std::size_t, double,
                                                 const InputDraw&, int);
template InputsOf<double> random_inputs_as<double>(std::uint64_t, std::size_t, std::size_t, std::size_t, double,
                                                   const InputDraw&, int);

Mat<double> upstream_gradient(std::uint64_t seed, std::size_t L, std::size_t d_v, std::size_t head,
                              std::uint64_t input_seed) {
    const std::uint64_t key = input_seed == 0 ? stream_key({seed, tag("upstream-grad"), d_v, head})
                                              : stream_key({seed, tag("upstream-grad"), d_v, head, input_seed});
    return normal_matrix(key, L, d_v);
}

}  // namespace favor
