// The kernels of libtessel_rgnn.so (<tessel/ops/rgnn.h>): one registration function per (op, device),
// collected by rgnn_plugin.cc. The CPU kernels validate every index array and run race-free on the
// host's pool without atomics (sums in a fixed order); the CUDA ones trust the indices and scatter
// with atomics. Every kernel is reentrant.
#pragma once

#include <tessel/ops/rgnn.h>

#include "kernel_support.h"

namespace tessel::kernels::rgnn {

KernelRegistration TypedLinearFwdCpuKernel();
KernelRegistration TypedLinearBwdCpuKernel();
KernelRegistration TypedEmbedFwdCpuKernel();
KernelRegistration TypedEmbedBwdCpuKernel();
KernelRegistration AggregateFwdCpuKernel();
KernelRegistration AggregateBwdCpuKernel();

KernelRegistration TypedLinearFwdCudaKernel();
KernelRegistration TypedLinearBwdCudaKernel();
KernelRegistration TypedEmbedFwdCudaKernel();
KernelRegistration TypedEmbedBwdCudaKernel();
KernelRegistration AggregateFwdCudaKernel();
KernelRegistration AggregateBwdCudaKernel();

}  // namespace tessel::kernels::rgnn
