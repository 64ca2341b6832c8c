// The kernels of libtessel_nn.so, the ops that every model family shares (<tessel/ops/nn.h>,
// <tessel/ops/optim.h>): one registration function per (op, device), collected by nn_plugin.cc, and
// the checks that the CPU and CUDA versions of an op share.
// Thread safety: every kernel is reentrant; the CPU ones run race-free on the host's pool.
#pragma once

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

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

// optim.adam.step's parameters, checked (step >= 1, betas in [0, 1), eps and lr >= 0).
const tessel_adam_params& CheckedAdamParams(const KernelArgs& args);

// nn.gemm's product shape: op(A) is [m, k], op(B) [k, n], C [m, n]. Fails when they do not chain.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};
GemmShape CheckedGemmShape(const KernelArgs& args);

}  // namespace tessel::kernels::nn
