#include "core/thread_pool.h"

#include <algorithm>
#include <exception>

#include "core/logging.h"

namespace tessel {

ThreadPool::ThreadPool(int num_threads) {
  const int wanted = std::max(1, num_threads);
  for (int i = 1; i < wanted; ++i) {
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::exception& e) {  // EAGAIN: out of threads (ulimit -u, pids.max) or memory for stacks
      start_status_ = InternalError(StrCat("could start only ", i, " of ", wanted, " threads: ", e.what()));
      return;
    }
  }
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(int num_threads) {
  auto pool = std::make_unique<ThreadPool>(num_threads);
  if (!pool->start_status().ok()) return pool->start_status();
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t threads = num_threads();
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, threads * 4);
  const int64_t chunk = (n + chunks - 1) / chunks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    remaining_ = (n + chunk - 1) / chunk;
    ++generation_;
  }
  work_cv_.notify_all();
  // The caller works too.
  for (;;) {
    int64_t begin;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_ >= n_) break;
      begin = next_;
      next_ += chunk_;
    }
    fn(begin, std::min(n, begin + chunk));
    std::lock_guard<std::mutex> lock(mu_);
    if (--remaining_ == 0) done_cv_.notify_all();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return remaining_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && fn_ != nullptr && next_ < n_); });
    if (stop_) return;
    while (fn_ != nullptr && next_ < n_) {
      const int64_t begin = next_;
      next_ += chunk_;
      const int64_t end = std::min(n_, begin + chunk_);
      const auto* fn = fn_;
      lock.unlock();
      (*fn)(begin, end);
      lock.lock();
      if (--remaining_ == 0) done_cv_.notify_all();
    }
    seen = generation_;
  }
}

}  // namespace tessel
