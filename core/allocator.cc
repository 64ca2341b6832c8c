#include "core/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/activity.h"
#include "core/logging.h"

#ifdef TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel {

std::string_view DeviceName(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

Status OutOfMemory(std::string_view what, size_t bytes, std::string_view cause) {
  double value = static_cast<double>(bytes) * 1e-6;
  const char* unit = "MB";
  for (const char* larger : {"GB", "TB", "PB"}) {
    if (value < 1000) break;
    value *= 1e-3, unit = larger;
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.3g %s", value, unit);
  return StorageError(StrCat("out of memory: a ", what, " of ", bytes, " bytes (", size, ") failed: ", cause));
}

bool IsOutOfMemory(const Status& status) {
  return status.code() == Code::kStorage && status.message().find("out of memory: ") != std::string::npos;
}

namespace {

class AlignedHost final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    if (bytes == 0) bytes = 1;
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) return OutOfMemory("host allocation", bytes, "the host has not that much memory free");
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  Device device() const override { return Device::kCpu; }
  std::string_view name() const override { return "host"; }
};

#ifdef TESSEL_HAVE_CUDA
class Pinned final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    if (!CudaAvailable()) return fallback_.Allocate(bytes);
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) {
      return OutOfMemory("pinned host allocation", bytes, cudaGetErrorString(err));
    }
    return p;
  }
  void Free(void* ptr) override {
    if (!CudaAvailable()) return fallback_.Free(ptr);
    cudaFreeHost(ptr);
  }
  Device device() const override { return Device::kCpu; }
  std::string_view name() const override { return "pinned"; }

 private:
  AlignedHost fallback_;
};

class Cuda final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    if (!CudaAvailable()) return InternalError("no CUDA device is visible");
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (err != cudaSuccess) {
      return OutOfMemory("cudaMalloc", bytes, cudaGetErrorString(err));
    }
    return p;
  }
  void Free(void* ptr) override { cudaFree(ptr); }
  Device device() const override { return Device::kCuda; }
  std::string_view name() const override { return "cuda"; }
};
#else
class Cuda final : public Allocator {
 public:
  Result<void*> Allocate(size_t) override { return InternalError("Tessel was built without CUDA"); }
  void Free(void*) override {}
  Device device() const override { return Device::kCuda; }
  std::string_view name() const override { return "cuda"; }
};
#endif

}  // namespace

Allocator& HostAllocator() {
  static AlignedHost instance;  // stateless: a shared instance hides no state
  return instance;
}

Allocator& PinnedAllocator() {
#ifdef TESSEL_HAVE_CUDA
  static Pinned instance;
#else
  static AlignedHost instance;
#endif
  return instance;
}

Allocator& CudaAllocator() {
  static Cuda instance;
  return instance;
}

bool MemoryBudget::TryReserve(int64_t bytes) {
  int64_t used = used_.load();
  do {
    if (limit_ > 0 && used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  int64_t peak = peak_.load();
  while (used + bytes > peak && !peak_.compare_exchange_weak(peak, used + bytes)) {
  }
  return true;
}

#ifdef TESSEL_HAVE_CUDA
Result<void*> CudaAllocateAsync(size_t bytes, void* stream) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    return OutOfMemory("cudaMallocAsync", bytes, cudaGetErrorString(err));
  }
  return p;
}
void CudaFreeAsync(void* ptr, void* stream) { cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream)); }
int64_t CudaPoolPeakBytes() {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  std::uint64_t high = 0;  // cuuint64_t
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high) != cudaSuccess) {
    return 0;
  }
  return static_cast<int64_t>(high);
}
#else
Result<void*> CudaAllocateAsync(size_t, void*) { return InternalError("Tessel was built without CUDA"); }
void CudaFreeAsync(void*, void*) {}
int64_t CudaPoolPeakBytes() { return 0; }
#endif

#ifdef TESSEL_HAVE_CUDA
Status CopyMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes, void* stream) {
  if (bytes == 0) return Status();
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  const cudaMemcpyKind kind = dst_device == Device::kCpu   ? cudaMemcpyDeviceToHost
                              : src_device == Device::kCpu ? cudaMemcpyHostToDevice
                                                           : cudaMemcpyDeviceToDevice;
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, s);
  if (err == cudaSuccess) {
    const activity::StreamWaitScope wait(StrCat("a copy of ", bytes, " bytes"));  // for a hang's report
    err = cudaStreamSynchronize(s);
  }
  if (err != cudaSuccess) return InternalError(StrCat("copy of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  return Status();
}

Status ZeroMemory(void* ptr, Device device, size_t bytes, void* stream) {
  if (bytes == 0) return Status();
  if (device == Device::kCpu) {
    std::memset(ptr, 0, bytes);
    return Status();
  }
  const cudaError_t err = cudaMemsetAsync(ptr, 0, bytes, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) return InternalError(StrCat("cudaMemsetAsync failed: ", cudaGetErrorString(err)));
  return Status();
}

Status SyncStream(Device device, void* stream) {
  if (device == Device::kCpu) return Status();
  const activity::StreamWaitScope wait("a stream synchronisation");  // for a hang's report
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) return InternalError(StrCat("cudaStreamSynchronize failed: ", cudaGetErrorString(err)));
  return Status();
}
#else
Status CopyMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes, void*) {
  if (dst_device != Device::kCpu || src_device != Device::kCpu) return InternalError("Tessel was built without CUDA");
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return Status();
}

Status ZeroMemory(void* ptr, Device device, size_t bytes, void*) {
  if (device != Device::kCpu) return InternalError("Tessel was built without CUDA");
  if (bytes > 0) std::memset(ptr, 0, bytes);
  return Status();
}

Status SyncStream(Device, void*) { return Status(); }
#endif

bool CudaAvailable() {
#ifdef TESSEL_HAVE_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

}  // namespace tessel
