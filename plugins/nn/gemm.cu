// nn.gemm on CUDA: one cuBLAS GEMM on the call's stream (arguments: gemm_args.h).
#include "cuda_support.h"
#include "gemm_args.h"

namespace tessel::kernels::nn {
namespace {

struct GemmCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const GemmArgs<T>& g) {
    if (g.m == 0 || g.n == 0) return;
    CublasPool::Lease blas = StateOf(args).blas.Acquire(StreamOf(args));
    if (g.k == 0) {
      // Nothing to multiply: C = beta C.
      CheckCuda(cudaMemsetAsync(g.c, 0, g.m * g.n * sizeof(T), StreamOf(args)), "zero C");
      if (g.params->beta != 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "nn.gemm on CUDA: k = 0 needs beta = 0");
      return;
    }
    GemmRowMajor(blas.get(), g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.n);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GemmCuda, GemmArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
