// rgnn.typed_linear.fwd/.bwd on CUDA: gather the compact rows' inputs once, then one cuBLAS GEMM per
// relation on contiguous row ranges. The relation offsets are read on the host (one sync per call).
// Arguments: typed_linear_args.h.
#include <vector>

#include "cuda_support.h"
#include "typed_linear_args.h"

namespace tessel::kernels::rgnn {
namespace {

template <typename T>
__global__ void GatherRowsKernel(const T* x, const int64_t* rows, int64_t n, int64_t k, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * k; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = x[rows[i / k] * k + i % k];
  }
}

// dX[uniq_src[u]] += G[u]: several relations may share a source row, hence the atomics.
template <typename T>
__global__ void ScatterAddRowsKernel(const T* g, const int64_t* rows, int64_t n, int64_t k, T* dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * k; i += int64_t(gridDim.x) * blockDim.x) {
    atomicAdd(dx + rows[i / k] * k + i % k, g[i]);
  }
}

template <typename T>
void Gather(const T* x, const int64_t* rows, int64_t n, int64_t k, T* out, cudaStream_t stream) {
  if (n * k == 0) return;
  GatherRowsKernel<T><<<Blocks(n * k), kThreads, 0, stream>>>(x, rows, n, k, out);
  CheckLaunch("GatherRowsKernel");
}

template <typename T>
void TypedLinearFwd(const KernelArgs& args, const TypedLinearFwdArgs<T>& a, CudaKernelState& state) {
  const int64_t k = a.k, r = a.r, d = a.d, u = a.u;
  const T* w = a.w;
  const int64_t* uniq_ptr = a.uniq_ptr;
  T* y = a.y;
  cudaStream_t stream = StreamOf(args);
  const std::vector<int64_t> ptr = CopyToHost(uniq_ptr, r + 1, stream);
  Workspace<T> gathered(args, u * k);
  Gather(a.x, a.uniq_src, u, k, gathered.get(), stream);
  CublasPool::Lease blas = state.blas.Acquire(stream);
  for (int64_t rel = 0; rel < r; ++rel) {
    const int64_t n = ptr[rel + 1] - ptr[rel];
    if (n <= 0) continue;
    GemmRowMajor(blas.get(), Trans::kNo, Trans::kNo, n, d, k, T(1), gathered.get() + ptr[rel] * k, k, w + rel * k * d,
                 d, T(0), y + ptr[rel] * d, d);
  }
}

template <typename T>
void TypedLinearBwd(const KernelArgs& args, const TypedLinearBwdArgs<T>& a, CudaKernelState& state) {
  const int64_t u = a.u, d = a.d, m = a.m, k = a.k, r = a.r;
  const T* dy = a.dy;
  const T* w = a.w;
  const int64_t* uniq_ptr = a.uniq_ptr;
  const int64_t* uniq_src = a.uniq_src;
  T* dx = a.dx;
  T* dw = a.dw;
  cudaStream_t stream = StreamOf(args);
  const std::vector<int64_t> ptr = CopyToHost(uniq_ptr, r + 1, stream);
  Workspace<T> rows(args, u * k);  // the gathered inputs, then G = dY_r W_r^T
  Gather(a.x, uniq_src, u, k, rows.get(), stream);
  CheckCuda(cudaMemsetAsync(dw, 0, r * k * d * sizeof(T), stream), "zero dW");
  CublasPool::Lease blas = state.blas.Acquire(stream);
  for (int64_t rel = 0; rel < r; ++rel) {
    const int64_t n = ptr[rel + 1] - ptr[rel];
    if (n <= 0) continue;
    GemmRowMajor(blas.get(), Trans::kYes, Trans::kNo, k, d, n, T(1), rows.get() + ptr[rel] * k, k, dy + ptr[rel] * d, d,
                 T(0), dw + rel * k * d, d);
  }
  if (dx == nullptr) return;
  for (int64_t rel = 0; rel < r; ++rel) {
    const int64_t n = ptr[rel + 1] - ptr[rel];
    if (n <= 0) continue;
    GemmRowMajor(blas.get(), Trans::kNo, Trans::kYes, n, k, d, T(1), dy + ptr[rel] * d, d, w + rel * k * d, d, T(0),
                 rows.get() + ptr[rel] * k, k);
  }
  CheckCuda(cudaMemsetAsync(dx, 0, m * k * sizeof(T), stream), "zero dX");
  if (u * k > 0) {
    ScatterAddRowsKernel<T><<<Blocks(u * k), kThreads, 0, stream>>>(rows.get(), uniq_src, u, k, dx);
    CheckLaunch("ScatterAddRowsKernel");
  }
}

struct TypedLinearFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedLinearFwdArgs<T>& a) {
    TypedLinearFwd<T>(args, a, StateOf(args));
  }
};

struct TypedLinearBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedLinearBwdArgs<T>& a) {
    TypedLinearBwd<T>(args, a, StateOf(args));
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(TypedLinearFwdCuda, TypedLinearFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(TypedLinearBwdCuda, TypedLinearBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
