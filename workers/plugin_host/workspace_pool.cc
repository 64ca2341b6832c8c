#include "workers/plugin_host/workspace_pool.h"

#include <string>

namespace tessel::workers {

WorkspacePool::WorkspacePool(MemoryBudget* budget, int64_t max_pooled_bytes)
    : budget_(budget), max_pooled_(max_pooled_bytes) {}

WorkspacePool::~WorkspacePool() {
  for (auto& [capacity, ptr] : idle_) {
    HostAllocator().Free(ptr);
    if (budget_ != nullptr) budget_->Release(static_cast<int64_t>(capacity));
  }
}

Result<WorkspacePool::Block> WorkspacePool::Take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.lower_bound(bytes);
    if (it != idle_.end() && it->first <= 2 * bytes) {
      Block block{it->second, it->first};
      pooled_ -= static_cast<int64_t>(it->first);
      idle_.erase(it);
      return block;
    }
  }
  if (budget_ != nullptr && !budget_->TryReserve(static_cast<int64_t>(bytes))) {
    return InternalError("kernel workspace of " + std::to_string(bytes) +
                         " bytes would pass the worker's memory budget (" + std::to_string(budget_->used()) + " of " +
                         std::to_string(budget_->limit()) + " bytes in use)");
  }
  Result<void*> p = HostAllocator().Allocate(bytes);
  if (!p.ok()) {
    if (budget_ != nullptr) budget_->Release(static_cast<int64_t>(bytes));
    return InternalError("kernel workspace: " + p.status().message());
  }
  return Block{*p, bytes};
}

void WorkspacePool::Give(Block block) {
  if (block.ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pooled_ + static_cast<int64_t>(block.capacity) <= max_pooled_) {
      idle_.emplace(block.capacity, block.ptr);
      pooled_ += static_cast<int64_t>(block.capacity);
      return;
    }
  }
  HostAllocator().Free(block.ptr);
  if (budget_ != nullptr) budget_->Release(static_cast<int64_t>(block.capacity));
}

int64_t WorkspacePool::pooled_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pooled_;
}

}  // namespace tessel::workers
