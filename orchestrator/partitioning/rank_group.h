// RankGroup: the ranks of one `mpirun -np P tessel partition --input DIR` and the collectives the
// distributed partitioner is built from. Every collective must be called by every rank in the same order;
// a rank that failed locally says so through Agree, which every rank calls after each step, so a failure
// on one rank ends the command on all of them with that rank's error instead of a hang.
// Sizes are 64-bit throughout: Exchange moves any number of bytes per peer (past 2 GiB as one message of a
// derived datatype, workers/comm/mpi_comm.h ByteSpan).
// Thread safety: one thread per rank calls these.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace tessel::orchestrator {

class RankGroup {
 public:
  // A duplicate of MPI_COMM_WORLD (MPI must be initialised), freed with the group.
  static Result<RankGroup> World();
  RankGroup(RankGroup&& o) noexcept;
  RankGroup& operator=(RankGroup&&) = delete;
  ~RankGroup();

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }  // for a library that runs over the same ranks (PT-Scotch)

  // Every rank passes its own outcome; every rank returns the lowest failing rank's, its code kept and its
  // message prefixed "rank R: " when there is more than one rank (once: an error agreed on before keeps
  // its prefix), or Ok when none failed.
  Status Agree(const Status& mine) const;

  // What this rank's command returns for an agreed status, printed once: rank 0 writes the error to stderr
  // as main() would ("tessel: error: ..."), and only then (a barrier) every rank returns its code with an
  // empty message, which main() does not print. Were the others to exit first, mpirun would kill rank 0
  // before it had written the error. Collective when `agreed` is an error (every rank has the same).
  Status PrintedOnce(const Status& agreed) const;

  Status Sum(int64_t* values, int64_t n) const;  // element-wise over the ranks, in place
  Status Max(int64_t* values, int64_t n) const;
  Status ExclusivePrefixSum(int64_t* values, int64_t n) const;  // rank 0 gets zeros
  Status Broadcast(std::string* text, int root) const;
  Result<std::vector<int64_t>> AllGather(int64_t value) const;  // one per rank, in rank order

  // Personalised all-to-all: send[r] goes to rank r (send.size() == size()). Returns what every rank sent
  // this one, concatenated in rank order; *from, when given, gets size() + 1 offsets into it.
  template <typename T>
  Result<std::vector<T>> Exchange(const std::vector<std::vector<T>>& send, std::vector<int64_t>* from = nullptr) const {
    std::vector<const void*> data(send.size());
    std::vector<uint64_t> bytes(send.size());
    for (size_t r = 0; r < send.size(); ++r) {
      data[r] = send[r].data();
      bytes[r] = send[r].size() * sizeof(T);
    }
    return ExchangeSpans<T>(data, bytes, from);
  }
  // The same from one array sorted by destination: counts[r] elements for rank r, in rank order.
  template <typename T>
  Result<std::vector<T>> Exchange(const std::vector<T>& send, const std::vector<int64_t>& counts,
                                  std::vector<int64_t>* from = nullptr) const {
    std::vector<const void*> data(counts.size());
    std::vector<uint64_t> bytes(counts.size());
    size_t at = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      data[r] = send.data() + at;
      bytes[r] = static_cast<uint64_t>(counts[r]) * sizeof(T);
      at += static_cast<size_t>(counts[r]);
    }
    return ExchangeSpans<T>(data, bytes, from);
  }

 private:
  RankGroup() = default;
  template <typename T>
  Result<std::vector<T>> ExchangeSpans(const std::vector<const void*>& data, const std::vector<uint64_t>& bytes,
                                       std::vector<int64_t>* from) const {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<uint64_t> got;
    std::vector<T> out;
    TESSEL_RETURN_IF_ERROR(ExchangeBytes(data, bytes, &got, [&out](size_t n) -> void* {
      out.resize(n / sizeof(T));
      return out.data();
    }));
    if (from) {
      from->assign(1, 0);
      for (uint64_t b : got) from->push_back(from->back() + static_cast<int64_t>(b / sizeof(T)));
    }
    return out;
  }
  // Receives into the buffer `alloc` returns for the total bytes (one allocation, no copy).
  Status ExchangeBytes(const std::vector<const void*>& data, const std::vector<uint64_t>& bytes,
                       std::vector<uint64_t>* got, const std::function<void*(size_t)>& alloc) const;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace tessel::orchestrator
