#pragma once
// Thin typed wrappers over the BLAS (row-major), so hot products take raw row blocks without
// copies (xtensor trap: views passed to xtensor-blas are copied first). OpenBLAS's CBLAS by
// default; BLIS's typed API with -DFAVOR_BLAS=blis (docs/speed.md, the BLAS comparison).
// LAPACK (QR, eigh through xtensor-blas) is OpenBLAS's in both builds.
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
// At the start of main: re-executes the program with OPENBLAS_NUM_THREADS=1 unless it is
// set, so OpenBLAS never starts its thread pool (favor/core/process.hpp, prepare_process).
void start_blas_single_threaded(char** argv);
// The BLAS's own thread count (for the gemm_rate reference only).
void set_blas_threads(int n);

// "OpenBLAS 0.3.21 ..." or "BLIS 0.9.0 (zen3)" for run.json.
std::string blas_info();

// GFLOP/s of one n x n x n gemm on `threads` threads: the best of the BLAS's own threading
// and favor's split in row blocks (single-threaded BLAS per block), each the fastest of
// `repeats` timed calls after one warm-up. The reference the timing experiment's gemm_ratio
// and favor_bench divide by; leaves the BLAS single-threaded.
template <class T>
double gemm_rate(std::size_t n, int threads, int repeats);

}  // namespace favor
