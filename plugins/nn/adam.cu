// optim.adam.step and optim.adamw.step on CUDA: elementwise and in place. The hyperparameters come from
// the host's parameter struct; the bias corrections are computed once on the host, in double, by the
// binder the CPU kernels share (adam_args.h).
#include "adam_args.h"
#include "cuda_support.h"

namespace tessel::kernels::nn {
namespace {

template <typename T>
__global__ void AdamKernel(T* param, const T* grad, T* m, T* v, int64_t p, T step_size, T bias2_sqrt, T b1c, T b2,
                           T b2c, T wd, T eps) {
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
__global__ void AdamRowsKernel(T* param, const T* grad_rows, const int32_t* row_of, T* m, T* v, int64_t p, int64_t d,
                               T step_size, T bias2_sqrt, T b1c, T b2, T b2c, T wd, T eps) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p * d; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / d;
    const int32_t k = row_of[row];
    const T g = (k >= 0 ? grad_rows[static_cast<int64_t>(k) * d + i % d] : T(0)) + wd * param[i];
    const T mi = m[i] + b1c * (g - m[i]);
    const T vi = v[i] * b2 + b2c * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= step_size * mi / (sqrt(vi) / bias2_sqrt + eps);
  }
}

// The same expression as adam_cpu.cc's AdamwSpan.
template <typename T>
__global__ void AdamwKernel(T* param, const T* grad, T* m, T* v, int64_t p, AdamwConstants<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p; i += int64_t(gridDim.x) * blockDim.x) {
    const T g = c.grad_scale * grad[i];
    const T mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    const T vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * c.decay - c.step_size * mi / (sqrt(vi) / c.bias2_sqrt + c.eps);
  }
}

struct AdamwStepCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ElementwiseStep<T, AdamwConstants<T>>& a) {
    if (a.p == 0) return;
    AdamwKernel<T><<<Blocks(a.p), kThreads, 0, StreamOf(args)>>>(a.param, a.grad, a.m, a.v, a.p, a.c);
    CheckLaunch("AdamwKernel");
  }
};

struct AdamStepRowsCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AdamStepRowsArgs<T>& a) {
    const AdamConstants<T>& c = a.c;
    if (a.p * a.d == 0) return;
    AdamRowsKernel<T><<<Blocks(a.p * a.d), kThreads, 0, StreamOf(args)>>>(
        a.param, a.grad_rows, a.row_of, a.m, a.v, a.p, a.d, c.step_size, c.bias2_sqrt, c.one_minus_beta1, c.beta2,
        c.one_minus_beta2, c.weight_decay, c.eps);
    CheckLaunch("AdamRowsKernel");
  }
};

struct AdamStepCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ElementwiseStep<T, AdamConstants<T>>& a) {
    const AdamConstants<T>& c = a.c;
    if (a.p == 0) return;
    AdamKernel<T><<<Blocks(a.p), kThreads, 0, StreamOf(args)>>>(a.param, a.grad, a.m, a.v, a.p, c.step_size,
                                                                c.bias2_sqrt, c.one_minus_beta1, c.beta2,
                                                                c.one_minus_beta2, c.weight_decay, c.eps);
    CheckLaunch("AdamKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(AdamStepCuda, AdamStepArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(AdamStepRowsCuda, AdamStepRowsArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(AdamwStepCuda, AdamwStepArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
