// WorkspacePool: host workspace blocks kept between kernel calls. A CPU kernel that asks for the same
// scratch every step (the fused RGNN kernels' weight-gradient partials: tens of MB) gets the same pages
// back, instead of fresh ones from mmap whose first touch costs a page fault per 4 KiB. A pooled block
// stays charged to the memory budget: it is resident memory.
//
//   WorkspacePool pool(budget);                 // CallOptions::workspace_pool = &pool
//   TESSEL_ASSIGN_OR_RETURN(auto block, pool.Take(bytes));
//   ... pool.Give(block);                       // at the end of the call
//
// Thread safety: Take and Give may be called from any thread. Ownership: the pool frees what it holds
// (and releases its charge) when it is destroyed; a block taken must be given back before then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "core/allocator.h"
#include "core/status.h"

namespace tessel::workers {

class WorkspacePool {
 public:
  struct Block {
    void* ptr = nullptr;
    size_t capacity = 0;  // what was allocated (>= the bytes asked for)
  };
  // `budget` may be null (unlimited); at most `max_pooled_bytes` are kept idle.
  explicit WorkspacePool(MemoryBudget* budget, int64_t max_pooled_bytes = int64_t{1} << 30);
  ~WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // A pooled block of `bytes` to 2 x `bytes` (the smallest), else a new one of `bytes` charged to the
  // budget. kInternal when the budget or the allocator refuses.
  Result<Block> Take(size_t bytes);
  // Back to the pool; freed (and its charge released) when the pool would pass its idle limit.
  void Give(Block block);

  int64_t pooled_bytes() const;

 private:
  MemoryBudget* budget_;
  const int64_t max_pooled_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> idle_;  // by capacity
  int64_t pooled_ = 0;
};

}  // namespace tessel::workers
