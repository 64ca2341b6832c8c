// HaloExchange: moves layer activations of halo rows from their owners (forward) and the
// gradients of halo rows back to their owners (backward). Built once per job from the partition's
// range book: halo rows are sorted by new id, so each peer's rows form one contiguous block. The rows move
// one peer at a time (n - 1 rounds, each worker sending to one peer and receiving from another), so the
// exchange's own memory is the rows served to one peer.
// Thread safety: the training thread only. Failure: comm errors (kRankFailed); a halo row without a
// valid owner, or a peer asking for a row it does not own, is kBadData; Build is collective and every
// worker returns an error when one part is bad (AgreeOn), none waits in the exchange.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "storage/partition.h"
#include "workers/comm/comm.h"

namespace tessel::workers {

class HaloExchange {
 public:
  static Result<HaloExchange> Build(const storage::WorkerPartition& p, WorkerComm& comm);

  // full: [num_rows, dim]; fills rows [num_owned, num_rows) from the owners.
  Status Forward(float* full, int64_t dim);
  // grad_full: [num_rows, dim]; adds the halo rows' gradients into their owners' rows, the peers' in the
  // order of the rounds (worker me + 1's first); the order is fixed by the rank count alone.
  Status Backward(float* grad_full, int64_t dim);

  // The same rounds one at a time, for a worker that keeps no halo rows (train.halo = "streamed"): round k
  // (1 <= k < rounds()) sends this worker's rows of `owned` that worker me + k reads, and receives the block
  // of worker me - k's rows into `block` ([BlockRows(k), dim]).
  int rounds() const { return comm_->size() - 1; }
  int BlockOwner(int k) const;  // me - k: whose rows round k brings
  int64_t BlockRows(int k) const { return halo_count_[static_cast<size_t>(BlockOwner(k))]; }
  int64_t BlockBegin(int k) const { return num_owned_ + halo_begin_[static_cast<size_t>(BlockOwner(k))]; }
  Status ForwardRound(int k, const float* owned, float* block, int64_t dim);
  // The reverse of ForwardRound: sends `dblock` (the gradients of round k's block) back to its owner and
  // adds the gradients worker me + k sends for this worker's rows into `grad_owned`.
  Status BackwardRound(int k, const float* dblock, float* grad_owned, int64_t dim);

  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  // One round: `send_rows` rows of `send` to worker `to`, `recv_rows` rows from `from` into `recv` (rows of
  // `dim` floats).
  Status Round(int to, int64_t send_rows, const float* send, int from, int64_t recv_rows, float* recv, int64_t dim);

  WorkerComm* comm_ = nullptr;
  int64_t num_owned_ = 0;
  std::vector<std::vector<int32_t>> serve_rows_;  // per peer: my owned rows it needs (local, < 2^31)
  std::vector<int64_t> halo_begin_, halo_count_;  // per peer: its block of my halo rows
  std::vector<float> buffer_;                     // one peer's served rows: sent forward, received backward
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace tessel::workers
