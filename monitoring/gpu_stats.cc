#include "monitoring/gpu_stats.h"

#include <dlfcn.h>

#include "core/logging.h"

namespace tessel::monitoring {
namespace {

// NVML's C ABI, as its reference manual declares it (nvml.h is not needed to build Tessel).
using NvmlReturn = int;  // nvmlReturn_t: NVML_SUCCESS = 0
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlDevice;                       // nvmlDevice_t is a pointer to this
struct NvmlMemory {                      // nvmlMemory_t
  unsigned long long total, free, used;  // NOLINT(google-runtime-int): NVML's own types
};
struct NvmlUtilization {  // nvmlUtilization_t, percentages of the sample period
  unsigned int gpu, memory;
};

}  // namespace

struct GpuStats::Api {
  void* handle = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*by_bus_id)(const char*, NvmlDevice**) = nullptr;
  NvmlReturn (*memory)(NvmlDevice*, NvmlMemory*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice*, NvmlUtilization*) = nullptr;
  bool initialised = false;

  std::string Error(NvmlReturn r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? StrCat(text, " (NVML error ", r, ")") : StrCat("NVML error ", r);
  }
  ~Api() {
    if (initialised) shutdown();
    if (handle != nullptr) dlclose(handle);
  }
};

namespace {
template <typename F>
bool Bind(void* handle, const char* name, F** fn) {
  *fn = reinterpret_cast<F*>(dlsym(handle, name));
  return *fn != nullptr;
}
}  // namespace

Result<std::unique_ptr<GpuStats>> GpuStats::Open(std::string_view library) {
  auto api = std::make_unique<Api>();
  const std::string path(library);
  api->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* why = dlerror();
    return InternalError(StrCat("NVML is not available: ", why != nullptr ? why : path));
  }
  const std::pair<const char*, bool> bound[] = {
      {"nvmlInit_v2", Bind(api->handle, "nvmlInit_v2", &api->init)},
      {"nvmlShutdown", Bind(api->handle, "nvmlShutdown", &api->shutdown)},
      {"nvmlErrorString", Bind(api->handle, "nvmlErrorString", &api->error_string)},
      {"nvmlDeviceGetHandleByPciBusId_v2", Bind(api->handle, "nvmlDeviceGetHandleByPciBusId_v2", &api->by_bus_id)},
      {"nvmlDeviceGetMemoryInfo", Bind(api->handle, "nvmlDeviceGetMemoryInfo", &api->memory)},
      {"nvmlDeviceGetUtilizationRates", Bind(api->handle, "nvmlDeviceGetUtilizationRates", &api->utilization)},
  };
  for (const auto& [name, ok] : bound) {
    if (!ok) return InternalError(StrCat(path, " lacks ", name, ": not a usable NVML"));
  }
  if (const NvmlReturn r = api->init(); r != kNvmlSuccess) {
    return InternalError(StrCat("NVML did not initialise: ", api->Error(r)));
  }
  api->initialised = true;
  return std::unique_ptr<GpuStats>(new GpuStats(std::move(api)));
}

GpuStats::GpuStats(std::unique_ptr<Api> api) : api_(std::move(api)) {}
GpuStats::~GpuStats() = default;

Result<GpuStats::Sample> GpuStats::Read(const std::string& pci_bus_id) const {
  NvmlDevice* device = nullptr;
  if (const NvmlReturn r = api_->by_bus_id(pci_bus_id.c_str(), &device); r != kNvmlSuccess) {
    return InternalError(StrCat("NVML has no GPU at PCI bus id ", pci_bus_id, ": ", api_->Error(r)));
  }
  NvmlMemory memory{};
  if (const NvmlReturn r = api_->memory(device, &memory); r != kNvmlSuccess) {
    return InternalError(StrCat("NVML memory of the GPU at ", pci_bus_id, ": ", api_->Error(r)));
  }
  NvmlUtilization use{};
  if (const NvmlReturn r = api_->utilization(device, &use); r != kNvmlSuccess) {
    return InternalError(StrCat("NVML utilisation of the GPU at ", pci_bus_id, ": ", api_->Error(r)));
  }
  Sample s;
  s.memory_used_bytes = static_cast<int64_t>(memory.used);
  s.memory_total_bytes = static_cast<int64_t>(memory.total);
  s.utilization = use.gpu / 100.0;
  return s;
}

}  // namespace tessel::monitoring
