// nn.add, nn.cast and nn.sum_squares on CUDA. sum_squares runs a fixed grid (the same partition of the elements
// for every call of a size): each block sums its grid-stride slice in double and reduces it in shared
// memory to one partial, then one block reduces the partials, so the result is deterministic. Arguments:
// elementwise_args.h.
#include "cuda_support.h"
#include "elementwise_args.h"

namespace tessel::kernels::nn {
namespace {

constexpr int kSumBlocks = 256;
constexpr int kSumThreads = 256;

template <typename T>
__global__ void CastKernel(const Accumulate<T>* x, int64_t n, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = FromAccumulate<T>(x[i]);
  }
}

template <typename T>
__global__ void AddKernel(const T* a, const T* b, int64_t n, T* c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    c[i] = FromAccumulate<T>(ToAccumulate(a[i]) + ToAccumulate(b[i]));  // bf16: the f32 sum, rounded once
  }
}

// Tree reduction of one value per thread (blockDim.x == kSumThreads); the sum lands in part[0].
__device__ void ReduceBlock(double* part, double value) {
  part[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kSumThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
    __syncthreads();
  }
}

template <typename T>
__global__ void SumSquaresPartialKernel(const T* x, int64_t n, double* partial) {
  __shared__ double part[kSumThreads];
  double acc = 0;
  for (int64_t i = blockIdx.x * int64_t(kSumThreads) + threadIdx.x; i < n; i += int64_t(kSumBlocks) * kSumThreads) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  ReduceBlock(part, acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

__global__ void SumPartialsKernel(const double* partial, double* s) {
  __shared__ double part[kSumThreads];
  double acc = 0;
  for (int i = threadIdx.x; i < kSumBlocks; i += kSumThreads) acc += partial[i];
  ReduceBlock(part, acc);
  if (threadIdx.x == 0) *s = part[0];
}

struct AddCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AddArgs<T>& t) {
    if (t.n == 0) return;
    AddKernel<T><<<Blocks(t.n), kThreads, 0, StreamOf(args)>>>(t.a, t.b, t.n, t.c);
    CheckLaunch("AddKernel");
  }
};

struct CastCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const CastArgs<T>& a) {
    if (a.n == 0) return;
    CastKernel<T><<<Blocks(a.n), kThreads, 0, StreamOf(args)>>>(a.x, a.n, a.y);
    CheckLaunch("CastKernel");
  }
};

struct SumSquaresCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const SumSquaresArgs<T>& a) {
    cudaStream_t stream = StreamOf(args);
    Workspace<double> partial(args, kSumBlocks);
    SumSquaresPartialKernel<T><<<kSumBlocks, kSumThreads, 0, stream>>>(a.x, a.n, partial.get());
    CheckLaunch("SumSquaresPartialKernel");
    SumPartialsKernel<<<1, kSumThreads, 0, stream>>>(partial.get(), a.s);
    CheckLaunch("SumPartialsKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(AddCuda, AddArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(CastCuda, CastArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(SumSquaresCuda, SumSquaresArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
