// Allocators for host, pinned host and CUDA device memory.
// Ownership: Allocate returns memory the caller must give back with Free on the same allocator
// (Tensor does this through its Buffer). Thread safety: all methods may be called from any thread.
// Failure: out of memory is a Code::kInternal Status with the byte count in the message.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace tessel {

enum class Device : int { kCpu = 0, kCuda = 1 };
std::string_view DeviceName(Device device);

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

}  // namespace tessel
