#pragma once
// The block sizes of the attention passes (docs/design.md section 2), in one place: the passes
// (exact_attention.cpp, linear_attention.cpp, causal_linear.cpp, favor_forward.cpp,
// half_attention.cpp) split their rows by these, and the cost model (cost_model.cpp) charges the
// buffers they hold from the same values, so an estimate cannot drift from the code.
// Every size is a function of the problem's sizes only, never of the thread count: the blocks
// are added up in block order, so results do not depend on how they are spread over threads.
#include <algorithm>
#include <cstddef>

namespace favor {

// n rounded up to a multiple of k (tile and panel padding).
constexpr std::size_t round_up(std::size_t n, std::size_t k) { return (n + k - 1) / k * k; }

// --- exact attention (exact_attention.cpp) ------------------------------------------------

// Query rows per block of exact_attention at long sequences.
constexpr std::size_t kExactQueryRows = 256;
// Query rows per block of exact_attention for L queries: kExactQueryRows, but at most L / 8
// (rounded up to 16, at least 32) so that short sequences still give every core blocks
// (at L <= 256 one block ran on one thread: exact attention at L = 64 .. 512 reached 10-70
// GFLOP/s against ~230 at L = 8192, results/timing_vs_L). Rows are independent, so the
// numbers do not depend on the block size.
constexpr std::size_t exact_query_rows(std::size_t L) {
    return std::clamp<std::size_t>((L / 8 + 15) / 16 * 16, 32, kExactQueryRows);
}
// Bytes of one tile of scores (kExactQueryRows x keys): it stays in the per-core L2 cache
// (512 KB), so the max / exp / sum pass never goes to memory.
constexpr std::size_t kExactTileBytes = std::size_t(1) << 19;
// Keys per tile of exact_attention for elements of `elem` bytes (512 in float32, 256 in float64).
constexpr std::size_t exact_tile_keys(std::size_t elem) { return kExactTileBytes / (kExactQueryRows * elem); }

// Entries of one row block of exact_attention_rounded (half_attention.cpp), which holds its
// block's scores against all Lk keys at once.
constexpr std::size_t kRoundedBlockEntries = std::size_t(1) << 21;
// Rows per block of exact_attention_rounded for Lk keys: about kRoundedBlockEntries entries,
// between 16 and 512 rows.
constexpr std::size_t block_rows(std::size_t Lk) {
    return std::clamp<std::size_t>(kRoundedBlockEntries / std::max<std::size_t>(Lk, 1), 16, 512);
}

// --- the exact backward (backward_exact.cpp) ------------------------------------------------

// Keys per block and query rows per tile of the backward from saved statistics: each (query
// tile, key block) pair holds its P and dS tiles (2 x 128 x 128 entries: 128 KB in float32,
// 256 KB in float64) beside its block's K, V, dK, dV rows, all in the per-core L2 cache.
// Multiples of the tile kernels' score panels (tile_kernels.hpp).
constexpr std::size_t kExactBackwardKeys = 128;
constexpr std::size_t kExactBackwardQueryRows = 128;
// Fixed number of chunks of key blocks (block b in chunk b mod chunks, at most one per block):
// the chunks run in parallel, each adding its blocks' dS K into its own dQ partial in block
// order, and the partials are added in chunk order, so dQ does not depend on the thread count
// (a count of threads instead would change the sums). 8 keeps up to 8 cores busy (round robin
// spreads the causal triangle's unequal blocks over the chunks) at 8 L d extra entries of
// memory (16 MB at L = 8192, d = 64, float32), never L x L.
constexpr std::size_t kExactBackwardChunks = 8;

// --- linear attention (linear_attention.cpp, causal_linear.cpp) ---------------------------

// Key rows per block of the sums phiK^T [V, 1], and rows per chunk of the causal prefix sums
// (each chunk's own sum is one such block).
constexpr std::size_t kLinearBlockRows = 1024;
// Query rows per block of linear_attention_apply.
constexpr std::size_t kLinearQueryRows = 256;
// Rows per step of the causal prefix sums inside a chunk: the lower triangle of each step costs
// 2 c (F + dv) flops per row on top of the non-causal work, so small steps; 16 measured fastest
// (at L = 16384, d = 64, m = 256 float32: 12 the same, 8: 1.04x, 24: 1.02x, 32: 1.05x the time;
// with BLAS before the tile kernels 32: 1.16x, 64: 1.35x; docs/speed.md).
constexpr std::size_t kCausalStepRows = 16;

// --- the fused forward (favor_forward.cpp) ------------------------------------------------

// Bytes of features per block of the fused forward at d <= 31, times clamp(d / 16, 1, 4) above.
constexpr std::size_t kFusedBlockBytes = std::size_t(1) << 18;
// Rows per block of favor_forward's non-causal key and query passes, for L rows of F features
// of `elem` bytes from d inputs. Two pulls: a block's features should stay in the per-core L2
// cache through the passes over them (product, exponent, exp, the product with V), which
// matters most when d is small and those passes dominate; and every block has a fixed cost
// (laying out and reading W^T, the partials), which matters most when d is large and the
// products dominate. Budget 256 KB x clamp(d / 16, 1, 4): measured best for the float64
// Fig. 4 sweep at d = 16 (1 MB: 1.12x its time) and for float32 at d = 64, F = 256 (256 KB:
// 1.04x the time of 1 MB; 2 MB within noise of 1 MB); docs/speed.md. Between 16 and 1024
// rows, and at most L / 8 rows (rounded up to 16, at least 64), so that short sequences still
// give every core blocks (L = 1024 in one 1024-row block ran on one thread: results/timing_vs_L).
constexpr std::size_t fused_rows(std::size_t L, std::size_t F, std::size_t d, std::size_t elem) {
    const std::size_t bytes = kFusedBlockBytes * std::clamp<std::size_t>(d / 16, 1, 4);
    const std::size_t budget = std::clamp<std::size_t>(bytes / std::max<std::size_t>(F * elem, 1), 16, 1024);
    return std::min(budget, std::max<std::size_t>(64, (L / 8 + 15) / 16 * 16));
}

// Rows per block of the fused backward (backward_fused.cpp): each block holds its features,
// their gradient and the Jacobian's weighted copy (three F-wide buffers) and its slice of the
// inputs, so the forward's budget for F + 3F columns: 256 rows at d = 64, F = 256, float32,
// measured 0.85-0.93x the backward's time with the forward's 1024 (docs/speed.md).
constexpr std::size_t fused_backward_rows(std::size_t L, std::size_t F, std::size_t d, std::size_t elem) {
    return fused_rows(L, 4 * F, d, elem);
}

// --- the pairwise pass (pairwise_pass.cpp) ------------------------------------------------

// Query rows per block of the streamed pairwise pass over Lq query rows: a multiple of the
// feature block (256 rows, features.hpp; key tiles are one feature block). Each key tile's
// features are made again for every query block (unless pairwise_keeps_keys), and
// K = phi~(X_b) phi~(Y_t)^T is a (block x 256) panel, so larger blocks cut both the remade
// features (1/4 of the products at 256 rows, d = 64, m = 256) and the BLAS calls; at most
// Lq / 4 rows (at least 256) so short sequences still give every core blocks; the sums are kept per 256 rows, in the order of
// 256-row blocks, so the results do not depend on this size (docs/speed.md).
constexpr std::size_t pairwise_query_rows(std::size_t Lq) {
    return std::clamp<std::size_t>(Lq / 4 / 256 * 256, 256, 1024);
}

// Whether the pairwise pass keeps the key features it makes in its first sweep (the key log
// scales and column sums) for every query block instead of making them again per block (a
// key tile's features are ~1/20 of its products with a block at d = 64, m = 256): where they
// fit in 64 MiB (Lk x F float64; L = 32768 at F = 256). The features are the same bits made
// either way, so this changes the time and memory, never the numbers.
constexpr bool pairwise_keeps_keys(std::size_t Lk, std::size_t F) {
    return Lk * F * 8 <= (std::size_t(64) << 20);
}

}  // namespace favor
