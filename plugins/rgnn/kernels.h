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
KernelRegistration RgcnFwdCpuKernel();
KernelRegistration RgcnBwdCpuKernel();
KernelRegistration RgcnEmbedFwdCpuKernel();
KernelRegistration RgcnEmbedBwdCpuKernel();
KernelRegistration RgcnEmbedBwdRowsCpuKernel();
KernelRegistration RgatFwdCpuKernel();
KernelRegistration RgatBwdCpuKernel();
KernelRegistration RgatEmbedFwdCpuKernel();
KernelRegistration RgatEmbedBwdCpuKernel();
KernelRegistration HgtFwdCpuKernel();
KernelRegistration HgtBwdCpuKernel();
KernelRegistration TypedGateFwdCpuKernel();
KernelRegistration TypedGateBwdCpuKernel();
KernelRegistration BlockDiagFwdCpuKernel();
KernelRegistration BlockDiagBwdCpuKernel();

KernelRegistration TypedLinearFwdCudaKernel();
KernelRegistration TypedLinearBwdCudaKernel();
KernelRegistration TypedEmbedFwdCudaKernel();
KernelRegistration TypedEmbedBwdCudaKernel();
KernelRegistration AggregateFwdCudaKernel();
KernelRegistration AggregateBwdCudaKernel();
KernelRegistration RgcnFwdCudaKernel();
KernelRegistration RgcnBwdCudaKernel();
KernelRegistration RgcnEmbedFwdCudaKernel();
KernelRegistration RgcnEmbedBwdCudaKernel();
KernelRegistration RgcnEmbedBwdRowsCudaKernel();
KernelRegistration RgatFwdCudaKernel();
KernelRegistration RgatBwdCudaKernel();
KernelRegistration RgatEmbedFwdCudaKernel();
KernelRegistration RgatEmbedBwdCudaKernel();
KernelRegistration HgtFwdCudaKernel();
KernelRegistration HgtBwdCudaKernel();
KernelRegistration TypedGateFwdCudaKernel();
KernelRegistration TypedGateBwdCudaKernel();
KernelRegistration BlockDiagFwdCudaKernel();
KernelRegistration BlockDiagBwdCudaKernel();

}  // namespace tessel::kernels::rgnn
