// rgnn.typed_linear.fwd/.bwd on CUDA: gather the compact rows' inputs once, then one cuBLAS GEMM per
// relation on contiguous row ranges. The relation offsets are read on the host (one sync per call).
#include <vector>

#include "cuda_support.h"
#include "kernels.h"

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
void TypedLinearFwd(const KernelArgs& args, CudaKernelState& state) {
  int64_t m = kUnbound, k = kUnbound, r = kUnbound, d = kUnbound, u = kUnbound;
  const T* x = args.In<T>(0, "X", {&m, &k});
  const T* w = args.In<T>(1, "W", {&r, &k, &d});
  int64_t r1 = r + 1;
  const int64_t* uniq_ptr = args.In<int64_t>(2, "uniq_ptr", {&r1});
  const int64_t* uniq_src = args.In<int64_t>(3, "uniq_src", {&u});
  T* y = args.Out<T>(0, "Y", {&u, &d});
  cudaStream_t stream = StreamOf(args);
  const std::vector<int64_t> ptr = CopyToHost(uniq_ptr, r + 1, stream);
  Workspace<T> gathered(args, u * k);
  Gather(x, uniq_src, u, k, gathered.get(), stream);
  CublasPool::Lease blas = state.blas.Acquire(stream);
  for (int64_t rel = 0; rel < r; ++rel) {
    const int64_t n = ptr[rel + 1] - ptr[rel];
    if (n <= 0) continue;
    GemmRowMajor(blas.get(), Trans::kNo, Trans::kNo, n, d, k, T(1), gathered.get() + ptr[rel] * k, k, w + rel * k * d,
                 d, T(0), y + ptr[rel] * d, d);
  }
}

template <typename T>
void TypedLinearBwd(const KernelArgs& args, CudaKernelState& state) {
  int64_t u = kUnbound, d = kUnbound, m = kUnbound, k = kUnbound, r = kUnbound;
  const T* dy = args.In<T>(0, "dY", {&u, &d});
  const T* x = args.In<T>(1, "X", {&m, &k});
  const T* w = args.In<T>(2, "W", {&r, &k, &d});
  int64_t r1 = r + 1;
  const int64_t* uniq_ptr = args.In<int64_t>(3, "uniq_ptr", {&r1});
  const int64_t* uniq_src = args.In<int64_t>(4, "uniq_src", {&u});
  int64_t dx_rows = kUnbound;
  T* dx = args.Out<T>(0, "dX", {&dx_rows, &k});
  if (dx_rows != 0 && dx_rows != m)
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'dX' must have 0 rows or as many as X");
  T* dw = args.Out<T>(1, "dW", {&r, &k, &d});
  cudaStream_t stream = StreamOf(args);
  const std::vector<int64_t> ptr = CopyToHost(uniq_ptr, r + 1, stream);
  Workspace<T> rows(args, u * k);  // the gathered inputs, then G = dY_r W_r^T
  Gather(x, uniq_src, u, k, rows.get(), stream);
  CheckCuda(cudaMemsetAsync(dw, 0, r * k * d * sizeof(T), stream), "zero dW");
  CublasPool::Lease blas = state.blas.Acquire(stream);
  for (int64_t rel = 0; rel < r; ++rel) {
    const int64_t n = ptr[rel + 1] - ptr[rel];
    if (n <= 0) continue;
    GemmRowMajor(blas.get(), Trans::kYes, Trans::kNo, k, d, n, T(1), rows.get() + ptr[rel] * k, k, dy + ptr[rel] * d, d,
                 T(0), dw + rel * k * d, d);
  }
  if (dx_rows == 0) return;
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
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_linear_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedLinearFwd<T>(args, StateOf(args));
  }
};

struct TypedLinearBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_linear_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedLinearBwd<T>(args, StateOf(args));
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(TypedLinearFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(TypedLinearBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
