// rgnn.typed_embed.fwd/.bwd on CUDA: one thread per (compact row, column); the relation of a compact
// row is found by binary search in uniq_ptr. Arguments: typed_embed_args.h.
#include "cuda_support.h"
#include "typed_embed_args.h"

namespace tessel::kernels::rgnn {
namespace {

// The r with uniq_ptr[r] <= u < uniq_ptr[r+1] (the last such r when relations are empty).
__device__ int64_t RelationOf(const int64_t* uniq_ptr, int64_t num_relations, int64_t u) {
  int64_t lo = 0, hi = num_relations;  // invariant: uniq_ptr[lo] <= u < uniq_ptr[hi]
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (uniq_ptr[mid] <= u)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

template <typename T>
__global__ void EmbedFwdKernel(const T* w, const int64_t* uniq_ptr, int64_t r, const int64_t* uniq_src,
                               const int64_t* row_id, int64_t u, int64_t v, int64_t d, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < u * d; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / d, rel = RelationOf(uniq_ptr, r, row);
    y[i] = w[(rel * v + row_id[uniq_src[row]]) * d + i % d];
  }
}

template <typename T>
__global__ void EmbedBwdKernel(const T* dy, const int64_t* uniq_ptr, int64_t r, const int64_t* uniq_src,
                               const int64_t* row_id, int64_t u, int64_t v, int64_t d, T* dw) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < u * d; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / d, rel = RelationOf(uniq_ptr, r, row);
    atomicAdd(dw + (rel * v + row_id[uniq_src[row]]) * d + i % d, dy[i]);  // no contention: row_id is injective
  }
}

struct TypedEmbedFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedEmbedFwdArgs<T>& a) {
    const int64_t u = a.u, d = a.d;
    if (u * d == 0) return;
    EmbedFwdKernel<T>
        <<<Blocks(u * d), kThreads, 0, StreamOf(args)>>>(a.w, a.uniq_ptr, a.r, a.uniq_src, a.row_id, u, a.v, d, a.y);
    CheckLaunch("EmbedFwdKernel");
  }
};

struct TypedEmbedBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedEmbedBwdArgs<T>& a) {
    const int64_t u = a.u, d = a.d;
    cudaStream_t stream = StreamOf(args);
    CheckCuda(cudaMemsetAsync(a.dw, 0, a.r * a.v * d * sizeof(T), stream), "zero dW");
    if (u * d == 0) return;
    EmbedBwdKernel<T>
        <<<Blocks(u * d), kThreads, 0, stream>>>(a.dy, a.uniq_ptr, a.r, a.uniq_src, a.row_id, u, a.v, d, a.dw);
    CheckLaunch("EmbedBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(TypedEmbedFwdCuda, TypedEmbedFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(TypedEmbedBwdCuda, TypedEmbedBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
