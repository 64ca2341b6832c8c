#include "workers/comm/comm.h"

#include <string>

#include "core/allocator.h"
#include "core/logging.h"

namespace tessel::workers {

Status AgreeOn(const Status& mine, WorkerComm& comm) {
  const int n = comm.size();
  if (n == 1) return mine;
  // Each worker's status code in its own slot (0: ok), summed: every worker learns every outcome.
  std::vector<int64_t> codes(static_cast<size_t>(n), 0);
  codes[static_cast<size_t>(comm.rank())] = mine.ok() ? 0 : static_cast<int64_t>(mine.code());
  const Status agreed = comm.AllreduceSum(codes.data(), n);
  if (!mine.ok()) return mine;  // its own cause first, whether or not the others heard of it
  TESSEL_RETURN_IF_ERROR(agreed);
  std::string failed;
  Code code = Code::kOk;
  for (int q = 0; q < n; ++q) {
    if (codes[static_cast<size_t>(q)] == 0) continue;
    if (code == Code::kOk) code = static_cast<Code>(codes[static_cast<size_t>(q)]);
    failed += StrCat(failed.empty() ? "" : ", ", q);
  }
  if (failed.empty()) return Status();
  return Status(code, StrCat("worker ", comm.rank(), " stopped with its peers: worker(s) ", failed,
                             " failed (their own error names the cause)"));
}

Status StagedDeviceComm::AllreduceSum(float* data, int64_t count) {
  if (comm_->size() == 1 || count == 0) return Status();
  staging_.resize(static_cast<size_t>(count));
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  TESSEL_RETURN_IF_ERROR(CopyMemory(staging_.data(), Device::kCpu, data, Device::kCuda, bytes, stream_));
  TESSEL_RETURN_IF_ERROR(comm_->AllreduceSum(staging_.data(), count));
  return CopyMemory(data, Device::kCuda, staging_.data(), Device::kCpu, bytes, stream_);
}

}  // namespace tessel::workers
