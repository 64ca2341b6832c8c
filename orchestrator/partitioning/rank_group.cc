#include "orchestrator/partitioning/rank_group.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/logging.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::orchestrator {

using workers::ByteSpan;
using workers::MpiCheck;

Result<RankGroup> RankGroup::World() {
  RankGroup g;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &g.comm_), "MPI_Comm_dup"));
  MPI_Comm_rank(g.comm_, &g.rank_);
  MPI_Comm_size(g.comm_, &g.size_);
  return g;
}

RankGroup::RankGroup(RankGroup&& o) noexcept
    : comm_(std::exchange(o.comm_, MPI_COMM_NULL)), rank_(o.rank_), size_(o.size_) {}

RankGroup::~RankGroup() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status RankGroup::PrintedOnce(const Status& agreed) const {
  if (agreed.ok()) return agreed;
  if (rank_ == 0) {
    std::fprintf(stderr, "tessel: error: %s\n", agreed.message().c_str());
    std::fflush(stderr);
  }
  if (size_ > 1) MPI_Barrier(comm_);
  return Status(agreed.code(), "");
}

Status RankGroup::Agree(const Status& mine) const {
  int first = mine.ok() ? size_ : rank_;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce"));
  if (first == size_) return Status::Ok();
  int64_t code = static_cast<int64_t>(mine.code());
  std::string message = mine.message();
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Bcast(&code, 1, MPI_INT64_T, first, comm_), "MPI_Bcast"));
  TESSEL_RETURN_IF_ERROR(Broadcast(&message, first));
  // An error agreed on before (a step inside a step) keeps its one "rank R: ".
  const bool named = message.rfind("rank ", 0) == 0 && message.find(": ") != std::string::npos &&
                     std::all_of(message.begin() + 5, message.begin() + static_cast<ptrdiff_t>(message.find(": ")),
                                 [](char c) { return c >= '0' && c <= '9'; });
  return Status(static_cast<Code>(code), size_ > 1 && !named ? StrCat("rank ", first, ": ", message) : message);
}

Status RankGroup::Sum(int64_t* values, int64_t n) const {
  return MpiCheck(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_INT64_T, MPI_SUM, comm_),
                  "MPI_Allreduce");
}

Status RankGroup::Max(int64_t* values, int64_t n) const {
  return MpiCheck(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_INT64_T, MPI_MAX, comm_),
                  "MPI_Allreduce");
}

Status RankGroup::ExclusivePrefixSum(int64_t* values, int64_t n) const {
  std::vector<int64_t> out(static_cast<size_t>(n), 0);
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Exscan(values, out.data(), static_cast<int>(n), MPI_INT64_T, MPI_SUM, comm_), "MPI_Exscan"));
  if (rank_ == 0) out.assign(static_cast<size_t>(n), 0);  // MPI leaves rank 0's result undefined
  std::copy(out.begin(), out.end(), values);
  return Status::Ok();
}

Status RankGroup::Broadcast(std::string* text, int root) const {
  int64_t n = static_cast<int64_t>(text->size());
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm_), "MPI_Bcast"));
  text->resize(static_cast<size_t>(n));
  TESSEL_ASSIGN_OR_RETURN(const ByteSpan span, ByteSpan::Of(static_cast<size_t>(n)));
  return MpiCheck(MPI_Bcast(text->data(), span.count(), span.type(), root, comm_), "MPI_Bcast");
}

Result<std::vector<int64_t>> RankGroup::AllGather(int64_t value) const {
  std::vector<int64_t> out(static_cast<size_t>(size_));
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, comm_), "MPI_Allgather"));
  return out;
}

Status RankGroup::ExchangeBytes(const std::vector<const void*>& data, const std::vector<uint64_t>& bytes,
                                std::vector<uint64_t>* got, const std::function<void*(size_t)>& alloc) const {
  if (static_cast<int>(bytes.size()) != size_) {
    return InternalError(StrCat("RankGroup::Exchange: ", bytes.size(), " send lists for ", size_, " ranks"));
  }
  got->assign(static_cast<size_t>(size_), 0);
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Alltoall(bytes.data(), 1, MPI_UINT64_T, got->data(), 1, MPI_UINT64_T, comm_), "MPI_Alltoall"));
  std::vector<uint64_t> at(static_cast<size_t>(size_) + 1, 0);
  for (int r = 0; r < size_; ++r) at[static_cast<size_t>(r) + 1] = at[static_cast<size_t>(r)] + (*got)[r];
  auto* out = static_cast<uint8_t*>(alloc(static_cast<size_t>(at.back())));
  std::vector<MPI_Request> reqs;
  std::vector<ByteSpan> spans;  // alive until the requests complete
  spans.reserve(2 * static_cast<size_t>(size_));
  Status st;
  for (int r = 0; r < size_ && st.ok(); ++r) {
    const auto ur = static_cast<size_t>(r);
    if (r == rank_) {
      if (bytes[ur]) std::memcpy(out + at[ur], data[ur], bytes[ur]);
      continue;
    }
    for (const bool send : {false, true}) {
      const uint64_t n = send ? bytes[ur] : (*got)[ur];
      if (n == 0) continue;
      Result<ByteSpan> span = ByteSpan::Of(n);
      if (!span.ok()) {
        st = span.status();
        break;
      }
      spans.push_back(std::move(*span));
      MPI_Request req;
      st = send ? MpiCheck(MPI_Isend(data[ur], spans.back().count(), spans.back().type(), r, 0, comm_, &req),
                           "MPI_Isend")
                : MpiCheck(MPI_Irecv(out + at[ur], spans.back().count(), spans.back().type(), r, 0, comm_, &req),
                           "MPI_Irecv");
      if (!st.ok()) break;
      reqs.push_back(req);
    }
  }
  const Status waited =
      MpiCheck(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  TESSEL_RETURN_IF_ERROR(st);
  return waited;
}

}  // namespace tessel::orchestrator
