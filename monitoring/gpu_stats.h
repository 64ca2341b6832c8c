// GpuStats: a GPU's memory use and utilisation as the driver reports them, through NVML
// (libnvidia-ml.so.1, loaded with dlopen: a build or a host without NVIDIA's driver has none, and then
// Open says why and nothing else changes). For tessel_gpu_memory_used_bytes, tessel_gpu_memory_total_bytes
// and tessel_gpu_utilization_ratio.
//
//   auto nvml = GpuStats::Open();                        // once per process
//   if (nvml.ok()) auto s = (*nvml)->Read(pci_bus_id);   // the device CUDA calls ordinal N
//
// The device is named by its PCI bus id (CudaPciBusId), not by an index: NVML numbers the GPUs its own
// way, whatever CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER say.
// Ownership: owns the library handle and NVML's initialisation (shut down and closed with the object).
// Thread safety: Read from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessel::monitoring {

class GpuStats {
 public:
  // Loads NVML from `library` and initialises it. Failure (kInternal): the library is not there, lacks a
  // symbol, or NVML does not initialise (no driver); the message says which.
  static Result<std::unique_ptr<GpuStats>> Open(std::string_view library = "libnvidia-ml.so.1");
  ~GpuStats();
  GpuStats(const GpuStats&) = delete;
  GpuStats& operator=(const GpuStats&) = delete;

  struct Sample {
    int64_t memory_used_bytes = 0;  // by every process on the device
    int64_t memory_total_bytes = 0;
    double utilization = 0;  // the fraction of the driver's last sample period a kernel ran, 0..1
  };
  // The device with this PCI bus id ("0000:3b:00.0", as cudaDeviceGetPCIBusId writes it). Failure
  // (kInternal): NVML's reason, naming the bus id.
  Result<Sample> Read(const std::string& pci_bus_id) const;

 private:
  struct Api;
  explicit GpuStats(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace tessel::monitoring
