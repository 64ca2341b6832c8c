// KernelTimer: the time of every kernel call on sampled steps, by op and device, for
// tessel_kernel_seconds_total and tessel_kernel_calls_total. Sampling keeps the hot path cheap: on other
// steps a call pays one branch. A CPU call is timed by the host clock around it; a CUDA call by two timed
// events on its stream around it (its GPU time, not the launch's), read once the step ends.
//
//   KernelTimer timer(10);                  // steps 1, 11, 21, ...
//   timer.BeginStep(step);                  // CallOptions::timer = &timer for every Kernel::Call
//   ... the step's kernel calls ...
//   TESSEL_ASSIGN_OR_RETURN(auto sums, timer.EndStep());  // empty unless the step was sampled
//
// Ownership: owns its CUDA events, reused from one sampled step to the next. Thread safety: Begin/EndStep
// on one thread; Time may run on any thread between them (CPU calls of a thread pool's tasks, say).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_device.h"
#include "core/status.h"
#include "core/tensor.h"

namespace tessel::workers {

class KernelTimer {
 public:
  // `sample_every`: time steps 1, 1 + n, 1 + 2n, ...; 0 = never.
  explicit KernelTimer(int64_t sample_every) : every_(sample_every) {}
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  void BeginStep(int64_t step);
  bool active() const { return active_; }

  // Runs `call` (a Status()), timing it when the step is sampled. `stream`: the CUDA stream a CUDA kernel
  // queues on (null: the default stream). A call that fails is not counted.
  template <typename F>
  Status Time(const std::string& op, Device device, void* stream, F&& call) {
    if (!active_) return call();
    if (device == Device::kCuda) {
      TESSEL_ASSIGN_OR_RETURN(const size_t start, RecordCuda(stream));
      Status st = call();
      if (!st.ok()) return st;
      TESSEL_ASSIGN_OR_RETURN(const size_t end, RecordCuda(stream));
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back({op, start, end});
      return st;
    }
    const auto begin = std::chrono::steady_clock::now();
    Status st = call();
    if (st.ok()) AddCpu(op, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    return st;
  }

  struct Sum {
    std::string op;
    Device device = Device::kCpu;
    double seconds = 0;
    int64_t calls = 0;
  };
  // Ends the step: waits for its CUDA events and returns the step's sums, by op and device (empty when the
  // step was not sampled). Failure: kInternal with CUDA's reason.
  Result<std::vector<Sum>> EndStep();

 private:
  struct Pending {
    std::string op;
    size_t start, end;  // indexes into events_
  };
  void AddCpu(const std::string& op, double seconds);
  Result<size_t> RecordCuda(void* stream);

  const int64_t every_;
  bool active_ = false;
  std::mutex mu_;
  std::map<std::pair<std::string, Device>, std::pair<double, int64_t>> sums_;
  std::vector<CudaEvent> events_;  // a pool: the first used_ are recorded this step
  size_t used_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace tessel::workers
