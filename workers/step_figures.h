// What a worker reports of each step beyond its loss: the step's figures (the metrics the runtime sets, the
// executors setting their own as they go, and the row of RUN_DIR/metrics.csv built from the same values),
// and its GPU's tessel_gpu_* through NVML.
// Thread safety: one worker thread. Failure: none; a GPU that cannot be read turns its metrics off, saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/logging.h"
#include "core/record.h"
#include "monitoring/gpu_stats.h"
#include "monitoring/metrics.h"
#include "workers/comm/timed_comm.h"
#include "workers/executor.h"

namespace tessel::workers {

// tessel_gpu_* for the worker's GPU, at most once a second, through NVML. Without a GPU, or without NVIDIA's
// driver library, it is off, and says so once (the rest of the job does not change).
class GpuSampler {
 public:
  GpuSampler(const DeviceContext& device, monitoring::Metrics* metrics, const Logger& log);
  // Reads the GPU's memory and utilisation into the metrics, at most once a second.
  void Sample(const Logger& log);

 private:
  monitoring::Metrics* metrics_;
  std::string label_;
  std::string bus_id_;
  std::unique_ptr<monitoring::GpuStats> nvml_;
  std::chrono::steady_clock::time_point last_{};
};

// One step's figures: the step's metrics that the runtime sets (the executors set their own as they go),
// and the row of RUN_DIR/metrics.csv (monitoring/run_csv.h), built from the same values. `metrics` may be
// null (a test's run): then the row has only the step's own figures.
class StepFigures {
 public:
  explicit StepFigures(monitoring::Metrics* metrics) : metrics_(metrics) {
    if (metrics_ != nullptr) before_ = metrics_->Totals();
  }

  Record Take(const StepResult& r, double seconds, const TimedComm::Waits& waited, int64_t pipeline_sent,
              int64_t pipeline_received, const MemoryUse& memory, int64_t workspace);

 private:
  monitoring::Metrics* metrics_;
  monitoring::MetricTotals before_;
};

}  // namespace tessel::workers
