#include "workers/step_figures.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "core/cuda_device.h"
#include "core/process_memory.h"
#include "monitoring/run_csv.h"

namespace tessel::workers {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

GpuSampler::GpuSampler(const DeviceContext& device, monitoring::Metrics* metrics, const Logger& log)
    : metrics_(metrics), label_(StrCat("cuda:", device.ordinal)) {
  if (metrics == nullptr || device.device != Device::kCuda) return;
  Result<std::string> bus_id = CudaPciBusId(device.ordinal);
  Result<std::unique_ptr<monitoring::GpuStats>> nvml =
      bus_id.ok() ? monitoring::GpuStats::Open() : Result<std::unique_ptr<monitoring::GpuStats>>(bus_id.status());
  if (!nvml.ok()) {
    log.Info(StrCat("no GPU metrics (tessel_gpu_*) for ", label_, ": ", nvml.status().message()));
    return;
  }
  nvml_ = std::move(nvml).value();
  bus_id_ = std::move(bus_id).value();
  Sample(log);
}

void GpuSampler::Sample(const Logger& log) {
  if (nvml_ == nullptr) return;
  const auto now = Clock::now();
  if (now - last_ < std::chrono::seconds(1)) return;
  last_ = now;
  Result<monitoring::GpuStats::Sample> s = nvml_->Read(bus_id_);
  if (!s.ok()) {
    log.Warn(StrCat("GPU metrics off for ", label_, ": ", s.status().message()));
    nvml_.reset();
    return;
  }
  metrics_->Set("tessel_gpu_memory_used_bytes", static_cast<double>(s->memory_used_bytes), {label_});
  metrics_->Set("tessel_gpu_memory_total_bytes", static_cast<double>(s->memory_total_bytes), {label_});
  metrics_->Set("tessel_gpu_utilization_ratio", s->utilization, {label_});
}

Record StepFigures::Take(const StepResult& r, double seconds, const TimedComm::Waits& waited, int64_t pipeline_sent,
                         int64_t pipeline_received, const MemoryUse& memory, int64_t workspace) {
  const double forward = r.forward_seconds, backward = r.backward_seconds;
  const std::optional<double> val_loss = r.val_loss;
  const int64_t resident = ResidentBytes();
  const double peer_wait_seconds = waited[0] + waited[1] + waited[2];
  Record row;
  Set(row, "unix_seconds", Seconds(std::chrono::system_clock::now().time_since_epoch()).count());
  Set(row, "step_seconds", seconds);
  Set(row, "compute_seconds", std::max(0.0, seconds - peer_wait_seconds));
  Set(row, "peer_wait_seconds", peer_wait_seconds);
  for (size_t k = 0; k < waited.size(); ++k) {
    Set(row, StrCat("wait_", monitoring::kPeerWaitKinds[k], "_seconds"), waited[k]);
  }
  if (forward >= 0) Set(row, "forward_seconds", forward);
  if (backward >= 0) Set(row, "backward_seconds", backward);
  Set(row, "loss", r.loss);
  if (val_loss) Set(row, "val_loss", *val_loss);
  Set(row, "lr", r.lr);
  Set(row, "samples", r.samples);
  Set(row, "resident_bytes", resident);
  const std::pair<std::string_view, int64_t> kinds[] = {
      {"weights", memory.weights},         {"gradients", memory.gradients}, {"optimizer", memory.optimizer},
      {"activations", memory.activations}, {"workspace", workspace},        {"graph", memory.graph}};
  for (const auto& [kind, bytes] : kinds) {
    if (bytes < 0) continue;
    Set(row, StrCat("memory_", kind, "_bytes"), bytes);
    if (metrics_ != nullptr) metrics_->Set("tessel_memory_bytes", static_cast<double>(bytes), {kind});
  }
  if (metrics_ == nullptr) return row;
  metrics_->Observe("tessel_forward_duration_seconds", forward);
  metrics_->Observe("tessel_backward_duration_seconds", backward);
  metrics_->Add("tessel_samples_total", static_cast<double>(r.samples), {r.samples_kind});
  metrics_->Set("tessel_learning_rate", r.lr);
  if (val_loss) metrics_->Set("tessel_validation_loss", *val_loss);
  for (size_t k = 0; k < waited.size(); ++k) {
    metrics_->Add("tessel_peer_wait_seconds_total", waited[k], {monitoring::kPeerWaitKinds[k]});
  }
  metrics_->Add("tessel_pipeline_bytes_total", static_cast<double>(pipeline_sent), {"sent"});
  metrics_->Add("tessel_pipeline_bytes_total", static_cast<double>(pipeline_received), {"received"});
  metrics_->Set("tessel_resident_memory_bytes", static_cast<double>(resident));
  const monitoring::MetricTotals now = metrics_->Totals();
  Set(row, "gather_local_bytes", now.gather_local_bytes - before_.gather_local_bytes);
  Set(row, "gather_remote_bytes", now.gather_remote_bytes - before_.gather_remote_bytes);
  Set(row, "halo_sent_bytes", now.halo_sent_bytes - before_.halo_sent_bytes);
  Set(row, "halo_received_bytes", now.halo_received_bytes - before_.halo_received_bytes);
  Set(row, "pipeline_sent_bytes", now.pipeline_sent_bytes - before_.pipeline_sent_bytes);
  Set(row, "pipeline_received_bytes", now.pipeline_received_bytes - before_.pipeline_received_bytes);
  Set(row, "spill_written_bytes", now.spill_written_bytes - before_.spill_written_bytes);
  Set(row, "spill_read_bytes", now.spill_read_bytes - before_.spill_read_bytes);
  Set(row, "spill_wait_seconds", now.spill_wait_seconds - before_.spill_wait_seconds);
  Set(row, "activation_bytes", now.activation_resident_bytes);
  before_ = now;
  return row;
}

}  // namespace tessel::workers
