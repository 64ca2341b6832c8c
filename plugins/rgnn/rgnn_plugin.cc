// libtessel_rgnn.so: the built-in RGNN kernels, loaded like any other plugin. Its only export is
// tessel_plugin_init, which describes the plugin and registers one kernel per (op, device).
#include <tessel/plugin.h>

#include "cpu_kernels.h"
#include "rgnn_ops.h"
#if TESSEL_RGNN_WITH_CUDA
#include "cuda_kernels.h"
#endif

#ifndef TESSEL_RGNN_VERSION
#define TESSEL_RGNN_VERSION "0.0.0"
#endif

namespace tessel::rgnn {
namespace {

struct KernelEntry {
  OpSchema op;
  tessel_kernel_fn fn;
};

constexpr KernelEntry kCpuKernels[] = {
    {kTypedLinearFwd, &TypedLinearFwdCpu},
    {kTypedLinearBwd, &TypedLinearBwdCpu},
    {kTypedEmbedFwd, &TypedEmbedFwdCpu},
    {kTypedEmbedBwd, &TypedEmbedBwdCpu},
    {kAggregateFwd, &AggregateFwdCpu},
    {kAggregateBwd, &AggregateBwdCpu},
    {kReluFwd, &ReluFwdCpu},
    {kReluBwd, &ReluBwdCpu},
    {kSoftmaxXent, &SoftmaxXentCpu},
    {kAdamStep, &AdamStepCpu},
};

#if TESSEL_RGNN_WITH_CUDA
constexpr KernelEntry kCudaKernels[] = {
    {kTypedLinearFwd, &TypedLinearFwdCuda},
    {kTypedLinearBwd, &TypedLinearBwdCuda},
    {kTypedEmbedFwd, &TypedEmbedFwdCuda},
    {kTypedEmbedBwd, &TypedEmbedBwdCuda},
    {kAggregateFwd, &AggregateFwdCuda},
    {kAggregateBwd, &AggregateBwdCuda},
    {kReluFwd, &ReluFwdCuda},
    {kReluBwd, &ReluBwdCuda},
    {kSoftmaxXent, &SoftmaxXentCuda},
    {kAdamStep, &AdamStepCuda},
};
#endif

template <size_t N>
tessel_status* RegisterAll(const tessel_host_api* host, const KernelEntry (&entries)[N], int32_t device, void* state) {
  for (const KernelEntry& entry : entries) {
    tessel_kernel_def def{};
    def.struct_size = sizeof(def);
    def.op = entry.op.op;
    def.device = device;
    def.schema = entry.op.schema;
    def.fn = entry.fn;
    def.kernel_state = state;
    if (tessel_status* status = host->register_kernel(host->registry, &def)) return status;
  }
  return nullptr;
}

}  // namespace
}  // namespace tessel::rgnn

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  using namespace tessel::rgnn;
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "rgnn";
  info->version = TESSEL_RGNN_VERSION;
  info->description =
      "RGCN kernels: typed linear/embedding, normalised aggregation, ReLU, softmax cross-entropy, "
      "Adam (CPU"
#if TESSEL_RGNN_WITH_CUDA
      " and CUDA"
#endif
      ")";
  if (tessel_status* status = RegisterAll(host, kCpuKernels, TESSEL_DEVICE_CPU, nullptr)) return status;
#if TESSEL_RGNN_WITH_CUDA
  if (tessel_status* status = RegisterAll(host, kCudaKernels, TESSEL_DEVICE_CUDA, CudaState())) return status;
#endif
  return nullptr;
}
