// SpillPool: the buffers of the `offload` policy (DESIGN.md "Spill store"). A block whose saved activations
// are offloaded runs its forward into one of a few pool buffers; the buffer is then written to the worker's
// spill file (storage/spill_store.h) while later blocks compute, and is free again once written. Its
// backward prefetches the activations back into a free buffer ahead of use, so Get waits only when the
// disk is late. Resident memory is the pool, not one copy per block and micro-batch in flight.
//
//   SpillPool pool(store, floats_per_block, /*buffers=*/4, device);
//   TESSEL_ASSIGN_OR_RETURN(float* acts, pool.Acquire(id));   // forward of block `id` into acts
//   TESSEL_RETURN_IF_ERROR(pool.Offload(id));                  // written while the next blocks compute
//   ...
//   TESSEL_RETURN_IF_ERROR(pool.Prefetch(next_id));            // backward, ahead of use
//   TESSEL_ASSIGN_OR_RETURN(float* back, pool.Get(id));        // nullptr: recompute block `id`
//   pool.Release(id);
//
// Faults never give wrong numbers: a write that finds the disk full (ENOSPC, or spill.budget_bytes) turns
// spilling off for the rest of the run, and those blocks are recomputed from their kept input (logged once,
// counted as fallbacks); a read whose Fletcher32 checksum fails is recomputed too (counted). Any other I/O
// error is kStorage (exit 6).
//
// On a GPU each buffer has a pinned host twin: device -> pinned host -> file, and back. The copies run on
// the pool's own stream, ordered against the executor's by events, so neither the executor's thread nor
// its stream waits for them: a block's copy out starts once its forward is done on the device, and the
// I/O thread writes the twin once the copy has landed (SpillStore's `ready`); a block read back is copied
// in on the pool's stream and the executor's stream waits for that copy before the backward's kernels.
// Ownership: the pool owns its buffers and borrows the store (which must outlive it). Thread safety: one
// thread (the executor's). Failure: kStorage as above; kInternal for allocation failures.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/cuda_device.h"
#include "core/logging.h"
#include "core/status.h"
#include "core/tensor.h"
#include "storage/spill_store.h"
#include "workers/executor.h"

namespace tessel::workers {

struct SpillPoolCounters {
  int64_t offloaded = 0;           // blocks written out
  int64_t fetched = 0;             // blocks read back
  int64_t cache_hits = 0;          // blocks still in their buffer when wanted (not read back)
  int64_t late_fetches = 0;        // Get found the read not yet done (the disk was late)
  int64_t recomputed = 0;          // blocks Get told the caller to recompute
  int64_t no_space_fallbacks = 0;  // writes refused for lack of space (then spilling stops)
  int64_t checksum_fallbacks = 0;  // reads that failed their checksum
};

class SpillPool {
 public:
  static Result<std::unique_ptr<SpillPool>> Create(storage::SpillStore* store, int64_t floats, int32_t buffers,
                                                   const DeviceContext& device, const Logger* log);
  ~SpillPool();
  SpillPool(const SpillPool&) = delete;
  SpillPool& operator=(const SpillPool&) = delete;

  // A buffer of `floats` floats (rounded up to whole 4 KiB pages) for the forward of `id` (waits for an
  // earlier write, or drops a prefetched block, when no buffer is free).
  Result<float*> Acquire(int64_t id);
  // The forward of `id` is done: queue its write (or, once spilling is off, forget it: Get says recompute).
  Status Offload(int64_t id);
  // Start reading `id` back if a buffer is free and it is on disk or being written; never waits.
  Status Prefetch(int64_t id);
  // `id`'s activations, or nullptr when the caller must recompute them. Waits for a late read.
  Result<float*> Get(int64_t id);
  // The backward is done with `id`'s buffer (or a forward that is not offloaded, such as validation's, is
  // done with the buffer it acquired). On a GPU, once the kernels queued so far are done.
  Status Release(int64_t id);
  // Waits for every queued write (at the end of a step, so that the file holds what it should).
  Status Drain();

  int32_t buffers() const { return static_cast<int32_t>(buffers_.size()); }
  int64_t resident_bytes() const { return static_cast<int64_t>(buffers_.size()) * bytes(); }
  int64_t bytes() const { return floats_ * static_cast<int64_t>(sizeof(float)); }
  bool spilling() const { return spilling_; }
  const SpillPoolCounters& counters() const { return counters_; }

 private:
  enum class State { kFree, kForward, kWriting, kReading, kHeld };
  struct Buffer {
    Tensor device;  // on the executor's device
    Tensor host;    // pinned twin on a GPU; empty on the CPU
    // On a GPU: `ready` marks the last executor work on `device` (recorded when its use ends: Offload,
    // Release); `copied` the last copy between `device` and `host` (the host side is free, and the
    // device side filled, once it is done).
    CudaEvent ready, copied;
    State state = State::kFree;
    int64_t id = -1;
    storage::SpillStore::Ticket ticket = -1;
  };

  SpillPool(storage::SpillStore* store, int64_t floats, const DeviceContext& device, const Logger* log)
      : store_(store), floats_(floats), device_(device), log_(log) {}
  void* io_buffer(Buffer& b) { return b.host.raw() != nullptr ? b.host.raw() : b.device.raw(); }
  Buffer* Find(int64_t id, State state);
  // Drops `id` from the free buffers that still hold an older copy of it.
  void Forget(int64_t id);
  // A buffer to reuse: a free one (one caching nothing first), else the oldest write finished, else the
  // oldest prefetch dropped; null if every buffer is in use by a forward or a backward. A free buffer
  // keeps the id of the block it holds until reused, so Get can take it without a read.
  Result<Buffer*> Free();
  Status FinishWrite(Buffer& b);
  Status StartRead(Buffer& b, int64_t id);
  bool gpu() const { return copy_stream_.get() != nullptr; }
  // On a GPU: the executor's stream is done with `b.device` once what it has queued so far is done.
  Status ExecutorDone(Buffer& b);
  // On a GPU: queues the copy of `b` between device and host on the pool's stream after what the
  // executor's stream has queued so far (to_host: out for a write; otherwise in, and the executor's stream
  // waits for it).
  Status Copy(Buffer& b, bool to_host);
  // What the I/O thread waits for before touching `b.host`: its last copy (nothing on the CPU).
  std::function<Status()> HostReady(Buffer& b);

  storage::SpillStore* store_;
  int64_t floats_;
  DeviceContext device_;
  CudaStream copy_stream_;  // on a GPU: the copies between the buffers and their twins
  const Logger* log_;
  std::vector<Buffer> buffers_;
  std::map<int64_t, bool> on_disk_;  // id -> its last write completed (false: in flight or lost)
  bool spilling_ = true;
  SpillPoolCounters counters_;
};

}  // namespace tessel::workers
