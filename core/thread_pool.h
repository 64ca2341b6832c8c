// A fixed-size thread pool with a blocking ParallelFor. The pool is owned by whoever creates it
// (a worker owns one, sized by [resources] threads_per_worker) and passed explicitly to kernels.
// Thread safety: ParallelFor may be called from one thread at a time; it blocks until all chunks ran.
// It is not reentrant: a task must not call ParallelFor on the same pool.
// Failure: a thread that cannot be started (the process or user is out of threads or memory) never throws:
// Create() returns it as a Status; the constructor keeps the threads it could start and start_status() says.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"

namespace tessel {

class ThreadPool {
 public:
  // A pool of num_threads, or kInternal naming how many threads started and why the next did not (the
  // caller adds which setting asked for them). The caller owns the pool.
  static Result<std::unique_ptr<ThreadPool>> Create(int num_threads);
  // num_threads counts the calling thread: 1 means run everything inline. A thread that cannot be started
  // leaves the pool with fewer (start_status() says why); for tests and fixed small pools.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  const Status& start_status() const { return start_status_; }

  // Splits [0, n) into chunks of at least `grain` and runs fn(begin, end) on them.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t next_ = 0;
  int64_t remaining_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  Status start_status_;
};

}  // namespace tessel
