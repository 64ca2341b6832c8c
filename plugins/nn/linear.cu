// nn.linear.fwd/.bwd on CUDA (W is [O, K], out-major): in f32 and bf16 the forward is one cuBLASLt matmul
// with the bias in its epilogue, and nn.linear_gelu_tanh.fwd one with the bias and the GELU
// (CUBLASLT_EPILOGUE_GELU_AUX_BIAS, Pre its auxiliary output), where cuBLASLt offers an algorithm; otherwise
// (and in double) the products are cuBLAS GEMMs on the call's stream: the bias is broadcast into Y before a
// GEMM with beta = 1, and db's column sums run in a fixed order
// (each thread a strided set of rows in order, then the lanes of a column in order), so they are
// deterministic. Under bf16 the GEMMs take bf16 operands on the tensor cores with f32 sums (cublasGemmEx):
// Y = X W^T + b and dX are rounded to bf16 once, dW and db (f32) accumulate in f32, as linear_cpu.cc's
// reference does. Arguments: linear_args.h.
#include <type_traits>

#include "cuda_support.h"
#include "linear_args.h"
#include "linear_gelu.h"

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

// db[c] += sum over the rows of dY[:, c] (in Accumulate<T>); blockDim = (kColumns, kLanes).
template <typename T>
__global__ void AddColumnSumsKernel(const T* dy, int64_t n, int64_t o, Accumulate<T>* db) {
  using A = Accumulate<T>;
  __shared__ A part[kLanes][kColumns];
  const int64_t c = blockIdx.x * int64_t(kColumns) + threadIdx.x;
  A acc = A(0);
  if (c < o) {
    for (int64_t i = threadIdx.y; i < n; i += kLanes) acc += ToAccumulate(dy[i * o + c]);
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < o) {
    A sum = part[0][threadIdx.x];
    for (int lane = 1; lane < kLanes; ++lane) sum += part[lane][threadIdx.x];
    db[c] += sum;
  }
}

// cuBLASLt's scratch for the fused forwards.
constexpr int64_t kLtWorkspaceBytes = int64_t{4} << 20;

// The forward through cuBLASLt with its epilogue (Y = Pre = X W^T + b; with `gelu` also gelu = GELU(Pre)):
// false where it offers no algorithm (or for double, which takes the cuBLAS path), having queued nothing.
template <typename T>
bool FusedForward(const KernelArgs& args, const LinearFwdArgs<T>& a, T* gelu) {
  if constexpr (std::is_same_v<T, double>) {
    return false;
  } else {
    if (a.n * a.o * a.k == 0) return false;
    const Workspace<float> scratch(args, kLtWorkspaceBytes / int64_t{sizeof(float)});
    return LinearEpilogueLt(StreamOf(args), std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF, a.n, a.k, a.o, a.x,
                            a.w, a.b, a.y, gelu, scratch.get(), static_cast<size_t>(kLtWorkspaceBytes));
  }
}

struct LinearFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const LinearFwdArgs<T>& a) {
    const int64_t n = a.n, k = a.k, o = a.o;
    if (n * o == 0) return;
    if (FusedForward(args, a, static_cast<T*>(nullptr))) return;
    BroadcastBiasKernel<T><<<Blocks(n * o), kThreads, 0, StreamOf(args)>>>(a.b, n, o, a.y);
    CheckLaunch("BroadcastBiasKernel");
    if (k == 0) return;
    CublasPool::Lease blas = StateOf(args).blas.Acquire(StreamOf(args));
    using A = Accumulate<T>;
    GemmRowMajor(blas.get(), Trans::kNo, Trans::kYes, n, o, k, A(1), a.x, k, a.w, k, A(1), a.y, o);
  }
};

// The bias and the GELU in the matmul's epilogue where cuBLASLt offers them; else the forward, then the GELU.
struct LinearGeluTanhFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const LinearGeluTanhFwdArgs<T>& a) {
    const LinearFwdArgs<T>& l = a.linear;
    if (l.n * l.o == 0) return;
    if (FusedForward(args, l, a.y)) return;
    LinearFwdCuda::Run(args, l);
    GeluTanhForwardCuda(args, l.y, l.n * l.o, a.y);
  }
};

struct LinearBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const LinearBwdArgs<T>& a) {
    const int64_t n = a.n, k = a.k, o = a.o;
    using A = Accumulate<T>;
    const T* dy = a.dy;
    if (n == 0) return;  // dX is empty; nothing to add to dW and db
    CublasPool::Lease blas = StateOf(args).blas.Acquire(StreamOf(args));
    // o == 0 zeroes dX (GemmRowMajor's k = 0 case).
    if (a.want_dx) GemmRowMajor(blas.get(), Trans::kNo, Trans::kNo, n, k, o, A(1), dy, o, a.w, k, A(0), a.dx, k);
    if (o == 0) return;
    GemmRowMajor(blas.get(), Trans::kYes, Trans::kNo, o, k, n, A(1), dy, o, a.x, k, A(1), a.dw, k);
    if (a.db == nullptr) return;  // no bias
    const unsigned column_blocks = static_cast<unsigned>((o + kColumns - 1) / kColumns);
    AddColumnSumsKernel<T><<<column_blocks, dim3(kColumns, kLanes), 0, StreamOf(args)>>>(dy, n, o, a.db);
    CheckLaunch("AddColumnSumsKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(LinearFwdCuda, LinearFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(LinearBwdCuda, LinearBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(LinearGeluTanhFwdCuda, LinearGeluTanhFwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
