// MPI plumbing shared by the coordinator and the workers: an RAII communicator, the worker
// communicator, and polling point-to-point helpers that never busy-wait.
// Thread safety: MPI is initialised with MPI_THREAD_MULTIPLE when available (the heartbeat thread
// sends while the training thread runs collectives); see MpiSession::thread_multiple().
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "workers/comm/comm.h"

namespace tessel::workers {

// Owns MPI_Init/MPI_Finalize for the process.
class MpiSession {
 public:
  static Result<std::unique_ptr<MpiSession>> Init(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const { return rank_; }
  int world_size() const { return size_; }
  bool thread_multiple() const { return thread_multiple_; }
  const std::string& hostname() const { return hostname_; }

  // Ends this rank without MPI_Finalize: for a rank whose job the coordinator aborted. MPI_Finalize waits
  // for every rank, and under `mpirun --enable-recovery` a rank gone through MPI_Abort never arrives, so
  // finalizing would hang this rank (and mpirun with it) for good.
  void SkipFinalize() { skip_finalize_ = true; }

 private:
  MpiSession() = default;
  bool skip_finalize_ = false;
  int rank_ = 0;
  int size_ = 1;
  bool thread_multiple_ = false;
  std::string hostname_;
};

// RAII over an MPI_Comm made by MPI_Comm_split/dup.
class UniqueComm {
 public:
  UniqueComm() = default;
  explicit UniqueComm(MPI_Comm comm) : comm_(comm) {}
  ~UniqueComm();
  UniqueComm(UniqueComm&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  UniqueComm& operator=(UniqueComm&& o) noexcept;
  UniqueComm(const UniqueComm&) = delete;
  UniqueComm& operator=(const UniqueComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// The worker communicator: every world rank but the coordinator (rank 0).
class MpiWorkerComm final : public WorkerComm {
 public:
  // Collective over MPI_COMM_WORLD: every rank must call it; the coordinator gets a null comm.
  static Result<std::unique_ptr<MpiWorkerComm>> OverWorkers(bool is_worker);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllreduceSum(float* data, int64_t count) override;
  Status AllreduceSum(double* data, int64_t count) override;
  Status AllreduceSum(int64_t* data, int64_t count) override;
  Status AllToAll(const std::vector<std::vector<int64_t>>& send, std::vector<std::vector<int64_t>>* recv) override;
  Status AllToAllV(const float* send_buf, const std::vector<int64_t>& send_counts,
                   const std::vector<int64_t>& send_offsets, float* recv_buf, const std::vector<int64_t>& recv_counts,
                   const std::vector<int64_t>& recv_offsets) override;
  // MPI_Comm_dup; refused unless MPI runs with MPI_THREAD_MULTIPLE.
  Result<std::unique_ptr<WorkerComm>> Duplicate() override;
  Result<std::unique_ptr<WorkerComm>> Split(int color) override;
  Result<int64_t> Isend(int peer, const float* data, int64_t count, int tag) override;
  Status WaitSend(int64_t handle, double timeout_seconds) override;
  Status Recv(int peer, float* data, int64_t count, int tag, double timeout_seconds) override;
  Status WaitSends(double timeout_seconds) override;
  ~MpiWorkerComm() override;

 private:
  UniqueComm comm_;
  int rank_ = 0;
  int size_ = 1;
  struct Send {
    MPI_Request request;
    int peer, tag;
  };
  std::map<int64_t, Send> sends_;  // Isend's in flight, by handle
  int64_t next_send_ = 0;
};

// Returns "MPI_Xxx failed: <error string>" as kRankFailed when rc != MPI_SUCCESS.
Status MpiCheck(int rc, const char* what);

// `bytes` bytes as (count, datatype) for one MPI call. Up to INT_MAX that is (bytes, MPI_BYTE); past it,
// MPI's int count would overflow, so the message is one element of a derived type: whole pieces of
// 1 GiB and the rest (BigMPI's way). The receiver learns the size from MPI_Get_elements_x, 64-bit.
class ByteSpan {
 public:
  static Result<ByteSpan> Of(size_t bytes);
  ByteSpan(ByteSpan&& o) noexcept : type_(o.type_), count_(o.count_), owned_(std::exchange(o.owned_, false)) {}
  ByteSpan& operator=(ByteSpan&&) = delete;
  ~ByteSpan() {
    if (owned_) MPI_Type_free(&type_);
  }
  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }

 private:
  ByteSpan() = default;
  MPI_Datatype type_ = MPI_BYTE;
  int count_ = 0;
  bool owned_ = false;
};

// Sends bytes to `dest` with `tag` on MPI_COMM_WORLD and waits for completion by polling
// (MPI_Test + backoff sleep) up to `timeout`; then kRankFailed. A send that timed out may still be read
// by MPI later (Open MPI does not cancel sends), so it keeps `bytes` (hence by value: move them in) until
// it completes; each later call drops those that have. Any size: past 2 GiB the bytes go as one message
// of a derived datatype (MPI's counts are int), which TryReceive takes whole.
Status SendBytes(std::vector<uint8_t> bytes, int dest, int tag, std::chrono::duration<double> timeout);

// The sleep between polls: 50 us, doubling to 20 ms, so latency stays low without busy-waiting.
class Backoff {
 public:
  void Wait() {
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    delay_us_ = std::min<int64_t>(delay_us_ * 2, 20000);
  }
  void Reset() { delay_us_ = 50; }

 private:
  int64_t delay_us_ = 50;
};

struct Message {
  int source = -1;
  int tag = -1;
  std::vector<uint8_t> bytes;
};
// Receives the next message from `source` (or MPI_ANY_SOURCE) with `tag` (or MPI_ANY_TAG), polling
// with MPI_Improbe and a backoff sleep. Returns std::nullopt-like empty source (-1) on timeout.
Result<Message> PollMessage(int source, int tag, std::chrono::duration<double> timeout);
// One non-blocking look: returns a message if one is waiting, else source = -1. A message over 1 MiB is
// received with MPI_Imrecv, and `between`, when given, runs between the tests of its progress (a worker
// answers the coordinator's beats there while a multi-GB assignment arrives: a blocking receive would be
// silence the coordinator judges as death).
Result<Message> TryReceive(int source, int tag, const std::function<void()>& between = {});

}  // namespace tessel::workers
