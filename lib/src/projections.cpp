#include "favor/projections.hpp"

#include <cmath>
#include <xtensor-blas/xlinalg.hpp>

#include "favor/error.hpp"
#include "favor/names.hpp"
#include "favor/rng.hpp"
#include "favor/structured.hpp"

namespace favor {

namespace {
const std::vector<std::pair<Projection, std::string>>& table() {
    static const std::vector<std::pair<Projection, std::string>> t = {
        {Projection::iid, "iid"},
        {Projection::orthogonal, "orthogonal"},
        {Projection::orthogonal_fixed, "orthogonal-fixed"},
        {Projection::orthogonal_nosignfix, "orthogonal-nosignfix"},
        {Projection::simplex, "simplex"},
        {Projection::hadamard, "hadamard"},
        {Projection::hadamard_fixed, "hadamard-fixed"},
        {Projection::givens, "givens"},
    };
    return t;
}
}  // namespace

const std::vector<std::string>& projection_names() {
    static const std::vector<std::string> names = names_of(table());
    return names;
}

Projection parse_projection(const std::string& name) {
    return lookup_name(table(), name, "projection");
}

std::string projection_name(Projection p) { return name_of(table(), p); }

bool is_orthogonal(Projection p) { return p != Projection::iid; }

Mat<double> orthogonal_block(std::uint64_t key, std::size_t d, bool sign_fix) {
    xt::xtensor<double, 2> g = xt::xtensor<double, 2>::from_shape({d, d});
    fill_normal(key, g.data(), g.size());
    auto qr = xt::linalg::qr(g);
    const auto& Q = std::get<0>(qr);
    const auto& R = std::get<1>(qr);
    // Rows of the block are the columns of Q (the paper's code transposes Q).
    Mat<double> block = Mat<double>::from_shape({d, d});
    for (std::size_t j = 0; j < d; ++j) {
        const double s = (sign_fix && R(j, j) < 0.0) ? -1.0 : 1.0;
        for (std::size_t c = 0; c < d; ++c) block(j, c) = s * Q(c, j);
    }
    return block;
}

namespace {
// The structured / coupled projections. Each block and the row norms have their own streams
// (tags differ from ORF's, so these W are independent of the orthogonal ones).
Mat<double> draw_structured(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial) {
    Mat<double> W = Mat<double>::from_shape({m, d});
    if (p == Projection::hadamard || p == Projection::hadamard_fixed) {
        // SORF: a block gives p rows, the first d columns of sqrt(p) H D1 H D2 H D3 (inputs
        // padded with zeros to p), so every p-dim row has norm sqrt(p) before truncation.
        // Yu et al. keep that fixed norm (hadamard-fixed): like orthogonal-fixed (SMREG) the
        // estimator is then biased, -1.6% at the d = 4 reference point. `hadamard` instead
        // gives row r the norm chi_at(r, p), as ORF does, so w = (chi(p) u)[:d] with u the
        // unit p-dim row: N(0, I_d) up to the 4th-moment anisotropy of the discrete SORF
        // directions (exact residual bias -0.15% at that point; docs/beyond.md).
        const std::size_t P = next_pow2(d);
        const std::uint64_t norm_key = stream_key({seed, tag("W-hadamard-norms"), d, trial});
        for (std::size_t b = 0; b * P < m; ++b) {
            const Mat<double> rows =
                sorf_rows(sorf_block(stream_key({seed, tag("W-hadamard-block"), d, trial, b}), P), d);
            for (std::size_t j = 0; j < P && b * P + j < m; ++j) {
                const std::size_t r = b * P + j;
                const double s = p == Projection::hadamard ? chi_at(norm_key, r, P) / std::sqrt(double(P)) : 1.0;
                for (std::size_t c = 0; c < d; ++c) W(r, c) = s * rows(j, c);
            }
        }
        return W;
    }
    if (d < 2)
        throw Error("projection '" + projection_name(p) + "' needs d >= 2, got d = " + std::to_string(d));
    const bool simplex = p == Projection::simplex;
    const std::uint64_t block_tag = simplex ? tag("W-simplex-block") : tag("W-givens-block");
    const std::uint64_t norm_key =
        stream_key({seed, simplex ? tag("W-simplex-norms") : tag("W-givens-norms"), d, trial});
    for (std::size_t b = 0; b * d < m; ++b) {
        const std::uint64_t key = stream_key({seed, block_tag, d, trial, b});
        const Mat<double> block = simplex ? simplex_block(key, d) : givens_block(key, d);
        // chi(d) norms independent of the directions, as for ORF and in SimRF (Reid et al. 2023).
        for (std::size_t j = 0; j < d && b * d + j < m; ++j) {
            const std::size_t r = b * d + j;
            const double norm = chi_at(norm_key, r, d);
            for (std::size_t c = 0; c < d; ++c) W(r, c) = norm * block(j, c);
        }
    }
    return W;
}
}  // namespace

Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial) {
    if (p == Projection::simplex || p == Projection::hadamard || p == Projection::hadamard_fixed ||
        p == Projection::givens)
        return draw_structured(p, m, d, seed, trial);
    Mat<double> W = Mat<double>::from_shape({m, d});
    if (p == Projection::iid) {
        fill_normal(stream_key({seed, tag("W-iid"), d, trial}), W.data(), W.size());
        return W;
    }
    const bool sign_fix = p != Projection::orthogonal_nosignfix;
    const std::uint64_t norm_key = stream_key({seed, tag("W-chi-norms"), d, trial});
    for (std::size_t b = 0; b * d < m; ++b) {
        const Mat<double> block =
            orthogonal_block(stream_key({seed, tag("W-orthogonal-block"), d, trial, b}), d, sign_fix);
        for (std::size_t j = 0; j < d && b * d + j < m; ++j) {
            const std::size_t r = b * d + j;
            const double norm = (p == Projection::orthogonal_fixed) ? std::sqrt(double(d))
                                                                    : chi_at(norm_key, r, d);
            for (std::size_t c = 0; c < d; ++c) W(r, c) = norm * block(j, c);
        }
    }
    return W;
}

}  // namespace favor
