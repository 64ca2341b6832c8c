// rgnn.typed_embed.fwd/.bwd on CUDA: one thread per (compact row, column); the relation of a compact
// row is found by binary search in uniq_ptr.
#include "cuda_support.h"
#include "kernels.h"

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

template <typename T>
void TypedEmbedFwd(const KernelArgs& args) {
  int64_t r = kUnbound, v = kUnbound, d = kUnbound, u = kUnbound, m = kUnbound;
  const T* w = args.In<T>(0, "W", {&r, &v, &d});
  int64_t r1 = r + 1;
  const int64_t* uniq_ptr = args.In<int64_t>(1, "uniq_ptr", {&r1});
  const int64_t* uniq_src = args.In<int64_t>(2, "uniq_src", {&u});
  const int64_t* row_id = args.In<int64_t>(3, "row_id", {&m});
  T* y = args.Out<T>(0, "Y", {&u, &d});
  if (u * d == 0) return;
  EmbedFwdKernel<T><<<Blocks(u * d), kThreads, 0, StreamOf(args)>>>(w, uniq_ptr, r, uniq_src, row_id, u, v, d, y);
  CheckLaunch("EmbedFwdKernel");
}

template <typename T>
void TypedEmbedBwd(const KernelArgs& args) {
  int64_t u = kUnbound, d = kUnbound, m = kUnbound, v = kUnbound, r1 = kUnbound;
  const T* dy = args.In<T>(0, "dY", {&u, &d});
  const int64_t* uniq_ptr = args.In<int64_t>(1, "uniq_ptr", {&r1});
  int64_t r = r1 - 1;
  if (r < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'uniq_ptr' must have at least one element");
  const int64_t* uniq_src = args.In<int64_t>(2, "uniq_src", {&u});
  const int64_t* row_id = args.In<int64_t>(3, "row_id", {&m});
  T* dw = args.Out<T>(0, "dW", {&r, &v, &d});
  cudaStream_t stream = StreamOf(args);
  CheckCuda(cudaMemsetAsync(dw, 0, r * v * d * sizeof(T), stream), "zero dW");
  if (u * d == 0) return;
  EmbedBwdKernel<T><<<Blocks(u * d), kThreads, 0, stream>>>(dy, uniq_ptr, r, uniq_src, row_id, u, v, d, dw);
  CheckLaunch("EmbedBwdKernel");
}

struct TypedEmbedFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_embed_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedEmbedFwd<T>(args);
  }
};

struct TypedEmbedBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_embed_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedEmbedBwd<T>(args);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(TypedEmbedFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(TypedEmbedBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
