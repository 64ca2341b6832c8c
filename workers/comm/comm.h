// WorkerComm: the collectives that workers of one job run among themselves (never with the
// coordinator). The MPI implementation runs over a communicator holding only the workers; the
// embedded single-worker run uses LocalComm, where every collective is the identity.
// Thread safety: one thread per communicator (the worker's training thread).
// Failure: MPI errors come back as kRankFailed naming the operation and the MPI error string.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"

namespace tessel::workers {

class WorkerComm {
 public:
  virtual ~WorkerComm() = default;
  virtual int rank() const = 0;  // 0-based index among the workers
  virtual int size() const = 0;

  // In-place elementwise sum over all workers. Deterministic for a fixed worker count.
  virtual Status AllreduceSum(float* data, int64_t count) = 0;
  virtual Status AllreduceSum(double* data, int64_t count) = 0;
  virtual Status AllreduceSum(int64_t* data, int64_t count) = 0;

  // Personalised exchange: send[p] goes to worker p, recv[p] is resized to what p sent.
  virtual Status AllToAll(const std::vector<std::vector<int64_t>>& send, std::vector<std::vector<int64_t>>* recv) = 0;
  // Float exchange with sizes known to both sides: send_counts[p] floats from send_buf at
  // send_offsets[p] go to p; recv_counts[p] floats from p land at recv_buf + recv_offsets[p].
  virtual Status AllToAllV(const float* send_buf, const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& send_offsets, float* recv_buf,
                           const std::vector<int64_t>& recv_counts, const std::vector<int64_t>& recv_offsets) = 0;
  // A communicator over the same workers that a second thread may use while this one is in use (its
  // collectives never match this one's). Collective: every worker calls it. kUnavailable-style
  // kInternal when the implementation cannot (MPI without MPI_THREAD_MULTIPLE).
  virtual Result<std::unique_ptr<WorkerComm>> Duplicate() {
    return InternalError("this communicator cannot be duplicated for a second thread");
  }
  // The workers that pass the same `color`, ranked by their rank here (MPI_Comm_split): a pipeline stage's
  // data-parallel group. Collective: every worker calls it.
  virtual Result<std::unique_ptr<WorkerComm>> Split(int color) {
    (void)color;
    return InternalError("this communicator cannot be split");
  }

  // Point-to-point, for pipeline stages. Isend starts sending `count` floats to worker `peer` and returns
  // a handle; the buffer must stay unchanged until WaitSend(handle) (or WaitSends()) returns. Messages
  // with the same (peer, tag) arrive in the order they were sent. Recv waits, polling with a backoff sleep
  // (never spinning, so a waiting stage leaves the cores to the others), at most `timeout_seconds`; then
  // kRankFailed naming the peer.
  virtual Result<int64_t> Isend(int peer, const float* data, int64_t count, int tag) {
    (void)peer, (void)data, (void)count, (void)tag;
    return InternalError("this communicator has no point-to-point messages");
  }
  // Waits for one Isend (a handle already waited for, or -1, returns at once).
  virtual Status WaitSend(int64_t handle, double timeout_seconds) {
    (void)handle, (void)timeout_seconds;
    return Status();
  }
  virtual Status Recv(int peer, float* data, int64_t count, int tag, double timeout_seconds) {
    (void)peer, (void)data, (void)count, (void)tag, (void)timeout_seconds;
    return InternalError("this communicator has no point-to-point messages");
  }
  // Waits until every Isend has completed (at most `timeout_seconds`).
  virtual Status WaitSends(double timeout_seconds) {
    (void)timeout_seconds;
    return Status();
  }
};

// Sums buffers that live on an executor's device across the workers: MPI (through the WorkerComm) for
// CPU workers, NCCL for GPU workers (nccl_comm.h), or MPI over a pinned host copy for GPU workers of a
// build without NCCL. Thread safety: the training thread. Failure: kRankFailed or kInternal.
class DeviceComm {
 public:
  virtual ~DeviceComm() = default;
  // In-place elementwise sum of `count` floats at `data` (device memory on a GPU worker).
  virtual Status AllreduceSum(float* data, int64_t count) = 0;
};

// One worker: collectives are identities.
class LocalComm final : public WorkerComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllreduceSum(float*, int64_t) override { return Status(); }
  Status AllreduceSum(double*, int64_t) override { return Status(); }
  Status AllreduceSum(int64_t*, int64_t) override { return Status(); }
  Status AllToAll(const std::vector<std::vector<int64_t>>& send, std::vector<std::vector<int64_t>>* recv) override {
    *recv = send;
    return Status();
  }
  Status AllToAllV(const float* send_buf, const std::vector<int64_t>& send_counts,
                   const std::vector<int64_t>& send_offsets, float* recv_buf, const std::vector<int64_t>&,
                   const std::vector<int64_t>& recv_offsets) override {
    for (int64_t i = 0; i < send_counts[0]; ++i) recv_buf[recv_offsets[0] + i] = send_buf[send_offsets[0] + i];
    return Status();
  }
  Result<std::unique_ptr<WorkerComm>> Duplicate() override { return std::unique_ptr<WorkerComm>(new LocalComm()); }
  Result<std::unique_ptr<WorkerComm>> Split(int) override { return std::unique_ptr<WorkerComm>(new LocalComm()); }
};

}  // namespace tessel::workers

namespace tessel::workers {

// Collective: every worker passes its own outcome of a local step that comes before a collective. A worker
// whose step failed gets its own error back; the others get one of the same code naming the workers that
// failed. So no worker goes on into a collective that a failed peer will never join (which would wait
// until the coordinator ends the job). kRankFailed when the agreement itself fails.
Status AgreeOn(const Status& mine, WorkerComm& comm);

// Host memory: the WorkerComm's allreduce.
class HostDeviceComm final : public DeviceComm {
 public:
  explicit HostDeviceComm(WorkerComm& comm) : comm_(&comm) {}
  Status AllreduceSum(float* data, int64_t count) override { return comm_->AllreduceSum(data, count); }

 private:
  WorkerComm* comm_;
};

// Device memory without NCCL: copied to a pinned host buffer, summed over MPI, copied back.
class StagedDeviceComm final : public DeviceComm {
 public:
  StagedDeviceComm(WorkerComm& comm, void* stream) : comm_(&comm), stream_(stream) {}
  Status AllreduceSum(float* data, int64_t count) override;

 private:
  WorkerComm* comm_;
  void* stream_;
  std::vector<float> staging_;
};

}  // namespace tessel::workers
