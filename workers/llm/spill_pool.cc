#include "workers/llm/spill_pool.h"

#include <algorithm>
#include <cstdlib>

namespace tessel::workers {
namespace {

// Page-aligned host memory: the spill file writes whole pages from it with O_DIRECT, without a copy.
class PageAlignedAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, kPage, std::max<size_t>(bytes, 1)) != 0) {
      return InternalError(StrCat("out of memory allocating ", bytes, " page-aligned bytes"));
    }
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  Device device() const override { return Device::kCpu; }
  std::string_view name() const override { return "page-aligned host"; }
  static constexpr size_t kPage = 4096;
};

Allocator& PageAligned() {
  static PageAlignedAllocator allocator;
  return allocator;
}

}  // namespace

Result<std::unique_ptr<SpillPool>> SpillPool::Create(storage::SpillStore* store, int64_t floats, int32_t buffers,
                                                     const DeviceContext& device, const Logger* log) {
  if (buffers < 2 || floats < 1) return InternalError("a spill pool needs at least 2 buffers of at least 1 float");
  // Whole pages, so that every write is whole pages from an aligned buffer.
  floats = (floats + 1023) / 1024 * 1024;
  std::unique_ptr<SpillPool> pool(new SpillPool(store, floats, device, log));
  const bool cpu = device.device == Device::kCpu;
  if (!cpu) {
    TESSEL_ASSIGN_OR_RETURN(pool->copy_stream_, CudaStream::Create());
  }
  pool->buffers_.resize(static_cast<size_t>(buffers));
  for (Buffer& b : pool->buffers_) {
    TESSEL_ASSIGN_OR_RETURN(b.device, Tensor::Empty(DType::kF32, {floats}, cpu ? PageAligned() : *device.allocator));
    if (!cpu) {
      TESSEL_ASSIGN_OR_RETURN(b.host, Tensor::Empty(DType::kF32, {floats}, PinnedAllocator()));
      TESSEL_ASSIGN_OR_RETURN(b.ready, CudaEvent::Create());
      TESSEL_ASSIGN_OR_RETURN(b.copied, CudaEvent::Create(/*blocking=*/true));  // the I/O thread sleeps on it
    }
  }
  return pool;
}

SpillPool::~SpillPool() {
  // The I/O thread may still be reading or writing a buffer, and the pool's stream copying one: wait
  // before the buffers go.
  for (Buffer& b : buffers_) {
    if (b.state == State::kWriting || b.state == State::kReading) (void)store_->Wait(b.ticket);
  }
  if (gpu()) (void)SyncStream(device_.device, copy_stream_.get());
}

Status SpillPool::ExecutorDone(Buffer& b) { return gpu() ? b.ready.Record(device_.stream) : Status(); }

Status SpillPool::Copy(Buffer& b, bool to_host) {
  // Out: after the forward that filled the buffer. In: after the last kernels that used the buffer (recorded
  // when they were queued), not after everything the executor has queued since, so the copy in can run
  // while the executor's stream is still busy with other blocks.
  if (to_host) TESSEL_RETURN_IF_ERROR(ExecutorDone(b));
  TESSEL_RETURN_IF_ERROR(b.ready.StreamWait(copy_stream_.get()));
  void* dst = to_host ? b.host.raw() : b.device.raw();
  const void* src = to_host ? b.device.raw() : b.host.raw();
  TESSEL_RETURN_IF_ERROR(CopyMemoryAsync(dst, src, static_cast<size_t>(bytes()), copy_stream_.get()));
  TESSEL_RETURN_IF_ERROR(b.copied.Record(copy_stream_.get()));
  return to_host ? Status() : b.copied.StreamWait(device_.stream);
}

std::function<Status()> SpillPool::HostReady(Buffer& b) {
  if (!gpu()) return {};
  // The I/O thread's current device is the executor's, so that waiting creates no context on another GPU.
  return [copied = &b.copied, ordinal = device_.ordinal] {
    TESSEL_RETURN_IF_ERROR(SelectCudaDevice(ordinal));
    return copied->Synchronize();
  };
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
  b.ticket = store_->Read(id, io_buffer(b), bytes(), HostReady(b));
  return Status();
}

Result<SpillPool::Buffer*> SpillPool::Free() {
  // A free buffer that caches nothing, else one whose block is on disk anyway.
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree && b.id < 0) return &b;
  }
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree) {
      b.id = -1;
      return &b;
    }
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
    oldest->id = -1;
    return oldest;
  }
  return nullptr;
}

void SpillPool::Forget(int64_t id) {
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree && b.id == id) b.id = -1;
  }
}

Result<float*> SpillPool::Acquire(int64_t id) {
  Forget(id);  // a free buffer may still cache last step's copy
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
    return ExecutorDone(*b);
  }
  if (gpu()) TESSEL_RETURN_IF_ERROR(Copy(*b, /*to_host=*/true));
  b->state = State::kWriting;
  b->ticket = store_->Write(id, io_buffer(*b), bytes(), HostReady(*b));
  return Status();
}

Status SpillPool::Prefetch(int64_t id) {
  for (State state : {State::kReading, State::kWriting, State::kHeld, State::kFree}) {
    if (Find(id, state) != nullptr) return Status();  // on its way, or still in memory
  }
  auto it = on_disk_.find(id);
  if (it == on_disk_.end() || !it->second) return Status();
  Buffer* target = nullptr;
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree && (target == nullptr || b.id < 0)) target = &b;
  }
  return target == nullptr ? Status() : StartRead(*target, id);
}

Result<float*> SpillPool::Get(int64_t id) {
  if (Buffer* b = Find(id, State::kWriting)) {
    // Still being written: the buffer holds the activations (whatever the write's outcome).
    TESSEL_RETURN_IF_ERROR(FinishWrite(*b));
    ++counters_.cache_hits;
    b->state = State::kHeld;
    return b->device.data<float>();
  }
  if (Buffer* cached = Find(id, State::kFree)) {
    // Written, and its buffer not reused since: no need to read it back.
    ++counters_.cache_hits;
    cached->state = State::kHeld;
    return cached->device.data<float>();
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
    b->id = -1;
    if (st.message().find("checksum") == std::string::npos) return st;
    // Damaged on disk: never the numbers; the block is recomputed from its kept input.
    ++counters_.checksum_fallbacks;
    ++counters_.recomputed;
    on_disk_.erase(id);
    if (log_ != nullptr) log_->Warn(StrCat(st.message(), ": recomputing the block's activations instead"));
    return static_cast<float*>(nullptr);
  }
  ++counters_.fetched;
  if (gpu()) TESSEL_RETURN_IF_ERROR(Copy(*b, /*to_host=*/false));
  b->state = State::kHeld;
  return b->device.data<float>();
}

Status SpillPool::Release(int64_t id) {
  for (State state : {State::kHeld, State::kForward}) {
    if (Buffer* b = Find(id, state)) {
      b->state = State::kFree, b->id = -1;
      TESSEL_RETURN_IF_ERROR(ExecutorDone(*b));
    }
  }
  return Status();
}

Status SpillPool::Drain() {
  for (Buffer& b : buffers_) {
    if (b.state == State::kWriting) TESSEL_RETURN_IF_ERROR(FinishWrite(b));
  }
  return Status();
}

}  // namespace tessel::workers
