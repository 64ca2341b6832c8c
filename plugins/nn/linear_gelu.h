// The bodies that nn.linear_gelu_tanh.fwd composes where it does not fuse them (the CPU kernel always; the
// CUDA kernel in double, and where cuBLASLt offers no fused algorithm): the tanh GELU of gelu_cpu.cc and
// gelu.cu over `count` elements of x into y (x and y distinct), for T = float, double and Bf16. The CUDA
// one queues on the call's stream.
#pragma once

#include <cstdint>

#include "kernel_support.h"

namespace tessel::kernels::nn {

template <typename T>
void GeluTanhForwardCpu(const KernelArgs& args, const T* x, int64_t count, T* y);

template <typename T>
void GeluTanhForwardCuda(const KernelArgs& args, const T* x, int64_t count, T* y);

}  // namespace tessel::kernels::nn
