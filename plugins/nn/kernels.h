// The kernels of libtessel_nn.so, the ops that every model family shares (<tessel/ops/nn.h>,
// <tessel/ops/optim.h>): one registration function per (op, device), collected by nn_plugin.cc, and
// the checks that the CPU and CUDA versions of an op share.
// Thread safety: every kernel is reentrant; the CPU ones run race-free on the host's pool.
#pragma once

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <cmath>

#include "kernel_support.h"

namespace tessel::kernels::nn {

KernelRegistration ReluFwdCpuKernel();
KernelRegistration ReluBwdCpuKernel();
KernelRegistration GeluFwdCpuKernel();
KernelRegistration GeluBwdCpuKernel();
KernelRegistration SoftmaxXentCpuKernel();
KernelRegistration GemmCpuKernel();
KernelRegistration EmbeddingFwdCpuKernel();
KernelRegistration EmbeddingBwdCpuKernel();
KernelRegistration AdamStepCpuKernel();
KernelRegistration AdamStepRowsCpuKernel();
KernelRegistration LinearFwdCpuKernel();
KernelRegistration LinearBwdCpuKernel();
KernelRegistration GeluTanhFwdCpuKernel();
KernelRegistration GeluTanhBwdCpuKernel();
KernelRegistration AddCpuKernel();
KernelRegistration SumSquaresCpuKernel();
KernelRegistration AdamwStepCpuKernel();

KernelRegistration ReluFwdCudaKernel();
KernelRegistration ReluBwdCudaKernel();
KernelRegistration GeluFwdCudaKernel();
KernelRegistration GeluBwdCudaKernel();
KernelRegistration SoftmaxXentCudaKernel();
KernelRegistration GemmCudaKernel();
KernelRegistration EmbeddingFwdCudaKernel();
KernelRegistration EmbeddingBwdCudaKernel();
KernelRegistration AdamStepCudaKernel();
KernelRegistration AdamStepRowsCudaKernel();
KernelRegistration LinearFwdCudaKernel();
KernelRegistration LinearBwdCudaKernel();
KernelRegistration GeluTanhFwdCudaKernel();
KernelRegistration GeluTanhBwdCudaKernel();
KernelRegistration AddCudaKernel();
KernelRegistration SumSquaresCudaKernel();
KernelRegistration AdamwStepCudaKernel();

// optim.adam.step's parameters, checked (step >= 1, betas in [0, 1), eps and lr >= 0).
const tessel_adam_params& CheckedAdamParams(const KernelArgs& args);

// optim.adamw.step's parameters, checked: step >= 1, betas in [0, 1), eps, lr and weight_decay >= 0,
// grad_scale >= 0 and finite. Fails with an invalid-argument error otherwise.
const tessel_adamw_params& CheckedAdamwParams(const KernelArgs& args);

// optim.adamw.step's update, with its per-step constants worked out once on the host, in double, then
// rounded to T (the same on CPU and CUDA): g = grad_scale * grad; p *= decay; m = beta1 m + (1 - beta1) g;
// v = beta2 v + (1 - beta2) g^2; p -= step_size * m / (sqrt(v) / bias2_sqrt + eps).
template <typename T>
struct AdamwConstants {
  T grad_scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias2_sqrt, eps;
};
template <typename T>
AdamwConstants<T> CheckedAdamwConstants(const KernelArgs& args) {
  const tessel_adamw_params& h = CheckedAdamwParams(args);
  const double step = static_cast<double>(h.step);
  return AdamwConstants<T>{static_cast<T>(h.grad_scale),
                           static_cast<T>(1 - h.lr * h.weight_decay),
                           static_cast<T>(h.beta1),
                           static_cast<T>(1 - h.beta1),
                           static_cast<T>(h.beta2),
                           static_cast<T>(1 - h.beta2),
                           static_cast<T>(h.lr / (1 - std::pow(h.beta1, step))),
                           static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step))),
                           static_cast<T>(h.eps)};
}

// nn.linear.bwd's optional dX: true when it is to be computed (as many rows as dY), false when the
// caller skipped it (0 rows). Fails on any other row count.
bool LinearBwdWantsDx(int64_t dx_rows, int64_t n);

// nn.gemm's product shape: op(A) is [m, k], op(B) [k, n], C [m, n]. Fails when they do not chain.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};
GemmShape CheckedGemmShape(const KernelArgs& args);

}  // namespace tessel::kernels::nn
