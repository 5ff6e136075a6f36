#pragma once
// Shared pieces of the projections' draw functions (lib/src/estimators/projections/*.cpp): the stream
// keys of one draw and the stacking of blocks into W (docs/design.md section 7).
#include <cstdint>
#include <functional>

#include "favor/core/tensor.hpp"

namespace favor {

// The streams of one draw of W for (seed, d, trial). A projection names its streams by tag
// ("W-orthogonal-block"); projections that share a stream name draw the same numbers.
struct DrawKeys {
    std::uint64_t seed;
    std::size_t d;
    std::uint64_t trial;
    // stream_key(seed, tag(name), d, trial): a stream of the whole W (entries, row norms).
    std::uint64_t whole(const char* name) const;
    // stream_key(seed, tag(name), d, trial, b): the stream of block b.
    std::uint64_t block(const char* name, std::size_t b) const;
};

// W (m x d) from stacked blocks: block b (block_rows x d) is make_block(b), row r of W is
// norm(r) times its row of the block; the last block is truncated, so W is nested in m.
Mat<double> stack_blocks(std::size_t m, std::size_t d, std::size_t block_rows,
                         const std::function<Mat<double>(std::size_t b)>& make_block,
                         const std::function<double(std::size_t r)>& norm);

// W (m x d) from d x d blocks, block b = make_block(keys.block(block_tag, b)), with row r
// scaled by chi(d) drawn from the stream keys.whole(norm_tag): norms independent of the
// directions, as ORF, SimRF and Givens have them.
Mat<double> chi_normed_blocks(std::size_t m, const DrawKeys& keys, const char* block_tag, const char* norm_tag,
                              const std::function<Mat<double>(std::uint64_t block_key)>& make_block);

}  // namespace favor
