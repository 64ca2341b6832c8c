#include "workers/llm/spill_pool.h"

#include <algorithm>

namespace tessel::workers {

Result<std::unique_ptr<SpillPool>> SpillPool::Create(storage::SpillStore* store, int64_t floats, int32_t buffers,
                                                     const DeviceContext& device, const Logger* log) {
  if (buffers < 2 || floats < 1) return InternalError("a spill pool needs at least 2 buffers of at least 1 float");
  std::unique_ptr<SpillPool> pool(new SpillPool(store, floats, device, log));
  pool->buffers_.resize(static_cast<size_t>(buffers));
  for (Buffer& b : pool->buffers_) {
    TESSEL_ASSIGN_OR_RETURN(b.device, Tensor::Empty(DType::kF32, {floats}, *device.allocator));
    if (device.device != Device::kCpu) {
      TESSEL_ASSIGN_OR_RETURN(b.host, Tensor::Empty(DType::kF32, {floats}, PinnedAllocator()));
    }
  }
  return pool;
}

SpillPool::~SpillPool() {
  // The I/O thread may still be reading or writing a buffer: wait before the buffers go.
  for (Buffer& b : buffers_) {
    if (b.state == State::kWriting || b.state == State::kReading) (void)store_->Wait(b.ticket);
  }
}

SpillPool::Buffer* SpillPool::Find(int64_t id, State state) {
  for (Buffer& b : buffers_) {
    if (b.id == id && b.state == state) return &b;
  }
  return nullptr;
}

Status SpillPool::FinishWrite(Buffer& b) {
  const Status st = store_->Wait(b.ticket);
  b.state = State::kFree;
  if (st.ok()) {
    on_disk_[b.id] = true;
    ++counters_.offloaded;
    return Status();
  }
  on_disk_.erase(b.id);
  if (!storage::IsNoSpace(st)) return st;
  ++counters_.no_space_fallbacks;
  if (spilling_ && log_ != nullptr) {
    log_->Warn(StrCat("the spill file is full (", st.message(), "): offloaded blocks are recomputed from now on"));
  }
  spilling_ = false;
  return Status();
}

Status SpillPool::StartRead(Buffer& b, int64_t id) {
  b.state = State::kReading;
  b.id = id;
  b.ticket = store_->Read(id, io_buffer(b), bytes());
  return Status();
}

Result<SpillPool::Buffer*> SpillPool::Free() {
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree) return &b;
  }
  Buffer* oldest = nullptr;
  for (State state : {State::kWriting, State::kReading}) {
    for (Buffer& b : buffers_) {
      if (b.state == state && (oldest == nullptr || b.ticket < oldest->ticket)) oldest = &b;
    }
    if (oldest == nullptr) continue;
    if (state == State::kWriting) {
      TESSEL_RETURN_IF_ERROR(FinishWrite(*oldest));
    } else {
      // A prefetch dropped: its block is read again when its backward comes.
      (void)store_->Wait(oldest->ticket);
      oldest->state = State::kFree;
    }
    return oldest;
  }
  return nullptr;
}

Result<float*> SpillPool::Acquire(int64_t id) {
  TESSEL_ASSIGN_OR_RETURN(Buffer * b, Free());
  if (b == nullptr) return InternalError("spill pool: every buffer is in use (too few buffers for the schedule)");
  b->state = State::kForward;
  b->id = id;
  on_disk_.erase(id);  // last step's copy is superseded
  return b->device.data<float>();
}

Status SpillPool::Offload(int64_t id) {
  Buffer* b = Find(id, State::kForward);
  if (b == nullptr) return InternalError(StrCat("spill pool: Offload(", id, ") without Acquire"));
  if (!spilling_) {
    b->state = State::kFree;
    return Status();
  }
  if (b->host.numel() > 0) {
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(b->host.raw(), Device::kCpu, b->device.raw(), b->device.device(), b->device.nbytes(), device_.stream));
  }
  b->state = State::kWriting;
  b->ticket = store_->Write(id, io_buffer(*b), bytes());
  return Status();
}

Status SpillPool::Prefetch(int64_t id) {
  if (Find(id, State::kReading) || Find(id, State::kWriting) || Find(id, State::kHeld)) return Status();
  auto it = on_disk_.find(id);
  if (it == on_disk_.end() || !it->second) return Status();
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree) return StartRead(b, id);
  }
  return Status();
}

Result<float*> SpillPool::Get(int64_t id) {
  if (Buffer* b = Find(id, State::kWriting)) {
    // Still being written: the buffer holds the activations (whatever the write's outcome).
    TESSEL_RETURN_IF_ERROR(FinishWrite(*b));
    b->state = State::kHeld;
    return b->device.data<float>();
  }
  Buffer* b = Find(id, State::kReading);
  if (b == nullptr) {
    auto it = on_disk_.find(id);
    if (it == on_disk_.end() || !it->second) {
      ++counters_.recomputed;
      return static_cast<float*>(nullptr);
    }
    TESSEL_ASSIGN_OR_RETURN(b, Free());
    if (b == nullptr) return InternalError("spill pool: no buffer to read a block back into");
    TESSEL_RETURN_IF_ERROR(StartRead(*b, id));
  }
  if (!store_->Done(b->ticket)) ++counters_.late_fetches;
  const Status st = store_->Wait(b->ticket);
  if (!st.ok()) {
    b->state = State::kFree;
    if (st.message().find("checksum") == std::string::npos) return st;
    // Damaged on disk: never the numbers; the block is recomputed from its kept input.
    ++counters_.checksum_fallbacks;
    ++counters_.recomputed;
    on_disk_.erase(id);
    if (log_ != nullptr) log_->Warn(StrCat(st.message(), ": recomputing the block's activations instead"));
    return static_cast<float*>(nullptr);
  }
  ++counters_.fetched;
  if (b->host.numel() > 0) {
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(b->device.raw(), b->device.device(), b->host.raw(), Device::kCpu, b->device.nbytes(), device_.stream));
  }
  b->state = State::kHeld;
  return b->device.data<float>();
}

void SpillPool::Release(int64_t id) {
  if (Buffer* b = Find(id, State::kHeld)) b->state = State::kFree;
}

Status SpillPool::Drain() {
  for (Buffer& b : buffers_) {
    if (b.state == State::kWriting) TESSEL_RETURN_IF_ERROR(FinishWrite(b));
  }
  return Status();
}

}  // namespace tessel::workers
