// The arguments of nn.gemm (<tessel/ops/nn.h>), bound and checked here once for its CPU and CUDA kernels
// (gemm*) and every dtype: C = alpha op(A) op(B) + beta C, op(A) [M, K], op(B) [K, N], C [M, N].
// Failure: Bind throws KernelError (invalid-argument) for trans flags other than 0 and 1, operands that
// are not 2-D or do not chain, a dtype that does not match or a missing parameter struct.
#pragma once

#include <cstdint>
#include <string>

#include "kernels.h"

namespace tessel::kernels::nn {

template <typename T>
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  Trans ta = Trans::kNo, tb = Trans::kNo;
  T alpha = T(0), beta = T(0);
  const tessel_gemm_params* params = nullptr;  // as the host passed them (alpha and beta in double)
  const T* a = nullptr;
  int64_t lda = 0;  // A's stored columns
  const T* b = nullptr;
  int64_t ldb = 0;  // B's stored columns
  T* c = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_gemm; }

  static GemmArgs Bind(const KernelArgs& args) {
    const tessel_gemm_params& p = args.Params<tessel_gemm_params>();
    if ((p.trans_a != 0 && p.trans_a != 1) || (p.trans_b != 0 && p.trans_b != 1)) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm: trans_a and trans_b must be 0 or 1");
    }
    const tessel_tensor &ta = args.in(0), &tb = args.in(1), &tc = args.out(0);
    if (ta.ndim != 2 || tb.ndim != 2 || tc.ndim != 2) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm: A, B and C are 2-D");
    }
    GemmArgs g;
    g.m = p.trans_a ? ta.shape[1] : ta.shape[0];
    g.k = p.trans_a ? ta.shape[0] : ta.shape[1];
    const int64_t kb = p.trans_b ? tb.shape[1] : tb.shape[0];
    g.n = p.trans_b ? tb.shape[0] : tb.shape[1];
    if (kb != g.k || tc.shape[0] != g.m || tc.shape[1] != g.n) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm: op(A) is [" + std::to_string(g.m) + ", " + std::to_string(g.k) +
                                               "], op(B) [" + std::to_string(kb) + ", " + std::to_string(g.n) +
                                               "] and C [" + std::to_string(tc.shape[0]) + ", " +
                                               std::to_string(tc.shape[1]) + "]: the shapes do not chain");
    }
    int64_t a_rows = kUnbound, a_cols = kUnbound, b_rows = kUnbound, b_cols = kUnbound, m = g.m, n = g.n;
    g.a = args.In<T>(0, "A", {&a_rows, &a_cols});
    g.b = args.In<T>(1, "B", {&b_rows, &b_cols});
    g.c = args.Out<T>(0, "C", {&m, &n});
    g.lda = a_cols;
    g.ldb = b_cols;
    g.ta = p.trans_a ? Trans::kYes : Trans::kNo;
    g.tb = p.trans_b ? Trans::kYes : Trans::kNo;
    g.alpha = static_cast<T>(p.alpha);
    g.beta = static_cast<T>(p.beta);
    g.params = &p;
    return g;
  }
};

}  // namespace tessel::kernels::nn
