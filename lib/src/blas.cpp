#include "favor/blas.hpp"

#include <cblas.h>

namespace favor {

namespace {
inline CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }
inline blasint I(std::size_t n) { return static_cast<blasint>(n); }
}  // namespace

template <>
void gemm<float>(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, float alpha,
                 const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta,
                 float* C, std::size_t ldc) {
    if (M == 0 || N == 0) return;
    cblas_sgemm(CblasRowMajor, op(ta), op(tb), I(M), I(N), I(K), alpha, A, I(lda), B, I(ldb),
                beta, C, I(ldc));
}

template <>
void gemm<double>(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, double alpha,
                  const double* A, std::size_t lda, const double* B, std::size_t ldb,
                  double beta, double* C, std::size_t ldc) {
    if (M == 0 || N == 0) return;
    cblas_dgemm(CblasRowMajor, op(ta), op(tb), I(M), I(N), I(K), alpha, A, I(lda), B, I(ldb),
                beta, C, I(ldc));
}

void set_blas_single_threaded() { openblas_set_num_threads(1); }

std::string blas_info() {
    const char* c = openblas_get_config();
    const std::string config = c ? c : "";
    return config.rfind("OpenBLAS", 0) == 0 ? config : "OpenBLAS " + config;
}

}  // namespace favor
