// Device helpers of the llm CUDA kernels: block-wide reductions whose every thread adds the warps'
// partial results in the same fixed order (so a row's sum does not depend on scheduling), a NaN to mark
// rows made from bad tokens, and a launch helper for kernels that need more than 48 KiB of dynamic
// shared memory. Include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "cuda_support.h"

namespace tessel::kernels::llm {

// Threads per block of the row kernels: a multiple of 32, at most 32 warps.
constexpr int kRowThreads = 256;

__device__ inline float QuietNaN(float) { return nanf(""); }
__device__ inline double QuietNaN(double) { return nan(""); }

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Reduces v over the block (every thread must call it; blockDim.x a multiple of 32) and returns the
// result to every thread. `scratch` is 32 values of shared memory, reusable right after the call.
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T result = scratch[0];
  for (int w = 1; w < warps; ++w) result = op(result, scratch[w]);
  __syncthreads();
  return result;
}

// Blocks for a loop of rows (grid-stride beyond the cap).
inline unsigned RowBlocks(int64_t rows) {
  const int64_t cap = int64_t{1} << 20;
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > cap ? cap : rows));
}

// Lets `kernel` use `bytes` of dynamic shared memory when that is more than the default 48 KiB (the
// launch then fails, with CUDA's message, if the device has less).
template <typename Kernel>
void AllowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    CheckCuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
              "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
}

}  // namespace tessel::kernels::llm
