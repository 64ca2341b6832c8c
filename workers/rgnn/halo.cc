#include "workers/rgnn/halo.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/logging.h"

namespace tessel::workers {

Result<HaloExchange> HaloExchange::Build(const storage::WorkerPartition& p, WorkerComm& comm) {
  HaloExchange h;
  h.comm_ = &comm;
  h.num_owned_ = p.num_owned;
  const int n = comm.size();
  std::vector<std::vector<int64_t>> need(static_cast<size_t>(n));
  // What this worker needs of each peer, checked before the workers trade it (AgreeOn: a bad part stops
  // every worker, none waits in the exchange).
  const auto plan = [&]() -> Status {
    if (n != p.num_parts) {
      return InternalError(StrCat("partition has ", p.num_parts, " parts but ", n, " workers run"));
    }
    h.halo_begin_.assign(static_cast<size_t>(n), 0);
    h.halo_count_.assign(static_cast<size_t>(n), 0);
    for (int64_t row = p.num_owned; row < p.num_rows(); ++row) {
      const int64_t id = p.row_new_id[static_cast<size_t>(row)];
      const auto it = std::upper_bound(p.offsets.begin(), p.offsets.end(), id);
      const int owner = static_cast<int>(it - p.offsets.begin()) - 1;
      if (owner < 0 || owner >= n || owner == comm.rank()) {
        return BadDataError(StrCat("halo row ", row, " (id ", id, ") has no valid owner"));
      }
      auto& v = need[static_cast<size_t>(owner)];
      if (v.empty()) h.halo_begin_[static_cast<size_t>(owner)] = row - p.num_owned;
      if (!v.empty() &&
          row - p.num_owned != h.halo_begin_[static_cast<size_t>(owner)] + static_cast<int64_t>(v.size())) {
        return BadDataError("halo rows are not grouped by owner");
      }
      v.push_back(id);
    }
    for (int q = 0; q < n; ++q)
      h.halo_count_[static_cast<size_t>(q)] = static_cast<int64_t>(need[static_cast<size_t>(q)].size());
    return Status();
  };
  TESSEL_RETURN_IF_ERROR(AgreeOn(plan(), comm));
  std::vector<std::vector<int64_t>> asked;
  TESSEL_RETURN_IF_ERROR(comm.AllToAll(need, &asked));
  std::vector<std::vector<int64_t>>().swap(need);
  const auto served = [&]() -> Status {
    const int64_t lo = p.offsets[static_cast<size_t>(comm.rank())];
    if (p.num_owned > std::numeric_limits<int32_t>::max()) {
      return BadDataError(
          StrCat("worker ", comm.rank(), " owns ", p.num_owned, " rows, past 2^31 - 1: use more workers"));
    }
    h.serve_rows_.resize(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      std::vector<int64_t>& ids = asked[static_cast<size_t>(q)];
      std::vector<int32_t>& rows = h.serve_rows_[static_cast<size_t>(q)];
      rows.reserve(ids.size());
      for (const int64_t id : ids) {
        if (id < lo || id >= lo + p.num_owned) {
          return BadDataError(
              StrCat("worker ", q, " asked for node ", id, " which worker ", comm.rank(), " does not own"));
        }
        rows.push_back(static_cast<int32_t>(id - lo));
      }
      std::vector<int64_t>().swap(ids);
    }
    return Status();
  };
  TESSEL_RETURN_IF_ERROR(AgreeOn(served(), comm));
  return h;
}

// Both directions move one peer's rows at a time, in n - 1 rounds: in round k a worker sends to the worker
// k after it and receives from the worker k before it (every link busy in every round), so the buffer
// holds the rows served to one peer, not to all of them (at 8 workers of a random graph, a seventh).
namespace {

int Ahead(int me, int k, int n) { return (me + k) % n; }
int Behind(int me, int k, int n) { return (me - k + n) % n; }

}  // namespace

Status HaloExchange::Round(int to, int64_t send_rows, const float* send, int from, int64_t recv_rows, float* recv,
                           int64_t dim) {
  const auto n = static_cast<size_t>(comm_->size());
  std::vector<int64_t> sc(n, 0), so(n, 0), rc(n, 0), ro(n, 0);  // offsets 0: one peer each way
  sc[static_cast<size_t>(to)] = send_rows * dim;
  rc[static_cast<size_t>(from)] = recv_rows * dim;
  TESSEL_RETURN_IF_ERROR(comm_->AllToAllV(send, sc, so, recv, rc, ro));
  bytes_sent_ += send_rows * dim * static_cast<int64_t>(sizeof(float));
  bytes_received_ += recv_rows * dim * static_cast<int64_t>(sizeof(float));
  return Status();
}

int HaloExchange::BlockOwner(int k) const { return Behind(comm_->rank(), k, comm_->size()); }

Status HaloExchange::ForwardRound(int k, const float* owned, float* block, int64_t dim) {
  const int n = comm_->size(), me = comm_->rank();
  const int to = Ahead(me, k, n), from = Behind(me, k, n);
  const std::vector<int32_t>& rows = serve_rows_[static_cast<size_t>(to)];
  buffer_.resize(rows.size() * static_cast<size_t>(dim));
  float* out = buffer_.data();
  for (const int64_t row : rows) {
    std::memcpy(out, owned + row * dim, static_cast<size_t>(dim) * sizeof(float));
    out += dim;
  }
  return Round(to, static_cast<int64_t>(rows.size()), buffer_.data(), from, halo_count_[static_cast<size_t>(from)],
               block, dim);
}

Status HaloExchange::BackwardRound(int k, const float* dblock, float* grad_owned, int64_t dim) {
  const int n = comm_->size(), me = comm_->rank();
  const int to = Behind(me, k, n), from = Ahead(me, k, n);
  const std::vector<int32_t>& rows = serve_rows_[static_cast<size_t>(from)];
  buffer_.resize(rows.size() * static_cast<size_t>(dim));
  TESSEL_RETURN_IF_ERROR(Round(to, halo_count_[static_cast<size_t>(to)], dblock, from,
                               static_cast<int64_t>(rows.size()), buffer_.data(), dim));
  const float* in = buffer_.data();
  for (const int64_t row : rows) {
    float* dst = grad_owned + row * dim;
    for (int64_t c = 0; c < dim; ++c) dst[c] += in[c];
    in += dim;
  }
  return Status();
}

Status HaloExchange::Forward(float* full, int64_t dim) {
  for (int k = 1; k <= rounds(); ++k) TESSEL_RETURN_IF_ERROR(ForwardRound(k, full, full + BlockBegin(k) * dim, dim));
  return Status();
}

Status HaloExchange::Backward(float* grad_full, int64_t dim) {
  // The reverse of Forward: the halo rows' gradients go back to their owners, who add them in round order.
  for (int k = 1; k <= rounds(); ++k)
    TESSEL_RETURN_IF_ERROR(BackwardRound(k, grad_full + BlockBegin(k) * dim, grad_full, dim));
  return Status();
}

}  // namespace tessel::workers
