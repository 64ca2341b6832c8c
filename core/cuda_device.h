// The CUDA devices of this process, as a worker decides where to compute: whether a GPU is usable (and
// why not), selecting one, and an owned stream on it. Everything works in a build without CUDA and
// reports that no GPU is usable.
// Thread safety: ProbeCuda and SelectCudaDevice any thread (the selection is per thread, as CUDA's).
// CudaStream: one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessel {

struct CudaProbe {
  int device_count = 0;
  std::string problem;                // empty when at least one device is usable; otherwise why none is
  std::vector<int64_t> memory_bytes;  // each device's total memory (cudaDeviceProp::totalGlobalMem)
  bool usable() const { return problem.empty(); }
};
CudaProbe ProbeCuda();

// Makes `ordinal` the current device of the calling thread (cudaSetDevice).
Status SelectCudaDevice(int ordinal);

// The PCI bus id of device `ordinal` ("0000:3b:00.0", cudaDeviceGetPCIBusId), which names it to NVML.
// Failure: kInternal with CUDA's reason, or without CUDA.
Result<std::string> CudaPciBusId(int ordinal);

// Page-locks host memory that the caller already owns, e.g. a read-only file mapping, and maps it for
// the GPU, so that a kernel reads it in place through the same address (unified addressing; the
// registration is read-only: kernels must not write through it). Locking faults in and pins every page
// of [ptr, ptr + bytes), so register only what the GPU will read. Undo it with UnregisterHostMemory(ptr)
// before the memory is freed or unmapped.
// Without CUDA, or when no GPU is usable, both do nothing and Register succeeds. Failure: kInternal with
// CUDA's reason (for instance, beyond the locked-memory limit or a device that cannot register read-only
// memory). Thread safety: any thread.
Status RegisterHostMemory(const void* ptr, size_t bytes);
void UnregisterHostMemory(const void* ptr);

// The address through which the current device reads page-locked host memory that was allocated mapped
// (PinnedAllocator) or registered (RegisterHostMemory): cudaHostGetDevicePointer. With unified
// addressing it is usually `host` itself, but a kernel must be given this one. Failure: kInternal for
// memory that is not mapped, or without CUDA.
Result<void*> HostMemoryDevicePointer(const void* host);

// An owned, non-blocking CUDA stream on the current device; destroyed with the object.
class CudaStream {
 public:
  static Result<CudaStream> Create();
  CudaStream() = default;
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  void* get() const { return stream_; }  // a cudaStream_t

 private:
  void* stream_ = nullptr;
};

// An owned CUDA event on the current device, for ordering work across streams and threads:
//   ready.Record(compute);  ready.StreamWait(copy);  // the copy stream starts after what compute queued
//   CopyMemoryAsync(host, device, bytes, copy);  done.Record(copy);
//   done.Synchronize();  // on another thread: the copy has landed
// Record, StreamWait and Synchronize may be called from any thread, but not concurrently with a Record
// of the same event. `blocking`: a thread in Synchronize sleeps instead of spinning (for waits on another
// thread that may last a whole kernel). `timing`: the event can be timed (SecondsSince); otherwise it is the
// cheaper kind without timing. Without CUDA, Create fails. Failure: kInternal with CUDA's reason.
class CudaEvent {
 public:
  static Result<CudaEvent> Create(bool blocking = false, bool timing = false);
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  // Captures the work queued on `stream` (a cudaStream_t) so far.
  Status Record(void* stream);
  // Work queued on `stream` from now on starts once the captured work is done (the host does not wait).
  Status StreamWait(void* stream) const;
  // The calling thread waits for the captured work (at once if nothing was recorded).
  Status Synchronize() const;
  // The GPU time from `start`'s captured work to this event's (both recorded, both created with timing);
  // waits for this event first.
  Result<double> SecondsSince(const CudaEvent& start) const;

 private:
  void* event_ = nullptr;  // a cudaEvent_t
};

// Queues a copy of `bytes` between any two of host and device memory on `stream` (cudaMemcpyAsync) and
// returns without waiting; pinned host memory makes it truly asynchronous. Fails without CUDA.
Status CopyMemoryAsync(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace tessel
