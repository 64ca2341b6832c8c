// nn.gemm on CPU: C = alpha op(A) op(B) + beta C through OpenBLAS, split on the host's pool. Tall
// products are split by rows of C; short, deep ones (a weight gradient X^T dY) by the inner dimension,
// with the partial products summed in a fixed order so the result does not depend on the threads.
#include <algorithm>
#include <string>
#include <vector>

#include "blas.h"
#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

struct GemmCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gemm; }
  template <typename T>
  static void Run(const KernelArgs& args);
};

template <typename T>
void GemmCpu::Run(const KernelArgs& args) {
  const GemmShape s = CheckedGemmShape(args);
  const tessel_gemm_params& p = args.Params<tessel_gemm_params>();
  int64_t a_rows = kUnbound, a_cols = kUnbound, b_rows = kUnbound, b_cols = kUnbound, m = s.m, n = s.n;
  const T* a = args.In<T>(0, "A", {&a_rows, &a_cols});
  const T* b = args.In<T>(1, "B", {&b_rows, &b_cols});
  T* c = args.Out<T>(0, "C", {&m, &n});
  const Trans ta = p.trans_a ? Trans::kYes : Trans::kNo, tb = p.trans_b ? Trans::kYes : Trans::kNo;
  const T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta);
  const int64_t k = s.k;
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

GemmShape CheckedGemmShape(const KernelArgs& args) {
  const tessel_gemm_params& p = args.Params<tessel_gemm_params>();
  if ((p.trans_a != 0 && p.trans_a != 1) || (p.trans_b != 0 && p.trans_b != 1)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm: trans_a and trans_b must be 0 or 1");
  }
  const tessel_tensor &a = args.in(0), &b = args.in(1), &c = args.out(0);
  if (a.ndim != 2 || b.ndim != 2 || c.ndim != 2) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm: A, B and C are 2-D");
  GemmShape s;
  s.m = p.trans_a ? a.shape[1] : a.shape[0];
  s.k = p.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = p.trans_b ? b.shape[1] : b.shape[0];
  s.n = p.trans_b ? b.shape[0] : b.shape[1];
  if (kb != s.k || c.shape[0] != s.m || c.shape[1] != s.n) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "nn.gemm: op(A) is [" + std::to_string(s.m) + ", " + std::to_string(s.k) + "], op(B) [" + std::to_string(kb) +
             ", " + std::to_string(s.n) + "] and C [" + std::to_string(c.shape[0]) + ", " + std::to_string(c.shape[1]) +
             "]: the shapes do not chain");
  }
  return s;
}

TESSEL_DEFINE_KERNEL(GemmCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
