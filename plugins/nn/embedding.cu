// nn.embedding.fwd/.bwd on CUDA: one thread per (row, column) in grid-stride loops; the backward zeroes
// dW and scatters with atomicAdd (repeated ids sum in no fixed order). The ids are trusted.
#include "cuda_support.h"
#include "kernels.h"

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
  static const tessel_op_decl& Decl() { return tessel_op_nn_embedding_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t v = kUnbound, d = kUnbound, m = kUnbound;
    const T* w = args.In<T>(0, "W", {&v, &d});
    const int64_t* ids = args.In<int64_t>(1, "ids", {&m});
    T* y = args.Out<T>(0, "Y", {&m, &d});
    if (m * d == 0) return;
    EmbeddingFwdKernel<T><<<Blocks(m * d), kThreads, 0, StreamOf(args)>>>(w, ids, m, d, y);
    CheckLaunch("EmbeddingFwdKernel");
  }
};

struct EmbeddingBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_embedding_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t m = kUnbound, d = kUnbound, v = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&m, &d});
    const int64_t* ids = args.In<int64_t>(1, "ids", {&m});
    T* dw = args.Out<T>(0, "dW", {&v, &d});
    cudaStream_t stream = StreamOf(args);
    if (v * d > 0) CheckCuda(cudaMemsetAsync(dw, 0, v * d * sizeof(T), stream), "zero dW");
    if (m * d == 0) return;
    EmbeddingBwdKernel<T><<<Blocks(m * d), kThreads, 0, stream>>>(dy, ids, m, d, dw);
    CheckLaunch("EmbeddingBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(EmbeddingFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(EmbeddingBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
