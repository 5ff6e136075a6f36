#include "favor/core/blas.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "favor/core/parallel.hpp"

#if defined(FAVOR_USE_BLIS)
#include <blis.h>
#else
#include <cblas.h>
#endif

namespace favor {

#if defined(FAVOR_USE_BLIS)
// BLIS's typed API takes (row, column) strides: row-major storage is (ld, 1), and a
// transposed operand passes the strides of the matrix as stored.
template <class T>
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A, std::size_t lda,
          const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
    if (M == 0 || N == 0) return;
    const auto op = [](bool t) { return t ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE; };
    const auto s = [](std::size_t n) { return static_cast<inc_t>(n); };
    T* a = const_cast<T*>(A);
    T* b = const_cast<T*>(B);
    if constexpr (std::is_same_v<T, float>)
        bli_sgemm(op(ta), op(tb), s(M), s(N), s(K), &alpha, a, s(lda), 1, b, s(ldb), 1, &beta, C, s(ldc), 1);
    else
        bli_dgemm(op(ta), op(tb), s(M), s(N), s(K), &alpha, a, s(lda), 1, b, s(ldb), 1, &beta, C, s(ldc), 1);
}

void set_blas_threads(int n) { bli_thread_set_num_threads(std::max(n, 1)); }

void start_blas_single_threaded(char**) {}   // BLIS starts no threads of its own at load

std::string blas_info() {
    return std::string("BLIS ") + bli_info_get_version_str() + " (" + bli_arch_string(bli_arch_query_id()) + ")";
}
#else
template <class T>
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A, std::size_t lda,
          const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
    if (M == 0 || N == 0) return;
    const auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
    const auto i = [](std::size_t n) { return static_cast<blasint>(n); };
    if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, op(ta), op(tb), i(M), i(N), i(K), alpha, A, i(lda), B, i(ldb), beta, C, i(ldc));
    else
        cblas_dgemm(CblasRowMajor, op(ta), op(tb), i(M), i(N), i(K), alpha, A, i(lda), B, i(ldb), beta, C, i(ldc));
}

void set_blas_threads(int n) { openblas_set_num_threads(std::max(n, 1)); }

// OpenBLAS reads OPENBLAS_NUM_THREADS in its constructor, before main: the only way to keep
// its pool from starting is to set it and run the program again (once: it is set then).
void start_blas_single_threaded(char** argv) {
    if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr || argv == nullptr) return;
    if (::setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
    ::execv("/proc/self/exe", argv);   // returns only on failure (no /proc): go on as is
}

std::string blas_info() {
    const char* c = openblas_get_config();
    const std::string config = c ? c : "";
    return config.rfind("OpenBLAS", 0) == 0 ? config : "OpenBLAS " + config;
}
#endif

template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

void set_blas_single_threaded() { set_blas_threads(1); }

template <class T>
double gemm_rate(std::size_t n, int threads, int repeats) {
    // Deterministic, well-scaled operands (the rate does not depend on the values).
    std::vector<T> A(n * n), B(n * n), C(n * n);
    for (std::size_t k = 0; k < n * n; ++k) {
        A[k] = T(double(k % 7) * 0.25 - 0.75);
        B[k] = T(double(k % 5) * 0.5 - 1.0);
    }
    const auto best = [&](auto&& f) {
        f();
        double t = 1e300;
        for (int r = 0; r < std::max(repeats, 1); ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            f();
            t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return t;
    };
    set_blas_threads(threads);
    const double t_blas = best([&] { gemm<T>(false, false, n, n, n, T(1), A.data(), n, B.data(), n, T(0), C.data(), n); });
    set_blas_single_threaded();
    const std::size_t parts = std::size_t(std::max(threads, 1));
    const double t_split = best([&] {
        parallel_for(parts, threads, [&](std::size_t p) {
            const std::size_t r0 = p * n / parts, r1 = (p + 1) * n / parts;
            gemm<T>(false, false, r1 - r0, n, n, T(1), A.data() + r0 * n, n, B.data(), n, T(0), C.data() + r0 * n, n);
        });
    });
    return 2.0 * double(n) * double(n) * double(n) / std::min(t_blas, t_split) / 1e9;
}

template double gemm_rate<float>(std::size_t, int, int);
template double gemm_rate<double>(std::size_t, int, int);

}  // namespace favor
