// Row-major GEMM over OpenBLAS, overloaded for float and double so one kernel body serves both:
//   C[m x n] = alpha * op(A) @ op(B) + beta * C
// Degenerate sizes are handled here (k == 0 scales C by beta), so callers need no special cases.
// Thread safety: reentrant (OpenBLAS is, for concurrent callers).
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernel_support.h"

namespace tessel::kernels {

namespace blas_internal {

inline blasint Int(int64_t v) {
  if (v > std::numeric_limits<blasint>::max()) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "matrix too large for BLAS");
  return static_cast<blasint>(std::max<int64_t>(v, 1));
}
inline CBLAS_TRANSPOSE Op(Trans t) { return t == Trans::kYes ? CblasTrans : CblasNoTrans; }
inline void Call(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, Op(ta), Op(tb), Int(m), Int(n), Int(k), alpha, a, Int(lda), b, Int(ldb), beta, c,
              Int(ldc));
}
inline void Call(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, Op(ta), Op(tb), Int(m), Int(n), Int(k), alpha, a, Int(lda), b, Int(ldb), beta, c,
              Int(ldc));
}

}  // namespace blas_internal

// The kernels parallelise over the host's pool and call BLAS from inside it, one small GEMM per tile:
// OpenBLAS must not start threads of its own for them (2 pool threads x OpenBLAS's threads oversubscribe
// the cores, and each call pays the threads' start-up). Called by each BLAS-using plugin's init; the
// setting is process-wide, which is what the host wants (its pool is the only parallelism).
inline void UseSingleThreadedBlas() { openblas_set_num_threads(1); }

template <typename T>
void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
  blas_internal::Call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace tessel::kernels
