// The shared pieces of the draw functions (blocks.hpp).
#include "blocks.hpp"

#include "favor/core/rng.hpp"

namespace favor {

std::uint64_t DrawKeys::whole(const char* name) const { return stream_key({seed, tag(name), d, trial}); }

std::uint64_t DrawKeys::block(const char* name, std::size_t b) const {
    return stream_key({seed, tag(name), d, trial, b});
}

Mat<double> stack_blocks(std::size_t m, std::size_t d, std::size_t block_rows,
                         const std::function<Mat<double>(std::size_t b)>& make_block,
                         const std::function<double(std::size_t r)>& norm) {
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

Mat<double> chi_normed_blocks(std::size_t m, const DrawKeys& keys, const char* block_tag, const char* norm_tag,
                              const std::function<Mat<double>(std::uint64_t block_key)>& make_block) {
    const std::size_t d = keys.d;
    const std::uint64_t norm_key = keys.whole(norm_tag);
    return stack_blocks(
        m, d, d, [&](std::size_t b) { return make_block(keys.block(block_tag, b)); },
        [&](std::size_t r) { return chi_at(norm_key, r, d); });
}

}  // namespace favor
