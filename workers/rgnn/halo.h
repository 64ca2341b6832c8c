// HaloExchange: moves layer activations of halo rows from their owners (forward) and the
// gradients of halo rows back to their owners (backward). Built once per job from the partition's
// range book: halo rows are sorted by new id, so each peer's rows form one contiguous block.
// Thread safety: the training thread only. Failure: comm errors (kRankFailed); a peer asking for a
// row it does not own is kBadData.
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
  // grad_full: [num_rows, dim]; adds the halo rows' gradients into their owners' rows, in peer order.
  Status Backward(float* grad_full, int64_t dim);

  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  WorkerComm* comm_ = nullptr;
  int64_t num_owned_ = 0;
  std::vector<std::vector<int64_t>> serve_rows_;  // per peer: my owned rows it needs
  std::vector<int64_t> halo_begin_, halo_count_;  // per peer: its block of my halo rows
  std::vector<float> buffer_;                     // the served rows: sent forward, received backward
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace tessel::workers
