#include "workers/rgnn/halo.h"

#include <algorithm>
#include <cstring>

namespace tessel::workers {

Result<HaloExchange> HaloExchange::Build(const storage::WorkerPartition& p, WorkerComm& comm) {
  HaloExchange h;
  h.comm_ = &comm;
  h.num_owned_ = p.num_owned;
  const int n = comm.size();
  if (n != p.num_parts) {
    return InternalError("partition has " + std::to_string(p.num_parts) + " parts but " + std::to_string(n) +
                         " workers run");
  }
  h.halo_begin_.assign(static_cast<size_t>(n), 0);
  h.halo_count_.assign(static_cast<size_t>(n), 0);
  std::vector<std::vector<int64_t>> need(static_cast<size_t>(n));
  for (int64_t row = p.num_owned; row < p.num_rows(); ++row) {
    const int64_t id = p.row_new_id[static_cast<size_t>(row)];
    const auto it = std::upper_bound(p.offsets.begin(), p.offsets.end(), id);
    const int owner = static_cast<int>(it - p.offsets.begin()) - 1;
    if (owner < 0 || owner >= n || owner == comm.rank()) {
      return BadDataError("halo row " + std::to_string(row) + " (id " + std::to_string(id) + ") has no valid owner");
    }
    auto& v = need[static_cast<size_t>(owner)];
    if (v.empty()) h.halo_begin_[static_cast<size_t>(owner)] = row - p.num_owned;
    if (!v.empty() && row - p.num_owned != h.halo_begin_[static_cast<size_t>(owner)] + static_cast<int64_t>(v.size())) {
      return BadDataError("halo rows are not grouped by owner");
    }
    v.push_back(id);
  }
  for (int q = 0; q < n; ++q)
    h.halo_count_[static_cast<size_t>(q)] = static_cast<int64_t>(need[static_cast<size_t>(q)].size());
  TESSEL_RETURN_IF_ERROR(comm.AllToAll(need, &h.serve_rows_));
  const int64_t lo = p.offsets[static_cast<size_t>(comm.rank())];
  for (int q = 0; q < n; ++q) {
    for (int64_t& id : h.serve_rows_[static_cast<size_t>(q)]) {
      if (id < lo || id >= lo + p.num_owned) {
        return BadDataError("worker " + std::to_string(q) + " asked for node " + std::to_string(id) + " which worker " +
                            std::to_string(comm.rank()) + " does not own");
      }
      id -= lo;
    }
  }
  return h;
}

Status HaloExchange::Forward(float* full, int64_t dim) {
  const size_t n = static_cast<size_t>(comm_->size());
  if (n == 1) return Status();
  std::vector<int64_t> sc(n), so(n), rc(n), ro(n);
  int64_t total = 0;
  for (size_t q = 0; q < n; ++q) {
    so[q] = total;
    sc[q] = static_cast<int64_t>(serve_rows_[q].size()) * dim;
    total += sc[q];
  }
  buffer_.resize(static_cast<size_t>(total));
  for (size_t q = 0; q < n; ++q) {
    float* out = buffer_.data() + so[q];
    for (int64_t row : serve_rows_[q]) {
      std::memcpy(out, full + row * dim, static_cast<size_t>(dim) * sizeof(float));
      out += dim;
    }
    rc[q] = halo_count_[q] * dim;
    ro[q] = (num_owned_ + halo_begin_[q]) * dim;
  }
  TESSEL_RETURN_IF_ERROR(comm_->AllToAllV(buffer_.data(), sc, so, full, rc, ro));
  for (size_t q = 0; q < n; ++q) {
    bytes_sent_ += sc[q] * static_cast<int64_t>(sizeof(float));
    bytes_received_ += rc[q] * static_cast<int64_t>(sizeof(float));
  }
  return Status();
}

Status HaloExchange::Backward(float* grad_full, int64_t dim) {
  const size_t n = static_cast<size_t>(comm_->size());
  if (n == 1) return Status();
  std::vector<int64_t> sc(n), so(n), rc(n), ro(n);
  int64_t total = 0;
  for (size_t q = 0; q < n; ++q) {
    sc[q] = halo_count_[q] * dim;
    so[q] = (num_owned_ + halo_begin_[q]) * dim;
    ro[q] = total;
    rc[q] = static_cast<int64_t>(serve_rows_[q].size()) * dim;
    total += rc[q];
  }
  buffer_.resize(static_cast<size_t>(total));
  TESSEL_RETURN_IF_ERROR(comm_->AllToAllV(grad_full, sc, so, buffer_.data(), rc, ro));
  for (size_t q = 0; q < n; ++q) {
    const float* in = buffer_.data() + ro[q];
    for (int64_t row : serve_rows_[q]) {
      float* dst = grad_full + row * dim;
      for (int64_t k = 0; k < dim; ++k) dst[k] += in[k];
      in += dim;
    }
    bytes_sent_ += sc[q] * static_cast<int64_t>(sizeof(float));
    bytes_received_ += rc[q] * static_cast<int64_t>(sizeof(float));
  }
  return Status();
}

}  // namespace tessel::workers
