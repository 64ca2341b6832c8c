// The CUDA devices of this process, as a worker decides where to compute: whether a GPU is usable (and
// why not), selecting one, and an owned stream on it. Everything works in a build without CUDA and
// reports that no GPU is usable.
// Thread safety: ProbeCuda and SelectCudaDevice any thread (the selection is per thread, as CUDA's).
// CudaStream: one owner.
#pragma once

#include <string>

#include "core/status.h"

namespace tessel {

struct CudaProbe {
  int device_count = 0;
  std::string problem;  // empty when at least one device is usable; otherwise why none is
  bool usable() const { return problem.empty(); }
};
CudaProbe ProbeCuda();

// Makes `ordinal` the current device of the calling thread (cudaSetDevice).
Status SelectCudaDevice(int ordinal);

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

}  // namespace tessel
