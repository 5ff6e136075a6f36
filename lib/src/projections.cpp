#include "favor/projections.hpp"

#include <cmath>
#include <limits>

#include "favor/error.hpp"
#include "favor/names.hpp"
#include "favor/qmc.hpp"
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
        {Projection::simplex_plus, "simplex-plus"},
        {Projection::qmc, "qmc"},
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

std::size_t projection_min_d(Projection p) {
    return (p == Projection::simplex || p == Projection::simplex_plus || p == Projection::givens) ? 2 : 1;
}

std::size_t projection_max_d(Projection p) {
    return p == Projection::qmc ? kSobolMaxDim : std::numeric_limits<std::size_t>::max();
}

namespace {
// W (m x d) from stacked blocks: block b (block_rows x d) is make_block(b), row r of W is
// norm(r) times its row of the block; the last block is truncated, so W is nested in m.
template <class MakeBlock, class Norm>
Mat<double> stack_blocks(std::size_t m, std::size_t d, std::size_t block_rows, MakeBlock make_block, Norm norm) {
    Mat<double> W = Mat<double>::from_shape({m, d});
    for (std::size_t b = 0; b * block_rows < m; ++b) {
        const Mat<double> block = make_block(b);
        for (std::size_t j = 0; j < block_rows && b * block_rows + j < m; ++j) {
            const std::size_t r = b * block_rows + j;
            const double s = norm(r);
            for (std::size_t c = 0; c < d; ++c) W(r, c) = s * block(j, c);
        }
    }
    return W;
}
}  // namespace

Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial) {
    auto key = [&](const char* name) { return stream_key({seed, tag(name), d, trial}); };
    auto block_key = [&](const char* name, std::size_t b) { return stream_key({seed, tag(name), d, trial, b}); };
    switch (p) {
    case Projection::iid: {
        Mat<double> W = Mat<double>::from_shape({m, d});
        fill_normal(key("W-iid"), W.data(), W.size());
        return W;
    }
    case Projection::orthogonal:
    case Projection::orthogonal_fixed:
    case Projection::orthogonal_nosignfix: {
        const bool sign_fix = p != Projection::orthogonal_nosignfix;
        const std::uint64_t norm_key = key("W-chi-norms");
        return stack_blocks(
            m, d, d, [&](std::size_t b) { return orthogonal_block(block_key("W-orthogonal-block", b), d, sign_fix); },
            [&](std::size_t r) {
                return p == Projection::orthogonal_fixed ? std::sqrt(double(d)) : chi_at(norm_key, r, d);
            });
    }
    case Projection::hadamard:
    case Projection::hadamard_fixed: {
        // SORF: a block gives P rows, the first d columns of sqrt(P) H D1 H D2 H D3 (inputs
        // padded with zeros to P), so every P-dim row has norm sqrt(P) before truncation.
        // Yu et al. keep that fixed norm (hadamard-fixed): like orthogonal-fixed (SMREG) the
        // estimator is then biased, -1.6% at the d = 4 reference point. `hadamard` instead
        // gives row r the norm chi_at(r, P), as ORF does, so w = (chi(P) u)[:d] with u the
        // unit P-dim row: N(0, I_d) up to the 4th-moment anisotropy of the discrete SORF
        // directions (exact residual bias -0.15% at that point; docs/beyond.md).
        const std::size_t P = next_pow2(d);
        const std::uint64_t norm_key = key("W-hadamard-norms");
        return stack_blocks(
            m, d, P, [&](std::size_t b) { return sorf_rows(sorf_block(block_key("W-hadamard-block", b), P), d); },
            [&](std::size_t r) {
                return p == Projection::hadamard ? chi_at(norm_key, r, P) / std::sqrt(double(P)) : 1.0;
            });
    }
    case Projection::simplex:
    case Projection::givens: {
        if (d < projection_min_d(p))
            throw Error("projection '" + projection_name(p) + "' needs d >= 2, got d = " + std::to_string(d));
        // chi(d) norms independent of the directions, as for ORF and in SimRF (Reid et al. 2023).
        // Blocks and norms have their own streams (independent of the orthogonal W).
        const bool simplex = p == Projection::simplex;
        const std::uint64_t norm_key = key(simplex ? "W-simplex-norms" : "W-givens-norms");
        return stack_blocks(
            m, d, d,
            [&](std::size_t b) {
                return simplex ? simplex_block(block_key("W-simplex-block", b), d)
                               : givens_block(block_key("W-givens-block", b), d);
            },
            [&](std::size_t r) { return chi_at(norm_key, r, d); });
    }
    case Projection::simplex_plus: {
        if (d < projection_min_d(p))
            throw Error("projection 'simplex-plus' needs d >= 2, got d = " + std::to_string(d));
        // SimRF+ (Reid et al. 2023): the SimRF block and norms, drawn from simplex's streams
        // (as orthogonal-fixed shares orthogonal's), so simplex and simplex-plus at the same
        // (seed, trial) differ only by the sweeps. The directions of a block depend on all d
        // of its norms, also those of rows past m: W stays nested in m.
        const std::uint64_t norm_key = key("W-simplex-norms");
        const std::size_t blocks = (m + d - 1) / d;
        std::vector<double> norms(blocks * d);
        for (std::size_t r = 0; r < norms.size(); ++r) norms[r] = chi_at(norm_key, r, d);
        return stack_blocks(
            m, d, d,
            [&](std::size_t b) {
                return simplex_plus_directions(simplex_block(block_key("W-simplex-block", b), d), &norms[b * d]);
            },
            [&](std::size_t r) { return norms[r]; });
    }
    case Projection::qmc:
        // Row i: Phi^{-1} of Sobol point i, Owen-scrambled per (seed, d, trial) (qmc.hpp).
        return qmc_gaussian(m, d, key("W-qmc"));
    }
    throw Error("draw_projection: unknown projection");
}

}  // namespace favor
