// llm.layernorm.fwd/.bwd on CUDA: one block per row (block reductions in a fixed order). The backward's
// dw and db are summed like the CPU kernel's: partial sums over fixed blocks of rows, then the blocks in
// order, so they are deterministic. Arguments: layernorm_args.h.
#include "cuda_rows.cuh"
#include "layernorm_args.h"

namespace tessel::kernels::llm {
namespace {

// Rows per partial sum of dw and db.
constexpr int64_t kBlockRows = 32;

template <typename T>
__global__ void LayernormFwdKernel(const T* x, const T* w, const T* b, T eps, int64_t n, int64_t c, T* y, T* mean,
                                   T* rstd) {
  __shared__ T scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* xr = x + r * c;
    T sum = T(0);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sum += xr[j];
    const T m = BlockReduce(sum, SumOp(), scratch) / T(c);
    T sq = T(0);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sq += (xr[j] - m) * (xr[j] - m);
    const T s = T(1) / sqrt(BlockReduce(sq, SumOp(), scratch) / T(c) + eps);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) y[r * c + j] = (xr[j] - m) * s * w[j] + b[j];
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// x - mean of element (r, j): from the input and the mean, or (Y - b) / (w rstd) from the output.
template <typename T>
struct Centred {
  const T* x;     // X, or Y when b != nullptr
  const T* mean;  // nullptr when from the output
  const T* w;
  const T* b;
  const T* rstd;
  int64_t c;
  __device__ T operator()(int64_t r, int64_t j) const {
    const T v = x[r * c + j];
    return b == nullptr ? v - mean[r] : (v - b[j]) / (w[j] * rstd[r]);
  }
};

template <typename T>
__global__ void LayernormBwdRowsKernel(const T* dy, Centred<T> xc, const T* w, const T* rstd, int64_t n, int64_t c,
                                       T* dx) {
  __shared__ T scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T s = rstd[r];
    const T* dyr = dy + r * c;
    T dnorm = T(0), dnorm_xhat = T(0);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      dnorm += w[j] * dyr[j];
      dnorm_xhat += w[j] * dyr[j] * (xc(r, j) * s);
    }
    const T dnorm_mean = BlockReduce(dnorm, SumOp(), scratch) / T(c);
    const T dnorm_norm_mean = BlockReduce(dnorm_xhat, SumOp(), scratch) / T(c);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const T xhat = xc(r, j) * s;
      dx[r * c + j] += (w[j] * dyr[j] - dnorm_mean - xhat * dnorm_norm_mean) * s;
    }
  }
}

// partial[k] = (dw, db) over rows [k kBlockRows, (k + 1) kBlockRows): one thread per (block, column).
template <typename T>
__global__ void LayernormBwdPartialKernel(const T* dy, Centred<T> xc, const T* rstd, int64_t n, int64_t c, T* partial) {
  const int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < blocks * c;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / c, j = i % c;
    T dw = T(0), db = T(0);
    for (int64_t r = k * kBlockRows; r < n && r < (k + 1) * kBlockRows; ++r) {
      const T g = dy[r * c + j];
      dw += xc(r, j) * rstd[r] * g;
      db += g;
    }
    partial[k * 2 * c + j] = dw;
    partial[k * 2 * c + c + j] = db;
  }
}

template <typename T>
__global__ void LayernormBwdReduceKernel(const T* partial, int64_t blocks, int64_t c, T* dw, T* db) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < 2 * c; j += int64_t(gridDim.x) * blockDim.x) {
    T sum = T(0);
    for (int64_t k = 0; k < blocks; ++k) sum += partial[k * 2 * c + j];
    if (j < c) {
      dw[j] += sum;
    } else {
      db[j - c] += sum;
    }
  }
}

struct LayernormFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const LayernormFwdArgs<T>& a) {
    if (a.n == 0) return;
    LayernormFwdKernel<T>
        <<<RowBlocks(a.n), kRowThreads, 0, StreamOf(args)>>>(a.x, a.w, a.b, a.eps, a.n, a.c, a.y, a.mean, a.rstd);
    CheckLaunch("LayernormFwdKernel");
  }
};

// Both backward ops (see Centred).
struct LayernormBackwardCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const LayernormBackwardArgs<T>& a) {
    const int64_t n = a.n, c = a.c;
    const T* dy = a.dy;
    const T* w = a.w;
    const T* rstd = a.rstd;
    if (n == 0 || c == 0) return;
    // A zero in w is the caller's to avoid (the op's contract); on the GPU it shows as inf/nan in dX rather
    // than a host-side check that would need w copied back.
    const Centred<T> xc{a.x, a.mean, w, a.b, rstd, c};
    cudaStream_t stream = StreamOf(args);
    LayernormBwdRowsKernel<T><<<RowBlocks(n), kRowThreads, 0, stream>>>(dy, xc, w, rstd, n, c, a.dx);
    CheckLaunch("LayernormBwdRowsKernel");
    const int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
    Workspace<T> partial(args, blocks * 2 * c);
    LayernormBwdPartialKernel<T><<<Blocks(blocks * c), kThreads, 0, stream>>>(dy, xc, rstd, n, c, partial.get());
    CheckLaunch("LayernormBwdPartialKernel");
    LayernormBwdReduceKernel<T><<<Blocks(2 * c), kThreads, 0, stream>>>(partial.get(), blocks, c, a.dw, a.db);
    CheckLaunch("LayernormBwdReduceKernel");
  }
};

// The two backward ops, one body.
struct LayernormBwdCuda : LayernormBackwardCuda {};
struct LayernormBwdFromOutputCuda : LayernormBackwardCuda {};

}  // namespace

TESSEL_DEFINE_KERNEL(LayernormFwdCuda, LayernormFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(LayernormBwdCuda, LayernormBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(LayernormBwdFromOutputCuda, LayernormBwdFromOutputArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm
