// libtessel_gather.so: the feature gathers (<tessel/ops/gather.h>), loaded like any other plugin. Its only
// export is tessel_plugin_init, which describes the plugin and registers one kernel per (op, device).
#include <tessel/plugin.h>

#include "kernels.h"

#ifndef TESSEL_GATHER_VERSION
#define TESSEL_GATHER_VERSION "0.0.0"
#endif

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  using namespace tessel::kernels;
  using namespace tessel::kernels::gather;
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "gather";
  info->version = TESSEL_GATHER_VERSION;
  info->description =
      "Feature gathers: rows of a mapped or pinned host table copied in place into a batch (CPU: prefetched, "
      "streaming stores"
#if TESSEL_GATHER_WITH_CUDA
      "; CUDA: zero-copy reads of pinned host rows, one warp per row"
#endif
      ")";
  const KernelRegistration cpu[] = {GatherRowsCpuKernel()};
  if (tessel_status* status = RegisterKernels(host, cpu, TESSEL_DEVICE_CPU, nullptr)) return status;
#if TESSEL_GATHER_WITH_CUDA
  const KernelRegistration cuda[] = {GatherRowsCudaKernel()};
  if (tessel_status* status = RegisterKernels(host, cuda, TESSEL_DEVICE_CUDA, CudaState())) return status;
#endif
  return nullptr;
}
