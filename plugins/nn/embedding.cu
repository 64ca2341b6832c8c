// nn.embedding.fwd/.bwd on CUDA: one thread per (row, column) in grid-stride loops; the backward zeroes
// dW and scatters with atomicAdd (repeated ids sum in no fixed order). The ids are trusted (arguments:
// embedding_args.h).
#include "cuda_support.h"
#include "embedding_args.h"

namespace tessel::kernels::nn {
namespace {

template <typename T>
__global__ void EmbeddingFwdKernel(const T* w, const int64_t* ids, int64_t m, int64_t d, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * d; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = w[ids[i / d] * d + i % d];
  }
}

template <typename T>
__global__ void EmbeddingBwdKernel(const T* dy, const int64_t* ids, int64_t m, int64_t d, T* dw) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * d; i += int64_t(gridDim.x) * blockDim.x) {
    atomicAdd(dw + ids[i / d] * d + i % d, dy[i]);
  }
}

struct EmbeddingFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const EmbeddingFwdArgs<T>& a) {
    if (a.m * a.d == 0) return;
    EmbeddingFwdKernel<T><<<Blocks(a.m * a.d), kThreads, 0, StreamOf(args)>>>(a.w, a.ids, a.m, a.d, a.y);
    CheckLaunch("EmbeddingFwdKernel");
  }
};

struct EmbeddingBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const EmbeddingBwdArgs<T>& a) {
    cudaStream_t stream = StreamOf(args);
    if (a.v * a.d > 0) CheckCuda(cudaMemsetAsync(a.dw, 0, a.v * a.d * sizeof(T), stream), "zero dW");
    if (a.m * a.d == 0) return;
    EmbeddingBwdKernel<T><<<Blocks(a.m * a.d), kThreads, 0, stream>>>(a.dy, a.ids, a.m, a.d, a.dw);
    CheckLaunch("EmbeddingBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(EmbeddingFwdCuda, EmbeddingFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(EmbeddingBwdCuda, EmbeddingBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
