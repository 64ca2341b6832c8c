// optim.adam.step and optim.adamw.step on CUDA: elementwise and in place. The hyperparameters come from
// the host's parameter struct; the bias corrections are computed once on the host, in double, as on the CPU.
#include <cmath>

#include "cuda_support.h"
#include "kernels.h"

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
  static const tessel_op_decl& Decl() { return tessel_op_optim_adamw_step; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t p = kUnbound;
    T* param = args.InMutable<T>(0, "param", {&p});
    const T* grad = args.In<T>(1, "grad", {&p});
    T* m = args.InMutable<T>(2, "m", {&p});
    T* v = args.InMutable<T>(3, "v", {&p});
    const AdamwConstants<T> c = CheckedAdamwConstants<T>(args);
    if (p == 0) return;
    AdamwKernel<T><<<Blocks(p), kThreads, 0, StreamOf(args)>>>(param, grad, m, v, p, c);
    CheckLaunch("AdamwKernel");
  }
};

struct AdamStepRowsCuda {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step_rows; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t p = kUnbound, d = kUnbound, z = kUnbound;
    T* param = args.InMutable<T>(0, "param", {&p, &d});
    const T* grad_rows = args.In<T>(1, "grad_rows", {&z, &d});
    const int32_t* row_of = args.In<int32_t>(2, "row_of", {&p});
    T* m = args.InMutable<T>(3, "m", {&p, &d});
    T* v = args.InMutable<T>(4, "v", {&p, &d});
    const tessel_adam_params& h = CheckedAdamParams(args);
    if (p * d == 0) return;
    const double step = static_cast<double>(h.step);
    AdamRowsKernel<T><<<Blocks(p * d), kThreads, 0, StreamOf(args)>>>(
        param, grad_rows, row_of, m, v, p, d, static_cast<T>(h.lr / (1 - std::pow(h.beta1, step))),
        static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step))), static_cast<T>(1 - h.beta1), static_cast<T>(h.beta2),
        static_cast<T>(1 - h.beta2), static_cast<T>(h.weight_decay), static_cast<T>(h.eps));
    CheckLaunch("AdamRowsKernel");
  }
};

struct AdamStepCuda {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t p = kUnbound;
    T* param = args.InMutable<T>(0, "param", {&p});
    const T* grad = args.In<T>(1, "grad", {&p});
    T* m = args.InMutable<T>(2, "m", {&p});
    T* v = args.InMutable<T>(3, "v", {&p});
    const tessel_adam_params& h = CheckedAdamParams(args);
    if (p == 0) return;
    const double step = static_cast<double>(h.step);
    AdamKernel<T><<<Blocks(p), kThreads, 0, StreamOf(args)>>>(
        param, grad, m, v, p, static_cast<T>(h.lr / (1 - std::pow(h.beta1, step))),
        static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step))), static_cast<T>(1 - h.beta1), static_cast<T>(h.beta2),
        static_cast<T>(1 - h.beta2), static_cast<T>(h.weight_decay), static_cast<T>(h.eps));
    CheckLaunch("AdamKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(AdamStepCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(AdamStepRowsCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(AdamwStepCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
