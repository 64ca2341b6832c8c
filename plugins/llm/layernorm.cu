// llm.layernorm.fwd/.bwd on CUDA: one block per row (block reductions in a fixed order). The backward's
// dw and db are summed like the CPU kernel's: partial sums over fixed blocks of rows, then the blocks in
// order, so they are deterministic. Under bf16 each value is read widened to f32 and the row is normalised
// there, Y and dX are rounded once when stored, and the statistics, dw and db (and their partial sums) are
// f32 (A), as in layernorm_cpu.cc. Arguments: layernorm_args.h.
#include "cuda_rows.cuh"
#include "layernorm_args.h"

namespace tessel::kernels::llm {
namespace {

// Rows per partial sum of dw and db.
constexpr int64_t kBlockRows = 32;

template <typename T>
__global__ void LayernormFwdKernel(const T* x, const T* w, const T* b, Accumulate<T> eps, int64_t n, int64_t c, T* y,
                                   Accumulate<T>* mean, Accumulate<T>* rstd) {
  using A = Accumulate<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* xr = x + r * c;
    A sum = A(0);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sum += ToAccumulate(xr[j]);
    const A m = BlockReduce(sum, SumOp(), scratch) / A(c);
    A sq = A(0);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const A v = ToAccumulate(xr[j]);
      sq += (v - m) * (v - m);
    }
    const A s = A(1) / sqrt(BlockReduce(sq, SumOp(), scratch) / A(c) + eps);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      y[r * c + j] = FromAccumulate<T>((ToAccumulate(xr[j]) - m) * s * ToAccumulate(w[j]) + ToAccumulate(b[j]));
    }
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// x - mean of element (r, j), in A: from the input and the mean, or (Y - b) / (w rstd) from the output.
template <typename T>
struct Centred {
  const T* x;                 // X, or Y when b != nullptr
  const Accumulate<T>* mean;  // nullptr when from the output
  const T* w;
  const T* b;
  const Accumulate<T>* rstd;
  int64_t c;
  __device__ Accumulate<T> operator()(int64_t r, int64_t j) const {
    const Accumulate<T> v = ToAccumulate(x[r * c + j]);
    return b == nullptr ? v - mean[r] : (v - ToAccumulate(b[j])) / (ToAccumulate(w[j]) * rstd[r]);
  }
};

// dX += the gradient through the normalisation: read in A, added there, rounded once when stored.
template <typename T>
__global__ void LayernormBwdRowsKernel(const T* dy, Centred<T> xc, const T* w, const Accumulate<T>* rstd, int64_t n,
                                       int64_t c, T* dx) {
  using A = Accumulate<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const A s = rstd[r];
    const T* dyr = dy + r * c;
    A dnorm = A(0), dnorm_xhat = A(0);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const A wj = ToAccumulate(w[j]), g = ToAccumulate(dyr[j]);
      dnorm += wj * g;
      dnorm_xhat += wj * g * (xc(r, j) * s);
    }
    const A dnorm_mean = BlockReduce(dnorm, SumOp(), scratch) / A(c);
    const A dnorm_norm_mean = BlockReduce(dnorm_xhat, SumOp(), scratch) / A(c);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const A xhat = xc(r, j) * s;
      const A wj = ToAccumulate(w[j]), g = ToAccumulate(dyr[j]);
      dx[r * c + j] =
          FromAccumulate<T>(ToAccumulate(dx[r * c + j]) + (wj * g - dnorm_mean - xhat * dnorm_norm_mean) * s);
    }
  }
}

// partial[k] = (dw, db) over rows [k kBlockRows, (k + 1) kBlockRows), in A: one thread per (block, column).
template <typename T>
__global__ void LayernormBwdPartialKernel(const T* dy, Centred<T> xc, const Accumulate<T>* rstd, int64_t n, int64_t c,
                                          Accumulate<T>* partial) {
  using A = Accumulate<T>;
  const int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < blocks * c;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / c, j = i % c;
    A dw = A(0), db = A(0);
    for (int64_t r = k * kBlockRows; r < n && r < (k + 1) * kBlockRows; ++r) {
      const A g = ToAccumulate(dy[r * c + j]);
      dw += xc(r, j) * rstd[r] * g;
      db += g;
    }
    partial[k * 2 * c + j] = dw;
    partial[k * 2 * c + c + j] = db;
  }
}

// dw, db += the partial sums, added in block order (all in A).
template <typename T>
__global__ void LayernormBwdReduceKernel(const Accumulate<T>* partial, int64_t blocks, int64_t c, Accumulate<T>* dw,
                                         Accumulate<T>* db) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < 2 * c; j += int64_t(gridDim.x) * blockDim.x) {
    Accumulate<T> sum = Accumulate<T>(0);
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
    const Accumulate<T>* rstd = a.rstd;
    if (n == 0 || c == 0) return;
    // A zero in w is the caller's to avoid (the op's contract); on the GPU it shows as inf/nan in dX rather
    // than a host-side check that would need w copied back.
    const Centred<T> xc{a.x, a.mean, w, a.b, rstd, c};
    cudaStream_t stream = StreamOf(args);
    LayernormBwdRowsKernel<T><<<RowBlocks(n), kRowThreads, 0, stream>>>(dy, xc, w, rstd, n, c, a.dx);
    CheckLaunch("LayernormBwdRowsKernel");
    const int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
    Workspace<Accumulate<T>> partial(args, blocks * 2 * c);
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

TESSEL_DEFINE_KERNEL_BF16(LayernormFwdCuda, LayernormFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(LayernormBwdCuda, LayernormBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(LayernormBwdFromOutputCuda, LayernormBwdFromOutputArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm
