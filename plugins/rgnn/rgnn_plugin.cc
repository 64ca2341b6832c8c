// libtessel_rgnn.so: the built-in relational GNN kernels, loaded like any other plugin. Its only export
// is tessel_plugin_init, which describes the plugin and registers one kernel per (op, device). The ops
// it shares with other model families (activations, loss, Adam, GEMM) live in libtessel_nn.so.
#include <tessel/plugin.h>

#include "blas.h"
#include "kernels.h"

#ifndef TESSEL_RGNN_VERSION
#define TESSEL_RGNN_VERSION "0.0.0"
#endif

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  using namespace tessel::kernels;
  using namespace tessel::kernels::rgnn;
  UseSingleThreadedBlas();
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "rgnn";
  info->version = TESSEL_RGNN_VERSION;
  info->description =
      "Relational GNN kernels: fused RGCN, RGAT and HGT layers over the segment layout, the compact typed "
      "linear/embedding and normalised aggregation, HGT's typed gate, block-diagonal weights (CPU"
#if TESSEL_RGNN_WITH_CUDA
      " and CUDA"
#endif
      ")";
  const KernelRegistration cpu[] = {TypedLinearFwdCpuKernel(), TypedLinearBwdCpuKernel(),   TypedEmbedFwdCpuKernel(),
                                    TypedEmbedBwdCpuKernel(),  AggregateFwdCpuKernel(),     AggregateBwdCpuKernel(),
                                    RgcnFwdCpuKernel(),        RgcnBwdCpuKernel(),          RgcnEmbedFwdCpuKernel(),
                                    RgcnEmbedBwdCpuKernel(),   RgcnEmbedBwdRowsCpuKernel(), RgatFwdCpuKernel(),
                                    RgatBwdCpuKernel(),        RgatEmbedFwdCpuKernel(),     RgatEmbedBwdCpuKernel(),
                                    HgtFwdCpuKernel(),         HgtBwdCpuKernel(),           TypedGateFwdCpuKernel(),
                                    TypedGateBwdCpuKernel(),   BlockDiagFwdCpuKernel(),     BlockDiagBwdCpuKernel()};
  if (tessel_status* status = RegisterKernels(host, cpu, TESSEL_DEVICE_CPU, nullptr)) return status;
#if TESSEL_RGNN_WITH_CUDA
  const KernelRegistration cuda[] = {
      TypedLinearFwdCudaKernel(), TypedLinearBwdCudaKernel(), TypedEmbedFwdCudaKernel(),    TypedEmbedBwdCudaKernel(),
      AggregateFwdCudaKernel(),   AggregateBwdCudaKernel(),   RgcnFwdCudaKernel(),          RgcnBwdCudaKernel(),
      RgcnEmbedFwdCudaKernel(),   RgcnEmbedBwdCudaKernel(),   RgcnEmbedBwdRowsCudaKernel(), RgatFwdCudaKernel(),
      RgatBwdCudaKernel(),        RgatEmbedFwdCudaKernel(),   RgatEmbedBwdCudaKernel(),     HgtFwdCudaKernel(),
      HgtBwdCudaKernel(),         TypedGateFwdCudaKernel(),   TypedGateBwdCudaKernel(),     BlockDiagFwdCudaKernel(),
      BlockDiagBwdCudaKernel()};
  if (tessel_status* status = RegisterKernels(host, cuda, TESSEL_DEVICE_CUDA, CudaState())) return status;
#endif
  return nullptr;
}
