// nn.relu.fwd/.bwd on CUDA: elementwise grid-stride loops.
#include "cuda_support.h"
#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

template <typename T>
__global__ void ReluFwdKernel(const T* x, int64_t n, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = x[i] > T(0) ? x[i] : T(0);
  }
}

template <typename T>
__global__ void ReluBwdKernel(const T* dy, const T* y, int64_t n, T* dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dx[i] = y[i] > T(0) ? dy[i] : T(0);
  }
}

struct ReluFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_relu_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    if (n * d == 0) return;
    ReluFwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(x, n * d, y);
    CheckLaunch("ReluFwdKernel");
  }
};

struct ReluBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_relu_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* y = args.In<T>(1, "Y", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    if (n * d == 0) return;
    ReluBwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(dy, y, n * d, dx);
    CheckLaunch("ReluBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(ReluFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(ReluBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
