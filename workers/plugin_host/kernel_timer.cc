#include "workers/plugin_host/kernel_timer.h"

namespace tessel::workers {

void KernelTimer::BeginStep(int64_t step) { active_ = every_ > 0 && (step - 1) % every_ == 0; }

void KernelTimer::AddCpu(const std::string& op, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& [total, calls] = sums_[{op, Device::kCpu}];
  total += seconds;
  ++calls;
}

Result<size_t> KernelTimer::RecordCuda(void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (used_ == events_.size()) {
    TESSEL_ASSIGN_OR_RETURN(CudaEvent event, CudaEvent::Create(/*blocking=*/true, /*timing=*/true));
    events_.push_back(std::move(event));
  }
  TESSEL_RETURN_IF_ERROR(events_[used_].Record(stream));
  return used_++;
}

Result<std::vector<KernelTimer::Sum>> KernelTimer::EndStep() {
  std::vector<Sum> out;
  if (!active_) return out;
  active_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  Status failed;
  for (const Pending& p : pending_) {
    Result<double> seconds = events_[p.end].SecondsSince(events_[p.start]);
    if (!seconds.ok()) {
      failed = seconds.status();
      break;
    }
    auto& [total, calls] = sums_[{p.op, Device::kCuda}];
    total += *seconds;
    ++calls;
  }
  pending_.clear();
  used_ = 0;
  for (const auto& [key, sum] : sums_) out.push_back({key.first, key.second, sum.first, sum.second});
  sums_.clear();
  if (!failed.ok()) return failed.WithContext("timing the sampled step's CUDA kernels");
  return out;
}

}  // namespace tessel::workers
