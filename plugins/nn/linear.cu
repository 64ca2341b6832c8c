// nn.linear.fwd/.bwd on CUDA (W is [O, K], out-major): the products are cuBLAS GEMMs on the call's stream;
// the bias is broadcast into Y before a GEMM with beta = 1, and db's column sums run in a fixed order
// (each thread a strided set of rows in order, then the lanes of a column in order), so they are
// deterministic.
#include "cuda_support.h"
#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

// Column sums: a block covers kColumns columns with kLanes threads each.
constexpr int kColumns = 32;
constexpr int kLanes = 16;

template <typename T>
__global__ void BroadcastBiasKernel(const T* b, int64_t n, int64_t o, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * o; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = b[i % o];
  }
}

// db[c] += sum over the rows of dY[:, c]; blockDim = (kColumns, kLanes).
template <typename T>
__global__ void AddColumnSumsKernel(const T* dy, int64_t n, int64_t o, T* db) {
  __shared__ T part[kLanes][kColumns];
  const int64_t c = blockIdx.x * int64_t(kColumns) + threadIdx.x;
  T acc = T(0);
  if (c < o) {
    for (int64_t i = threadIdx.y; i < n; i += kLanes) acc += dy[i * o + c];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < o) {
    T sum = part[0][threadIdx.x];
    for (int lane = 1; lane < kLanes; ++lane) sum += part[lane][threadIdx.x];
    db[c] += sum;
  }
}

struct LinearFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, k = kUnbound, o = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &k});
    const T* w = args.In<T>(1, "W", {&o, &k});
    const T* b = args.In<T>(2, "b", {&o});
    T* y = args.Out<T>(0, "Y", {&n, &o});
    if (n * o == 0) return;
    BroadcastBiasKernel<T><<<Blocks(n * o), kThreads, 0, StreamOf(args)>>>(b, n, o, y);
    CheckLaunch("BroadcastBiasKernel");
    if (k == 0) return;
    CublasPool::Lease blas = StateOf(args).blas.Acquire(StreamOf(args));
    GemmRowMajor(blas.get(), Trans::kNo, Trans::kYes, n, o, k, T(1), x, k, w, k, T(1), y, o);
  }
};

struct LinearBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, k = kUnbound, o = kUnbound, dx_rows = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &o});
    const T* x = args.In<T>(1, "X", {&n, &k});
    const T* w = args.In<T>(2, "W", {&o, &k});
    T* dx = args.Out<T>(0, "dX", {&dx_rows, &k});
    T* dw = args.Out<T>(1, "dW", {&o, &k});
    T* db = args.Out<T>(2, "db", {&o});
    const bool want_dx = LinearBwdWantsDx(dx_rows, n);
    if (n == 0) return;  // dX is empty; nothing to add to dW and db
    CublasPool::Lease blas = StateOf(args).blas.Acquire(StreamOf(args));
    // o == 0 zeroes dX (GemmRowMajor's k = 0 case).
    if (want_dx) GemmRowMajor(blas.get(), Trans::kNo, Trans::kNo, n, k, o, T(1), dy, o, w, k, T(0), dx, k);
    if (o == 0) return;
    GemmRowMajor(blas.get(), Trans::kYes, Trans::kNo, o, k, n, T(1), dy, o, x, k, T(1), dw, k);
    const unsigned column_blocks = static_cast<unsigned>((o + kColumns - 1) / kColumns);
    AddColumnSumsKernel<T><<<column_blocks, dim3(kColumns, kLanes), 0, StreamOf(args)>>>(dy, n, o, db);
    CheckLaunch("AddColumnSumsKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(LinearFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(LinearBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
