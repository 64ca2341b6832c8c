// The kernels of libtessel_llm.so, the GPT-2 ops of <tessel/ops/llm.h>: one registration function per
// (op, device), collected by llm_plugin.cc. Each op's arguments are bound and checked by its binder, shared
// by the CPU and CUDA kernels: the `*_args.h` headers of this folder.
// Thread safety: every kernel is reentrant; the CPU ones run race-free on the host's pool.
#pragma once

#include <tessel/ops/llm.h>

#include "kernel_support.h"

namespace tessel::kernels::llm {

KernelRegistration EncoderFwdCpuKernel();
KernelRegistration EncoderBwdCpuKernel();
KernelRegistration LayernormFwdCpuKernel();
KernelRegistration LayernormBwdCpuKernel();
KernelRegistration LayernormBwdFromOutputCpuKernel();
KernelRegistration AttentionFwdCpuKernel();
KernelRegistration AttentionBwdCpuKernel();

KernelRegistration EncoderFwdCudaKernel();
KernelRegistration EncoderBwdCudaKernel();
KernelRegistration LayernormFwdCudaKernel();
KernelRegistration LayernormBwdCudaKernel();
KernelRegistration LayernormBwdFromOutputCudaKernel();
KernelRegistration AttentionFwdCudaKernel();
KernelRegistration AttentionBwdCudaKernel();

}  // namespace tessel::kernels::llm
