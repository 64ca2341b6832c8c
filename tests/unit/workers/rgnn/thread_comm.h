// ThreadComm: WorkerComm for N workers that are threads of one process (STYLE.md: test distributed
// code with ranks as threads). Every collective is a rendezvous of all N threads on a shared board.
#pragma once

#include <algorithm>
#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "workers/comm/comm.h"

namespace tessel::workers::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), barrier_(n), slots_(static_cast<size_t>(n)) {}
  int size() const { return n_; }
  void Sync() { barrier_.arrive_and_wait(); }
  // Each rank publishes a pointer, everyone syncs, reads the others, syncs again before reuse.
  std::vector<const void*>& slots() { return slots_; }

  // Runs fn(rank) on n threads and joins them.
  static void Run(int n, const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
    for (auto& t : threads) t.join();
  }

 private:
  int n_;
  std::barrier<> barrier_;
  std::vector<const void*> slots_;
};

class ThreadComm final : public WorkerComm {
 public:
  ThreadComm(ThreadGroup* group, int rank) : g_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size(); }
  Status AllreduceSum(float* d, int64_t n) override { return Reduce(d, n); }
  Status AllreduceSum(double* d, int64_t n) override { return Reduce(d, n); }
  Status AllreduceSum(int64_t* d, int64_t n) override { return Reduce(d, n); }

  Status AllToAll(const std::vector<std::vector<int64_t>>& send, std::vector<std::vector<int64_t>>* recv) override {
    Publish(&send);
    recv->assign(static_cast<size_t>(size()), {});
    for (int p = 0; p < size(); ++p) {
      const auto* theirs = static_cast<const std::vector<std::vector<int64_t>>*>(g_->slots()[static_cast<size_t>(p)]);
      (*recv)[static_cast<size_t>(p)] = (*theirs)[static_cast<size_t>(rank_)];
    }
    g_->Sync();
    return Status();
  }

  Status AllToAllV(const float* send_buf, const std::vector<int64_t>& send_counts,
                   const std::vector<int64_t>& send_offsets, float* recv_buf, const std::vector<int64_t>& recv_counts,
                   const std::vector<int64_t>& recv_offsets) override {
    struct View {
      const float* buf;
      const std::vector<int64_t>* counts;
      const std::vector<int64_t>* offsets;
    };
    View mine{send_buf, &send_counts, &send_offsets};
    // Copy our outgoing data first: send and receive buffers may overlap (the halo backward pass).
    int64_t extent = 0;
    for (size_t p = 0; p < send_counts.size(); ++p) extent = std::max(extent, send_offsets[p] + send_counts[p]);
    std::vector<float> copy(static_cast<size_t>(extent));
    if (extent > 0) std::memcpy(copy.data(), send_buf, static_cast<size_t>(extent) * sizeof(float));
    mine.buf = copy.data();
    Publish(&mine);
    for (int p = 0; p < size(); ++p) {
      const auto* v = static_cast<const View*>(g_->slots()[static_cast<size_t>(p)]);
      const size_t me = static_cast<size_t>(rank_);
      if ((*v->counts)[me] != recv_counts[static_cast<size_t>(p)]) return InternalError("AllToAllV count mismatch");
      if (recv_counts[static_cast<size_t>(p)] == 0) continue;  // the buffers may be null then
      std::memcpy(recv_buf + recv_offsets[static_cast<size_t>(p)], v->buf + (*v->offsets)[me],
                  static_cast<size_t>(recv_counts[static_cast<size_t>(p)]) * sizeof(float));
    }
    g_->Sync();
    return Status();
  }

 private:
  void Publish(const void* p) {
    g_->slots()[static_cast<size_t>(rank_)] = p;
    g_->Sync();
  }

  // Sums in rank order, so every rank gets bit-identical results.
  template <typename T>
  Status Reduce(T* d, int64_t n) {
    std::vector<T> mine(d, d + n);
    Publish(mine.data());
    for (int64_t i = 0; i < n; ++i) {
      T sum = 0;
      for (int p = 0; p < size(); ++p) sum += static_cast<const T*>(g_->slots()[static_cast<size_t>(p)])[i];
      d[i] = sum;
    }
    g_->Sync();
    return Status();
  }

  ThreadGroup* g_;
  int rank_;
};

// The communicator of `rank` among `group`'s workers: LocalComm for one worker, else a ThreadComm.
inline std::unique_ptr<WorkerComm> CommOf(ThreadGroup* group, int rank) {
  if (group->size() == 1) return std::make_unique<LocalComm>();
  return std::make_unique<ThreadComm>(group, rank);
}

}  // namespace tessel::workers::testing
