// nn.relu.fwd/.bwd on CUDA: elementwise grid-stride loops (arguments: activation_args.h).
#include "activation_args.h"
#include "cuda_support.h"

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
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationFwdArgs<T>& a) {
    if (a.count == 0) return;
    ReluFwdKernel<T><<<Blocks(a.count), kThreads, 0, StreamOf(args)>>>(a.x, a.count, a.y);
    CheckLaunch("ReluFwdKernel");
  }
};

struct ReluBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationBwdArgs<T>& a) {
    if (a.count == 0) return;
    ReluBwdKernel<T><<<Blocks(a.count), kThreads, 0, StreamOf(args)>>>(a.dy, a.saved, a.count, a.dx);
    CheckLaunch("ReluBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(ReluFwdCuda, ReluFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(ReluBwdCuda, ReluBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
