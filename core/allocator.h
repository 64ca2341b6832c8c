// Allocators for host, pinned host and CUDA device memory.
// Ownership: Allocate returns memory the caller must give back with Free on the same allocator
// (Tensor does this through its Buffer). Thread safety: all methods may be called from any thread.
// Failure: out of memory is a Code::kStorage Status (exit 6, OutOfMemory) with the byte count in the message.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace tessel {

enum class Device : int { kCpu = 0, kCuda = 1 };
std::string_view DeviceName(Device device);

// An allocation that failed: kStorage (exit 6, "out of memory: a host allocation of N bytes (X GB) failed:
// CAUSE"). Callers add what the memory was for and which setting sized it.
Status OutOfMemory(std::string_view what, size_t bytes, std::string_view cause);
// Whether `status` is (or wraps, with context added before it) an OutOfMemory failure.
bool IsOutOfMemory(const Status& status);

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Result<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual Device device() const = 0;
  virtual std::string_view name() const = 0;
};

// 64-byte aligned pageable host memory. Always available.
Allocator& HostAllocator();
// Page-locked host memory (cudaHostAlloc, mapped) when CUDA is available, else aligned host memory.
Allocator& PinnedAllocator();
// cudaMalloc. Allocate fails with a clear message when Tessel was built without CUDA or no GPU exists.
Allocator& CudaAllocator();

// True when built with CUDA and at least one device is visible.
bool CudaAvailable();

// Stream-ordered device memory (cudaMallocAsync / cudaFreeAsync on `stream`, a cudaStream_t or null for
// the default stream): the memory may be used by work queued on the stream after the allocation and is
// released after the work queued before the free. Fails without CUDA.
Result<void*> CudaAllocateAsync(size_t bytes, void* stream);
void CudaFreeAsync(void* ptr, void* stream);
// The most memory the current CUDA device's default pool (the one cudaMallocAsync draws on) has held at
// once since the process started, in bytes; 0 without CUDA or when it cannot be read.
int64_t CudaPoolPeakBytes();

// Copies `bytes` between host and device memory in either direction (a plain memcpy when both are host
// memory). On CUDA the copy is queued on `stream` (a cudaStream_t, null = the default stream) and waited
// for before returning. Fails without CUDA when either side is device memory.
Status CopyMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                  void* stream = nullptr);
// Sets `bytes` of `device` memory to zero (on CUDA queued on `stream`, not waited for).
Status ZeroMemory(void* ptr, Device device, size_t bytes, void* stream = nullptr);
// Waits for the work queued on `stream` (a cudaStream_t) of a CUDA device; a no-op for the CPU.
Status SyncStream(Device device, void* stream);

// A byte budget shared by the allocations one worker makes through it (kernel workspaces today): each
// reservation is refused when it would pass the limit. Thread safety: every method, any thread.
class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit_bytes = 0) : limit_(limit_bytes) {}  // 0 = unlimited
  // Reserves `bytes`; false (and nothing reserved) when that would pass the limit.
  bool TryReserve(int64_t bytes);
  void Release(int64_t bytes) { used_.fetch_sub(bytes); }
  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(); }
  int64_t peak() const { return peak_.load(); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace tessel
