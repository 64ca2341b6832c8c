// The GPU half of the gather benchmark: pinned host-to-device bandwidth, and gather.rows end to end in two
// ways, each from the same table of pinned host memory: zero-copy (the CUDA kernel reads the rows through
// the table's device pointer) and staged (the CPU kernel gathers into a pinned buffer, then one
// cudaMemcpyAsync). Without CUDA or without a device it takes no figures and says why.
// Thread safety: one call at a time; it uses the current CUDA device of the calling thread (device 0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::bench {

struct GpuCase {
  int64_t row_bytes = 0;
  int64_t rows = 0;
  // Per repetition, milliseconds end to end (the call until Y is complete on the device).
  std::vector<double> zero_copy_ms, staged_ms;
  std::string error;  // non-empty: this case failed (validation or a CUDA error)
};

struct GpuReport {
  std::string skipped;  // non-empty: why no GPU figures were taken
  std::string device;   // cudaDeviceProp::name
  int64_t h2d_bytes = 0;
  std::vector<double> h2d_gbps;  // per repetition: one cudaMemcpyAsync of h2d_bytes, timed with events
  std::string h2d_error;
  std::vector<GpuCase> cases;
};

struct GpuInputs {
  const workers::KernelRegistry* registry = nullptr;
  ThreadPool* pool = nullptr;
  char* table = nullptr;  // host memory; registered (pinned, mapped) for the duration of the call
  int64_t table_bytes = 0;
  int64_t out_bytes = 0;  // per case: rows = out_bytes / row_bytes
  std::vector<int64_t> row_sizes;
  int repetitions = 5;
  uint64_t seed = 1;
};

GpuReport MeasureGpu(const GpuInputs& in);

}  // namespace tessel::bench
