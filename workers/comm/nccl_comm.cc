#include "workers/comm/nccl_comm.h"

#include <cstring>

#include "core/activity.h"
#include "core/logging.h"

#ifdef TESSEL_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace tessel::workers {

#ifdef TESSEL_HAVE_NCCL
namespace {

Status NcclCheck(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return Status();
  return RankFailedError(StrCat(what, " failed: ", ncclGetErrorString(rc)));
}

class NcclComm final : public DeviceComm {
 public:
  NcclComm(ncclComm_t comm, void* stream) : comm_(comm), stream_(stream) {}
  ~NcclComm() override { ncclCommDestroy(comm_); }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  Status AllreduceSum(float* data, int64_t count) override {
    if (count == 0) return Status();
    auto stream = static_cast<cudaStream_t>(stream_);
    TESSEL_RETURN_IF_ERROR(NcclCheck(
        ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat, ncclSum, comm_, stream), "ncclAllReduce"));
    const activity::StreamWaitScope wait(StrCat("an NCCL allreduce of ", count, " floats"));  // for a hang's report
    const cudaError_t err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) return RankFailedError(StrCat("ncclAllReduce: ", cudaGetErrorString(err)));
    return Status();
  }

 private:
  ncclComm_t comm_;
  void* stream_;
};

}  // namespace

bool HaveNccl() { return true; }

Result<std::unique_ptr<DeviceComm>> MakeNcclComm(WorkerComm& comm, void* stream) {
  // Worker 0's id reaches the others through an integer sum to which they add zeros.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (comm.rank() == 0) TESSEL_RETURN_IF_ERROR(NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
  int64_t words[sizeof(ncclUniqueId) / sizeof(int64_t)];
  std::memcpy(words, &id, sizeof id);
  TESSEL_RETURN_IF_ERROR(comm.AllreduceSum(words, static_cast<int64_t>(sizeof(words) / sizeof(words[0]))));
  std::memcpy(&id, words, sizeof id);
  ncclComm_t nccl = nullptr;
  TESSEL_RETURN_IF_ERROR(NcclCheck(ncclCommInitRank(&nccl, comm.size(), id, comm.rank()), "ncclCommInitRank"));
  return std::unique_ptr<DeviceComm>(std::make_unique<NcclComm>(nccl, stream));
}
#else
bool HaveNccl() { return false; }

Result<std::unique_ptr<DeviceComm>> MakeNcclComm(WorkerComm&, void*) {
  return InternalError("this Tessel was built without NCCL");
}
#endif

}  // namespace tessel::workers
