#include "workers/llm/stage_link.h"

#include <chrono>

namespace tessel::workers {

Status StageLink::Send(const Tensor& t, int peer, int tag, int64_t* handle) {
  const float* data = t.data<float>();
  if (t.device() != Device::kCpu) {
    std::vector<float>& host = staging_[t.raw()];
    host.resize(static_cast<size_t>(t.numel()));
    TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, t.raw(), t.device(), t.nbytes(), device_.stream));
    data = host.data();
  }
  TESSEL_ASSIGN_OR_RETURN(*handle, comm_.Isend(peer, data, t.numel(), tag));
  return Status();
}

Status StageLink::Recv(Tensor& t, int peer, int tag, double* waited) {
  const auto start = std::chrono::steady_clock::now();
  if (t.device() == Device::kCpu) {
    TESSEL_RETURN_IF_ERROR(comm_.Recv(peer, t.data<float>(), t.numel(), tag, timeout_));
  } else {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    TESSEL_RETURN_IF_ERROR(comm_.Recv(peer, host.data(), t.numel(), tag, timeout_));
    TESSEL_RETURN_IF_ERROR(CopyMemory(t.raw(), t.device(), host.data(), Device::kCpu, t.nbytes(), device_.stream));
  }
  *waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status();
}

}  // namespace tessel::workers
