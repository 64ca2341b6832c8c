// nn.gemm on CPU: C = alpha op(A) op(B) + beta C through OpenBLAS, split on the host's pool. Tall
// products are split by rows of C; short, deep ones (a weight gradient X^T dY) by the inner dimension,
// with the partial products summed in a fixed order so the result does not depend on the threads.
// Arguments: gemm_args.h.
#include <algorithm>
#include <vector>

#include "blas.h"
#include "gemm_args.h"
#include "index_checks.h"

namespace tessel::kernels::nn {
namespace {

struct GemmCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const GemmArgs<T>& g);
};

template <typename T>
void GemmCpu::Run(const KernelArgs& args, const GemmArgs<T>& g) {
  const int64_t m = g.m, n = g.n, k = g.k, a_cols = g.lda, b_cols = g.ldb;
  const T* a = g.a;
  const T* b = g.b;
  T* c = g.c;
  const Trans ta = g.ta, tb = g.tb;
  const T alpha = g.alpha, beta = g.beta;
  // op(A) rows i0..i1 start at row i0 of A, or at column i0 when A is transposed.
  const auto a_rows_from = [&](int64_t i0) { return ta == Trans::kYes ? a + i0 : a + i0 * a_cols; };
  const auto a_inner_from = [&](int64_t k0) { return ta == Trans::kYes ? a + k0 * a_cols : a + k0; };
  const auto b_inner_from = [&](int64_t k0) { return tb == Trans::kYes ? b + k0 : b + k0 * b_cols; };

  const int64_t block_rows = GemmBlockRows(k, n);
  if (m >= 2 * block_rows || k <= 4 * block_rows) {
    const int64_t blocks = (m + block_rows - 1) / block_rows;
    args.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t i0 = blk * block_rows, rows = std::min(block_rows, m - i0);
        Gemm<T>(ta, tb, rows, n, k, alpha, a_rows_from(i0), a_cols, b, b_cols, beta, c + i0 * n, n);
      }
    });
    return;
  }
  // Split the inner dimension into fixed chunks; chunk j's partial product goes to its own buffer.
  const int64_t chunk = std::max<int64_t>(block_rows, (k + 15) / 16);
  const int64_t chunks = (k + chunk - 1) / chunk;
  std::vector<T> partial(static_cast<size_t>(chunks * m * n));
  args.ParallelFor(chunks, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t k0 = j * chunk, depth = std::min(chunk, k - k0);
      Gemm<T>(ta, tb, m, n, depth, T(1), a_inner_from(k0), a_cols, b_inner_from(k0), b_cols, T(0),
              partial.data() + j * m * n, n);
    }
  });
  args.ParallelFor(m * n, 1 << 14, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      T sum = T(0);
      for (int64_t j = 0; j < chunks; ++j) sum += partial[static_cast<size_t>(j * m * n + e)];
      c[e] = alpha * sum + (beta == T(0) ? T(0) : beta * c[e]);
    }
  });
}

}  // namespace

TESSEL_DEFINE_KERNEL(GemmCpu, GemmArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
