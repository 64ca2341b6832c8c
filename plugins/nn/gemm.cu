// nn.gemm on CUDA: one cuBLAS GEMM on the call's stream.
#include "cuda_support.h"
#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

struct GemmCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gemm; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    const GemmShape s = CheckedGemmShape(args);
    const tessel_gemm_params& p = args.Params<tessel_gemm_params>();
    int64_t a_rows = kUnbound, a_cols = kUnbound, b_rows = kUnbound, b_cols = kUnbound, m = s.m, n = s.n;
    const T* a = args.In<T>(0, "A", {&a_rows, &a_cols});
    const T* b = args.In<T>(1, "B", {&b_rows, &b_cols});
    T* c = args.Out<T>(0, "C", {&m, &n});
    if (m == 0 || n == 0) return;
    CublasPool::Lease blas = StateOf(args).blas.Acquire(StreamOf(args));
    if (s.k == 0) {
      // Nothing to multiply: C = beta C.
      CheckCuda(cudaMemsetAsync(c, 0, m * n * sizeof(T), StreamOf(args)), "zero C");
      if (p.beta != 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm on CUDA: k = 0 needs beta = 0");
      return;
    }
    GemmRowMajor(blas.get(), p.trans_a ? Trans::kYes : Trans::kNo, p.trans_b ? Trans::kYes : Trans::kNo, m, n, s.k,
                 static_cast<T>(p.alpha), a, a_cols, b, b_cols, static_cast<T>(p.beta), c, n);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GemmCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
