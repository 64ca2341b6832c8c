#include "workers/comm/comm.h"

#include "core/allocator.h"

namespace tessel::workers {

Status StagedDeviceComm::AllreduceSum(float* data, int64_t count) {
  if (comm_->size() == 1 || count == 0) return Status();
  staging_.resize(static_cast<size_t>(count));
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  TESSEL_RETURN_IF_ERROR(CopyMemory(staging_.data(), Device::kCpu, data, Device::kCuda, bytes, stream_));
  TESSEL_RETURN_IF_ERROR(comm_->AllreduceSum(staging_.data(), count));
  return CopyMemory(data, Device::kCuda, staging_.data(), Device::kCpu, bytes, stream_);
}

}  // namespace tessel::workers
