// The kernels of libtessel_llm.so, the GPT-2 ops of <tessel/ops/llm.h>: one registration function per
// (op, device), collected by llm_plugin.cc, and the checks that the CPU and CUDA versions of an op share.
// Thread safety: every kernel is reentrant; the CPU ones run race-free on the host's pool.
// Failure: the checks throw KernelError (caught by the kernel shim): invalid-argument for shapes and
// parameters, bad-data for token ids.
#pragma once

#include <tessel/ops/llm.h>

#include <cstdint>

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

// llm.encoder: the S positions of a sequence must have rows in wpe (S <= P).
void CheckPositions(const KernelArgs& args, int64_t s, int64_t p);
// llm.encoder: every token in [0, V). The error names the op, the position [b, t] and the value.
// Reads host memory: CPU kernels only.
void CheckTokens(const KernelArgs& args, const int32_t* tokens, int64_t b, int64_t s, int64_t v);

// llm.layernorm.fwd's eps, checked (finite, >= 0).
double CheckedLayernormEps(const KernelArgs& args);

// llm.attention's sizes: qkv is [B, S, Q], Y [B, S, C], lse [B, H, S], with H = params.heads >= 1
// dividing C (head size hs = C / H >= 1) and Q = 3C. Reads only the shapes of `qkv` and `y`; the
// kernels then bind every tensor against these sizes.
struct AttentionShape {
  int64_t b = 0, s = 0, c = 0, h = 0, hs = 0, q = 0;
};
AttentionShape CheckedAttentionShape(const KernelArgs& args, const tessel_tensor& qkv, const tessel_tensor& y);

}  // namespace tessel::kernels::llm
