#include "workers/llm/stage_link.h"

#include <chrono>
#include <cstring>

namespace tessel::workers {
namespace {

// The comm moves floats: a tensor of any dtype travels as its bytes, nbytes / 4 floats (rounded up, the
// last one padded, through a host buffer).
int64_t FloatsOf(const Tensor& t) { return static_cast<int64_t>((t.nbytes() + sizeof(float) - 1) / sizeof(float)); }
bool InPlace(const Tensor& t) { return t.device() == Device::kCpu && t.nbytes() % sizeof(float) == 0; }

}  // namespace

Status StageLink::Send(const Tensor& t, int peer, int tag, int64_t* handle) {
  const auto* data = static_cast<const float*>(t.raw());
  if (!InPlace(t)) {
    std::vector<float>& host = staging_[t.raw()];
    host.assign(static_cast<size_t>(FloatsOf(t)), 0.0f);
    TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, t.raw(), t.device(), t.nbytes(), device_.stream));
    data = host.data();
  }
  TESSEL_ASSIGN_OR_RETURN(*handle, comm_.Isend(peer, data, FloatsOf(t), tag));
  return Status();
}

Status StageLink::Recv(Tensor& t, int peer, int tag, double* waited) {
  const auto start = std::chrono::steady_clock::now();
  if (InPlace(t)) {
    TESSEL_RETURN_IF_ERROR(comm_.Recv(peer, static_cast<float*>(t.raw()), FloatsOf(t), tag, timeout_));
  } else {
    std::vector<float> host(static_cast<size_t>(FloatsOf(t)));
    TESSEL_RETURN_IF_ERROR(comm_.Recv(peer, host.data(), FloatsOf(t), tag, timeout_));
    TESSEL_RETURN_IF_ERROR(CopyMemory(t.raw(), t.device(), host.data(), Device::kCpu, t.nbytes(), device_.stream));
  }
  *waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status();
}

}  // namespace tessel::workers
