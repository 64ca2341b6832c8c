// The kernels of libtessel_nn.so, the ops that every model family shares (<tessel/ops/nn.h>,
// <tessel/ops/optim.h>): one registration function per (op, device), collected by nn_plugin.cc. Each
// op's arguments are bound and checked by its binder, shared by the CPU and CUDA kernels: the
// `*_args.h` headers of this folder.
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
KernelRegistration LinearFwdCpuKernel();
KernelRegistration LinearBwdCpuKernel();
KernelRegistration LinearGeluTanhFwdCpuKernel();
KernelRegistration GeluTanhFwdCpuKernel();
KernelRegistration GeluTanhBwdCpuKernel();
KernelRegistration AddCpuKernel();
KernelRegistration CastCpuKernel();
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
KernelRegistration LinearGeluTanhFwdCudaKernel();
KernelRegistration GeluTanhFwdCudaKernel();
KernelRegistration GeluTanhBwdCudaKernel();
KernelRegistration AddCudaKernel();
KernelRegistration CastCudaKernel();
KernelRegistration SumSquaresCudaKernel();
KernelRegistration AdamwStepCudaKernel();

}  // namespace tessel::kernels::nn
