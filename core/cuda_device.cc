#include "core/cuda_device.h"

#include <utility>

#include "core/activity.h"
#include "core/allocator.h"
#include "core/logging.h"

#ifdef TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel {

#ifdef TESSEL_HAVE_CUDA
CudaProbe ProbeCuda() {
  CudaProbe probe;
  const cudaError_t err = cudaGetDeviceCount(&probe.device_count);
  if (err != cudaSuccess) {
    probe.device_count = 0;
    probe.problem = StrCat("the CUDA runtime reports ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  } else if (probe.device_count == 0) {
    probe.problem = "the CUDA runtime sees no device";
  }
  for (int d = 0; d < probe.device_count; ++d) {
    cudaDeviceProp prop{};
    probe.memory_bytes.push_back(
        cudaGetDeviceProperties(&prop, d) == cudaSuccess ? static_cast<int64_t>(prop.totalGlobalMem) : 0);
  }
  return probe;
}

Status SelectCudaDevice(int ordinal) {
  const cudaError_t err = cudaSetDevice(ordinal);
  if (err != cudaSuccess)
    return InternalError(StrCat("cudaSetDevice(", ordinal, ") failed: ", cudaGetErrorString(err)));
  return Status();
}

Result<CudaStream> CudaStream::Create() {
  cudaStream_t s = nullptr;
  const cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err != cudaSuccess) return InternalError(StrCat("cudaStreamCreate failed: ", cudaGetErrorString(err)));
  CudaStream stream;
  stream.stream_ = s;
  return stream;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Status RegisterHostMemory(const void* ptr, size_t bytes) {
  if (!CudaAvailable() || ptr == nullptr || bytes == 0) return Status();
  const cudaError_t err =
      cudaHostRegister(const_cast<void*>(ptr), bytes, cudaHostRegisterMapped | cudaHostRegisterReadOnly);
  if (err != cudaSuccess) {
    return InternalError(StrCat("cudaHostRegister of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return Status();
}

void UnregisterHostMemory(const void* ptr) {
  if (CudaAvailable() && ptr != nullptr) cudaHostUnregister(const_cast<void*>(ptr));
}

Result<void*> HostMemoryDevicePointer(const void* host) {
  void* device = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&device, const_cast<void*>(host), 0);
  if (err != cudaSuccess) {
    return InternalError(StrCat("cudaHostGetDevicePointer: host memory at ", reinterpret_cast<uintptr_t>(host),
                                " is not mapped for the GPU: ", cudaGetErrorString(err)));
  }
  return device;
}

namespace {
Status CudaFailure(std::string_view what, cudaError_t err) {
  return InternalError(StrCat(what, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}
}  // namespace

Result<CudaEvent> CudaEvent::Create(bool blocking, bool timing) {
  cudaEvent_t e = nullptr;
  const cudaError_t err =
      cudaEventCreateWithFlags(&e, (timing ? 0u : cudaEventDisableTiming) | (blocking ? cudaEventBlockingSync : 0u));
  if (err != cudaSuccess) return CudaFailure("cudaEventCreate", err);
  CudaEvent event;
  event.event_ = e;
  return event;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Status CudaEvent::Record(void* stream) {
  const cudaError_t err = cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream));
  return err == cudaSuccess ? Status() : CudaFailure("cudaEventRecord", err);
}

Status CudaEvent::StreamWait(void* stream) const {
  const cudaError_t err = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0);
  return err == cudaSuccess ? Status() : CudaFailure("cudaStreamWaitEvent", err);
}

Status CudaEvent::Synchronize() const {
  const activity::StreamWaitScope wait("an event");  // for a hang's report
  const cudaError_t err = cudaEventSynchronize(static_cast<cudaEvent_t>(event_));
  return err == cudaSuccess ? Status() : CudaFailure("cudaEventSynchronize", err);
}

Result<std::string> CudaPciBusId(int ordinal) {
  char id[32] = {};
  const cudaError_t err = cudaDeviceGetPCIBusId(id, sizeof id, ordinal);
  if (err != cudaSuccess) return CudaFailure(StrCat("cudaDeviceGetPCIBusId(", ordinal, ")"), err);
  return std::string(id);
}

Result<double> CudaEvent::SecondsSince(const CudaEvent& start) const {
  TESSEL_RETURN_IF_ERROR(Synchronize());
  float ms = 0;
  const cudaError_t err =
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), static_cast<cudaEvent_t>(event_));
  if (err != cudaSuccess) return CudaFailure("cudaEventElapsedTime", err);
  return static_cast<double>(ms) / 1e3;
}

Status CopyMemoryAsync(void* dst, const void* src, size_t bytes, void* stream) {
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  return err == cudaSuccess ? Status() : CudaFailure(StrCat("cudaMemcpyAsync of ", bytes, " bytes"), err);
}
#else
CudaProbe ProbeCuda() {
  CudaProbe probe;
  probe.problem = "this Tessel was built without CUDA (nvcc was not found at build time)";
  return probe;
}

Status SelectCudaDevice(int) { return InternalError("this Tessel was built without CUDA"); }
Result<std::string> CudaPciBusId(int) { return InternalError("this Tessel was built without CUDA"); }

Result<CudaStream> CudaStream::Create() { return InternalError("this Tessel was built without CUDA"); }

CudaStream::~CudaStream() = default;

Status RegisterHostMemory(const void*, size_t) { return Status(); }
void UnregisterHostMemory(const void*) {}
Result<void*> HostMemoryDevicePointer(const void*) { return InternalError("this Tessel was built without CUDA"); }

Result<CudaEvent> CudaEvent::Create(bool, bool) { return InternalError("this Tessel was built without CUDA"); }
Result<double> CudaEvent::SecondsSince(const CudaEvent&) const {
  return InternalError("this Tessel was built without CUDA");
}
CudaEvent::~CudaEvent() = default;
Status CudaEvent::Record(void*) { return InternalError("this Tessel was built without CUDA"); }
Status CudaEvent::StreamWait(void*) const { return InternalError("this Tessel was built without CUDA"); }
Status CudaEvent::Synchronize() const { return InternalError("this Tessel was built without CUDA"); }
Status CopyMemoryAsync(void*, const void*, size_t, void*) {
  return InternalError("this Tessel was built without CUDA");
}
#endif

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    CudaStream old(std::move(*this));
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    CudaEvent old(std::move(*this));
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

}  // namespace tessel
