// A WorkerComm that counts the time its caller spends blocked in communication (every collective, Recv and
// the send waits), for tessel_peer_wait_seconds_total and the compute time that tells a straggler apart
// (monitoring/straggler.h), and the bytes of its point-to-point messages (pipeline stages' activations and
// gradients: tessel_pipeline_bytes_total). It wraps the worker's communicator; Split() wraps the split too, sharing the
// count. Duplicate() returns the inner duplicate unwrapped: it serves a second thread (the sampled batches'
// prefetch), whose waits overlap the training and are not the training thread's.
//
// Thread safety: the training thread, as WorkerComm. Failure: the inner communicator's.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "workers/comm/comm.h"

namespace tessel::workers {

class TimedComm final : public WorkerComm {
 public:
  explicit TimedComm(WorkerComm& inner) : inner_(inner), counts_(std::make_shared<Counts>()) {}

  // Seconds blocked so far, this communicator and its splits together, by what in: indexed as
  // monitoring::kPeerWaitKinds (allreduce, alltoall, p2p).
  using Waits = std::array<double, 3>;
  const Waits& waits() const { return counts_->seconds; }
  double wait_seconds() const { return counts_->seconds[0] + counts_->seconds[1] + counts_->seconds[2]; }
  // Point-to-point bytes sent (Isend) and received (Recv) so far.
  int64_t p2p_sent_bytes() const { return counts_->sent_bytes; }
  int64_t p2p_received_bytes() const { return counts_->received_bytes; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status AllreduceSum(float* data, int64_t count) override {
    return Timed(kAllreduce, [&] { return inner_.AllreduceSum(data, count); });
  }
  Status AllreduceSum(double* data, int64_t count) override {
    return Timed(kAllreduce, [&] { return inner_.AllreduceSum(data, count); });
  }
  Status AllreduceSum(int64_t* data, int64_t count) override {
    return Timed(kAllreduce, [&] { return inner_.AllreduceSum(data, count); });
  }
  Status AllToAll(const std::vector<std::vector<int64_t>>& send, std::vector<std::vector<int64_t>>* recv) override {
    return Timed(kAllToAll, [&] { return inner_.AllToAll(send, recv); });
  }
  Status AllToAllV(const float* send_buf, const std::vector<int64_t>& send_counts,
                   const std::vector<int64_t>& send_offsets, float* recv_buf, const std::vector<int64_t>& recv_counts,
                   const std::vector<int64_t>& recv_offsets) override {
    return Timed(kAllToAll, [&] {
      return inner_.AllToAllV(send_buf, send_counts, send_offsets, recv_buf, recv_counts, recv_offsets);
    });
  }
  Result<std::unique_ptr<WorkerComm>> Duplicate() override { return inner_.Duplicate(); }
  Result<std::unique_ptr<WorkerComm>> Split(int color) override {
    TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<WorkerComm> split, inner_.Split(color));
    return std::unique_ptr<WorkerComm>(new TimedComm(std::move(split), counts_));
  }
  Result<int64_t> Isend(int peer, const float* data, int64_t count, int tag) override {
    Result<int64_t> handle = inner_.Isend(peer, data, count, tag);
    if (handle.ok()) counts_->sent_bytes += count * static_cast<int64_t>(sizeof(float));
    return handle;
  }
  Status WaitSend(int64_t handle, double timeout_seconds) override {
    return Timed(kP2p, [&] { return inner_.WaitSend(handle, timeout_seconds); });
  }
  Status Recv(int peer, float* data, int64_t count, int tag, double timeout_seconds) override {
    Status st = Timed(kP2p, [&] { return inner_.Recv(peer, data, count, tag, timeout_seconds); });
    if (st.ok()) counts_->received_bytes += count * static_cast<int64_t>(sizeof(float));
    return st;
  }
  Status WaitSends(double timeout_seconds) override {
    return Timed(kP2p, [&] { return inner_.WaitSends(timeout_seconds); });
  }

 private:
  enum Kind : size_t { kAllreduce = 0, kAllToAll = 1, kP2p = 2 };  // kPeerWaitKinds' order
  struct Counts {
    Waits seconds{};
    int64_t sent_bytes = 0, received_bytes = 0;
  };
  TimedComm(std::unique_ptr<WorkerComm> owned, std::shared_ptr<Counts> counts)
      : owned_(std::move(owned)), inner_(*owned_), counts_(std::move(counts)) {}

  template <typename F>
  Status Timed(Kind kind, F&& call) {
    const auto start = std::chrono::steady_clock::now();
    Status st = call();
    counts_->seconds[kind] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return st;
  }

  std::unique_ptr<WorkerComm> owned_;  // a split's communicator; null for the wrapped original
  WorkerComm& inner_;
  std::shared_ptr<Counts> counts_;
};

}  // namespace tessel::workers
