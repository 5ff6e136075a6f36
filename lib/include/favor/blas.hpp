#pragma once
// Thin typed wrappers over OpenBLAS (row-major CBLAS), so hot products take raw row blocks
// without copies (xtensor trap: views passed to xtensor-blas are copied first).
#include <cstddef>
#include <string>

namespace favor {

// C (M x N, leading dim ldc) = alpha * op(A) op(B) + beta * C, all row-major.
// op(A) is M x K (A stored K x M when trans_a), op(B) is K x N (B stored N x K when trans_b).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, T alpha,
          const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta, T* C,
          std::size_t ldc);

// BLAS runs single-threaded: favor splits work over its own threads, in a fixed way, so a
// cell's numbers never depend on the thread count.
void set_blas_single_threaded();

// "OpenBLAS 0.3.21 ..." for run.json.
std::string blas_info();

}  // namespace favor
