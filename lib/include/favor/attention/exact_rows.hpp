#pragma once
// The sampled rows' exact reference of a run computing in float (dtype float32 and the
// emulated half dtypes; docs/design.md 3.1): float32 products inside each key tile, every sum
// across key tiles in float64.
#include <cstddef>
#include <vector>

#include "favor/core/tensor.hpp"

namespace favor {

// Rows `rows` (ascending key positions) of exact softmax attention of Q, K, V as given (float32:
// the inputs rounded to float32, what a float32 estimator sees), returned in float64 (N, dv).
// Causal: row r sees keys j <= rows[r]. Per key tile of exact_tile_keys(4) keys (tile
// boundaries at multiples of it, from key 0): the scores S = Q K^T / sqrt d, the tile's max,
// exp(S - max), its row sums and P V in float32 (tile_kernels.hpp); the tiles' max, sums and
// outputs combined in float64 in key order (an online softmax over tiles). Each row's numbers
// depend only on its position and the inputs, never on the thread count or its row block.
// Error against the float64 rows of the unrounded inputs: exact_rows.cpp (the bound, tested in
// tests/attention/test_exact_rows.cpp). Memory: the output and exact_rows_thread_bytes per thread.
Mat<double> exact_attention_rows_f32(const Mat<float>& Q, const std::vector<std::size_t>& rows, const Mat<float>& K,
                                     const Mat<float>& V, bool causal = false, int threads = 1);

// exact_attention_rows_f32's error bound (derived in exact_rows.cpp): |out_rc - o_rc| <=
// bound mu_rc, o the float64 rows of the unrounded inputs (exact_attention_rows), mu_rc =
// sum_j P_rj |V_jc| with row r's exact softmax weights P_rj (at most max_j |V_jc|), for a row
// whose visible keys all have sum_k |q_k k_jk| / sqrt(d) <= A, among Lk keys.
double exact_rows_f32_bound(std::size_t d, double A, std::size_t Lk);

// Bytes one thread of the row-sampled reference holds for inputs of d columns and dv value
// columns: elem = 4, exact_attention_rows_f32's; elem = 8, exact_attention_rows<double>'s
// (exact_attention.cpp). Both: a block of kExactQueryRows rows against a tile of keys.
double exact_rows_thread_bytes(std::size_t d, std::size_t dv, std::size_t elem);

}  // namespace favor
