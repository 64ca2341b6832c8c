// nn.relu.fwd/.bwd on CUDA for the example plugin: one grid-stride loop per op, queued on the host's
// stream. The host checks the tensors' shapes and devices before it calls the kernel.
#include <cuda_runtime.h>

#include "example_kernels.h"

namespace {

template <typename T>
__global__ void ReluFwd(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i] > T(0) ? x[i] : T(0);
  }
}

template <typename T>
__global__ void ReluBwd(const T* dy, const T* y, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = y[i] > T(0) ? dy[i] : T(0);
  }
}

constexpr int kThreads = 256;
unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(n <= 0 ? 1 : n / kThreads + 1 < 4096 ? n / kThreads + 1 : 4096);
}

const char* LaunchError() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace

extern "C" const char* example_relu_fwd_cuda(const void* x, void* y, int64_t n, int f64, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n == 0) return nullptr;
  if (f64) {
    ReluFwd<<<Blocks(n), kThreads, 0, s>>>(static_cast<const double*>(x), static_cast<double*>(y), n);
  } else {
    ReluFwd<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), n);
  }
  return LaunchError();
}

extern "C" const char* example_relu_bwd_cuda(const void* dy, const void* y, void* dx, int64_t n, int f64,
                                             void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n == 0) return nullptr;
  if (f64) {
    ReluBwd<<<Blocks(n), kThreads, 0, s>>>(static_cast<const double*>(dy), static_cast<const double*>(y),
                                           static_cast<double*>(dx), n);
  } else {
    ReluBwd<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(dy), static_cast<const float*>(y),
                                           static_cast<float*>(dx), n);
  }
  return LaunchError();
}
