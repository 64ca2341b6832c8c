// NcclComm: the gradient allreduce of GPU workers over NCCL (DESIGN.md "Process model"). Every worker
// makes one, collectively: worker 0 creates the NCCL id and the others receive it over the WorkerComm.
// Built only when NCCL is found (TESSEL_HAVE_NCCL); without it, GPU workers sum through pinned host
// memory over MPI (StagedDeviceComm).
// Thread safety: the training thread. Failure: kRankFailed naming the NCCL error.
#pragma once

#include <memory>

#include "core/status.h"
#include "workers/comm/comm.h"

namespace tessel::workers {

// Collective over `comm`: every worker calls it after selecting its CUDA device. Queues on `stream`.
Result<std::unique_ptr<DeviceComm>> MakeNcclComm(WorkerComm& comm, void* stream);

// Whether this build has NCCL.
bool HaveNccl();

}  // namespace tessel::workers
