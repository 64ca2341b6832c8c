// libtessel_llm.so: the GPT-2 ops (token and position embedding, layer norm, causal self-attention),
// loaded like any other plugin. The ops that GPT-2 shares with other models (linear, GELU, softmax
// cross-entropy, AdamW) are in libtessel_nn.so.
#include <tessel/plugin.h>

#include "blas.h"
#include "kernels.h"

#ifndef TESSEL_LLM_VERSION
#define TESSEL_LLM_VERSION "0.0.0"
#endif

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  using namespace tessel::kernels;
  using namespace tessel::kernels::llm;
  UseSingleThreadedBlas();
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "llm";
  info->version = TESSEL_LLM_VERSION;
  info->description =
      "GPT-2 ops: encoder, layer norm, causal self-attention (CPU"
#if TESSEL_LLM_WITH_CUDA
      " and CUDA"
#endif
      ")";
  const KernelRegistration cpu[] = {EncoderFwdCpuKernel(),
                                    EncoderBwdCpuKernel(),
                                    LayernormFwdCpuKernel(),
                                    LayernormBwdCpuKernel(),
                                    LayernormBwdFromOutputCpuKernel(),
                                    AttentionFwdCpuKernel(),
                                    AttentionBwdCpuKernel()};
  if (tessel_status* status = RegisterKernels(host, cpu, TESSEL_DEVICE_CPU, nullptr)) return status;
#if TESSEL_LLM_WITH_CUDA
  const KernelRegistration cuda[] = {EncoderFwdCudaKernel(),
                                     EncoderBwdCudaKernel(),
                                     LayernormFwdCudaKernel(),
                                     LayernormBwdCudaKernel(),
                                     LayernormBwdFromOutputCudaKernel(),
                                     AttentionFwdCudaKernel(),
                                     AttentionBwdCudaKernel()};
  if (tessel_status* status = RegisterKernels(host, cuda, TESSEL_DEVICE_CUDA, CudaState())) return status;
#endif
  return nullptr;
}
