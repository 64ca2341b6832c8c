// optim.adam.step on CUDA: elementwise and in place; the hyperparameters are read from device memory,
// so a step needs no host round trip.
#include "cuda_kernels.h"
#include "cuda_support.h"
#include "rgnn_ops.h"

namespace tessel::rgnn {
namespace {

template <typename T>
__global__ void AdamKernel(T* param, const T* grad, T* m, T* v, const double* hyper, int64_t p) {
  const double beta1 = hyper[kBeta1], beta2 = hyper[kBeta2], step = hyper[kStep];
  const T step_size = static_cast<T>(hyper[kLr] / (1 - pow(beta1, step)));
  const T bias2_sqrt = static_cast<T>(sqrt(1 - pow(beta2, step)));
  const T b1c = static_cast<T>(1 - beta1), b2 = static_cast<T>(beta2), b2c = static_cast<T>(1 - beta2);
  const T wd = static_cast<T>(hyper[kWeightDecay]), eps = static_cast<T>(hyper[kEps]);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p; i += int64_t(gridDim.x) * blockDim.x) {
    const T g = grad[i] + wd * param[i];
    const T mi = m[i] + b1c * (g - m[i]);
    const T vi = v[i] * b2 + b2c * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= step_size * mi / (sqrt(vi) / bias2_sqrt + eps);
  }
}

template <typename T>
void AdamStep(const KernelArgs& args) {
  int64_t p = kUnbound, seven = kNumAdamHyper;
  T* param = args.InMutable<T>(0, "param", {&p});
  const T* grad = args.In<T>(1, "grad", {&p});
  T* m = args.InMutable<T>(2, "m", {&p});
  T* v = args.InMutable<T>(3, "v", {&p});
  const double* hyper = args.In<double>(4, "hyper", {&seven});
  if (p == 0) return;
  AdamKernel<T><<<Blocks(p), kThreads, 0, StreamOf(args)>>>(param, grad, m, v, hyper, p);
  CheckLaunch("AdamKernel");
}

}  // namespace

tessel_status* AdamStepCuda(void*, const tessel_kernel_call* call) {
  return RunGuarded(call, [&] {
    KernelArgs args(call, TESSEL_DEVICE_CUDA, 5, 0);
    DispatchFloating(args.in(0).dtype, [&](auto zero) { AdamStep<decltype(zero)>(args); });
  });
}

}  // namespace tessel::rgnn
