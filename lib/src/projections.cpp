#include "favor/projections.hpp"

#include <cmath>
#include <xtensor-blas/xlinalg.hpp>

#include "favor/error.hpp"
#include "favor/names.hpp"
#include "favor/rng.hpp"

namespace favor {

namespace {
const std::vector<std::pair<Projection, std::string>>& table() {
    static const std::vector<std::pair<Projection, std::string>> t = {
        {Projection::iid, "iid"},
        {Projection::orthogonal, "orthogonal"},
        {Projection::orthogonal_fixed, "orthogonal-fixed"},
        {Projection::orthogonal_nosignfix, "orthogonal-nosignfix"},
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

Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial) {
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
