// A stand-in for NVIDIA's libnvidia-ml.so.1, for GpuStats's tests on machines without a GPU: the NVML
// entry points GpuStats binds, with NVML's C signatures, reporting one GPU at PCI bus id 0000:3b:00.0.
// FAKE_NVML_VARIANT: 0 a working driver; 1 no driver loaded (nvmlInit_v2 fails); 2 an NVML without
// nvmlDeviceGetUtilizationRates.
#include <cstring>

extern "C" {
struct nvmlDevice_st {
  int unused;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;  // NOLINT(google-runtime-int)
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};

static nvmlDevice_st the_gpu{0};
static int initialised = 0;

__attribute__((visibility("default"))) int nvmlInit_v2() {
  if (FAKE_NVML_VARIANT == 1) return 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  ++initialised;
  return 0;
}
__attribute__((visibility("default"))) int nvmlShutdown() {
  --initialised;
  return 0;
}
__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
  switch (r) {
    case 6:
      return "Not Found";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                                            nvmlDevice_st** device) {
  if (initialised <= 0) return 1;                          // NVML_ERROR_UNINITIALIZED
  if (std::strcmp(bus_id, "0000:3b:00.0") != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = &the_gpu;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(nvmlDevice_st* device, nvmlMemory_t* memory) {
  if (device != &the_gpu) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  memory->total = 80ULL << 30;
  memory->used = 3ULL << 30;
  memory->free = memory->total - memory->used;
  return 0;
}
#if FAKE_NVML_VARIANT != 2
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(nvmlDevice_st* device,
                                                                         nvmlUtilization_t* use) {
  if (device != &the_gpu) return 2;
  use->gpu = 37;
  use->memory = 12;
  return 0;
}
#endif
}
