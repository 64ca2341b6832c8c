// libtessel_rgnn.so: the built-in relational GNN kernels, loaded like any other plugin. Its only export
// is tessel_plugin_init, which describes the plugin and registers one kernel per (op, device). The ops
// it shares with other model families (activations, loss, Adam, GEMM) live in libtessel_nn.so.
#include <tessel/plugin.h>

#include "kernels.h"

#ifndef TESSEL_RGNN_VERSION
#define TESSEL_RGNN_VERSION "0.0.0"
#endif

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  using namespace tessel::kernels;
  using namespace tessel::kernels::rgnn;
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "rgnn";
  info->version = TESSEL_RGNN_VERSION;
  info->description =
      "Relational GNN kernels: typed linear/embedding over unique (relation, source) pairs, normalised "
      "aggregation (CPU"
#if TESSEL_RGNN_WITH_CUDA
      " and CUDA"
#endif
      ")";
  const KernelRegistration cpu[] = {TypedLinearFwdCpuKernel(), TypedLinearBwdCpuKernel(), TypedEmbedFwdCpuKernel(),
                                    TypedEmbedBwdCpuKernel(),  AggregateFwdCpuKernel(),   AggregateBwdCpuKernel()};
  if (tessel_status* status = RegisterKernels(host, cpu, TESSEL_DEVICE_CPU, nullptr)) return status;
#if TESSEL_RGNN_WITH_CUDA
  const KernelRegistration cuda[] = {TypedLinearFwdCudaKernel(), TypedLinearBwdCudaKernel(), TypedEmbedFwdCudaKernel(),
                                     TypedEmbedBwdCudaKernel(),  AggregateFwdCudaKernel(),   AggregateBwdCudaKernel()};
  if (tessel_status* status = RegisterKernels(host, cuda, TESSEL_DEVICE_CUDA, CudaState())) return status;
#endif
  return nullptr;
}
