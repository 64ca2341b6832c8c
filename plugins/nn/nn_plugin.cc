// libtessel_nn.so: the ops shared by every model family (activations, loss, GEMM, optimisers), loaded
// like any other plugin, so that model plugins never register the same (op, device).
#include <tessel/plugin.h>

#include "blas.h"
#include "kernels.h"

#ifndef TESSEL_NN_VERSION
#define TESSEL_NN_VERSION "0.0.0"
#endif

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  using namespace tessel::kernels;
  using namespace tessel::kernels::nn;
  UseSingleThreadedBlas();
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "nn";
  info->version = TESSEL_NN_VERSION;
  info->description =
      "Shared ops: ReLU, GELU, softmax cross-entropy, GEMM, linear (and linear + GELU), add, sum of squares, "
      "cast, embedding, "
      "Adam, AdamW (CPU"
#if TESSEL_NN_WITH_CUDA
      " and CUDA"
#endif
      ")";
  const KernelRegistration cpu[] = {ReluFwdCpuKernel(),          ReluBwdCpuKernel(),      GeluFwdCpuKernel(),
                                    GeluBwdCpuKernel(),          SoftmaxXentCpuKernel(),  GemmCpuKernel(),
                                    AdamStepCpuKernel(),         EmbeddingFwdCpuKernel(), EmbeddingBwdCpuKernel(),
                                    AdamStepRowsCpuKernel(),     LinearFwdCpuKernel(),    LinearBwdCpuKernel(),
                                    GeluTanhFwdCpuKernel(),      GeluTanhBwdCpuKernel(),  AddCpuKernel(),
                                    SumSquaresCpuKernel(),       AdamwStepCpuKernel(),    CastCpuKernel(),
                                    LinearGeluTanhFwdCpuKernel()};
  if (tessel_status* status = RegisterKernels(host, cpu, TESSEL_DEVICE_CPU, nullptr)) return status;
#if TESSEL_NN_WITH_CUDA
  const KernelRegistration cuda[] = {ReluFwdCudaKernel(),          ReluBwdCudaKernel(),      GeluFwdCudaKernel(),
                                     GeluBwdCudaKernel(),          SoftmaxXentCudaKernel(),  GemmCudaKernel(),
                                     AdamStepCudaKernel(),         EmbeddingFwdCudaKernel(), EmbeddingBwdCudaKernel(),
                                     AdamStepRowsCudaKernel(),     LinearFwdCudaKernel(),    LinearBwdCudaKernel(),
                                     GeluTanhFwdCudaKernel(),      GeluTanhBwdCudaKernel(),  AddCudaKernel(),
                                     SumSquaresCudaKernel(),       AdamwStepCudaKernel(),    CastCudaKernel(),
                                     LinearGeluTanhFwdCudaKernel()};
  if (tessel_status* status = RegisterKernels(host, cuda, TESSEL_DEVICE_CUDA, CudaState())) return status;
#endif
  return nullptr;
}
