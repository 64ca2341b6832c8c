// rgnn.typed_gate.fwd/.bwd and rgnn.block_diag.fwd/.bwd on CUDA, trusting node_type. Elementwise ops are
// one thread per element in grid-stride loops; the gate's backward gives each row to a warp (coalesced
// columns, a shuffle reduction of the row's dY . (O - X)), sums the rows per type in shared memory when
// the types fit, and adds each block's sums to dskip with atomics. Arguments: small_ops_args.h.
#include "cuda_support.h"
#include "small_ops_args.h"

namespace tessel::kernels::rgnn {
namespace {

constexpr int kWarp = 32;
// Types whose per-block sums fit in shared memory (16 KiB in double); more go straight to global atomics.
constexpr int64_t kMaxSharedTypes = 2048;
// Blocks of the gate's backward: each adds at most G atomics to dskip at its end.
constexpr int64_t kMaxGateBlocks = 1024;

template <typename T>
__device__ T Sigmoid(T s) {
  return T(1) / (T(1) + exp(-s));
}

template <typename T>
__global__ void GateFwdKernel(const T* o, const T* x, const T* skip, const int32_t* node_type, int64_t n, int64_t d,
                              T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * d; i += int64_t(gridDim.x) * blockDim.x) {
    const T b = Sigmoid(skip[node_type[i / d]]);
    y[i] = b * o[i] + (T(1) - b) * x[i];
  }
}

// blockDim.x is a multiple of kWarp; every lane of a warp works on the same row, so the shuffles are
// warp-uniform. With shared_sums, the dynamic shared memory holds g sums of T.
template <typename T>
__global__ void GateBwdKernel(const T* dy, const T* o, const T* x, const T* skip, const int32_t* node_type, int64_t n,
                              int64_t d, int64_t g, bool shared_sums, T* d_o, T* dx, T* dskip) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* sums = reinterpret_cast<T*>(shared_bytes);
  if (shared_sums) {
    for (int64_t t = threadIdx.x; t < g; t += blockDim.x) sums[t] = T(0);
    __syncthreads();
  }
  const int lane = threadIdx.x % kWarp;
  const int64_t num_warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; i < n; i += num_warps) {
    const int32_t t = node_type[i];
    const T b = Sigmoid(skip[t]), a = T(1) - b;
    T dot = T(0);
    for (int64_t c = lane; c < d; c += kWarp) {
      const int64_t e = i * d + c;
      const T grad = dy[e];
      d_o[e] = b * grad;
      dx[e] = a * grad;
      dot += grad * (o[e] - x[e]);
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) dot += __shfl_down_sync(0xffffffffu, dot, offset);
    if (lane == 0) {
      dot *= b * a;
      if (shared_sums) {
        atomicAdd(sums + t, dot);
      } else {
        atomicAdd(dskip + t, dot);
      }
    }
  }
  if (shared_sums) {
    __syncthreads();
    for (int64_t t = threadIdx.x; t < g; t += blockDim.x) {
      if (sums[t] != T(0)) atomicAdd(dskip + t, sums[t]);
    }
  }
}

// W[rel, row, col] = blocks[rel, row / P, row % P, col % Q] when row / P == col / Q, else 0.
template <typename T>
__global__ void BlockDiagFwdKernel(const T* blocks, int64_t r, int64_t b, int64_t p, int64_t q, T* w) {
  const int64_t k = b * p, d = b * q, total = r * k * d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % d, row = (i / d) % k, rel = i / (k * d), blk = row / p;
    w[i] = col / q == blk ? blocks[((rel * b + blk) * p + row % p) * q + col % q] : T(0);
  }
}

template <typename T>
__global__ void BlockDiagBwdKernel(const T* dw, int64_t r, int64_t b, int64_t p, int64_t q, T* dblocks) {
  const int64_t k = b * p, d = b * q, total = r * b * p * q;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % q, row = (i / q) % p, blk = (i / (p * q)) % b, rel = i / (b * p * q);
    dblocks[i] = dw[(rel * k + blk * p + row) * d + blk * q + col];
  }
}

struct TypedGateFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedGateFwdArgs<T>& a) {
    const int64_t n = a.n, d = a.d;
    if (n * d == 0) return;
    GateFwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(a.o, a.x, a.skip, a.node_type, n, d, a.y);
    CheckLaunch("GateFwdKernel");
  }
};

struct TypedGateBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedGateBwdArgs<T>& a) {
    const int64_t n = a.n, d = a.d, g = a.g;
    T* dskip = a.dskip;
    cudaStream_t stream = StreamOf(args);
    if (g > 0) CheckCuda(cudaMemsetAsync(dskip, 0, g * sizeof(T), stream), "zero dskip");
    if (n == 0) return;
    constexpr int64_t kWarpsPerBlock = kThreads / kWarp;
    const int64_t wanted = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const unsigned blocks = static_cast<unsigned>(wanted < kMaxGateBlocks ? wanted : kMaxGateBlocks);
    const bool shared_sums = g <= kMaxSharedTypes;
    const size_t shared_bytes = shared_sums ? static_cast<size_t>(g) * sizeof(T) : 0;
    GateBwdKernel<T><<<blocks, kThreads, shared_bytes, stream>>>(a.dy, a.o, a.x, a.skip, a.node_type, n, d, g,
                                                                 shared_sums, a.d_o, a.dx, dskip);
    CheckLaunch("GateBwdKernel");
  }
};

struct BlockDiagFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const BlockDiagFwdArgs<T>& a) {
    const BlockDiagShape& s = a.shape;
    if (s.r * s.k * s.d == 0) return;
    BlockDiagFwdKernel<T><<<Blocks(s.r * s.k * s.d), kThreads, 0, StreamOf(args)>>>(a.blocks, s.r, s.b, s.p, s.q, a.w);
    CheckLaunch("BlockDiagFwdKernel");
  }
};

struct BlockDiagBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const BlockDiagBwdArgs<T>& a) {
    const BlockDiagShape& s = a.shape;
    if (s.r * s.b * s.p * s.q == 0) return;
    BlockDiagBwdKernel<T>
        <<<Blocks(s.r * s.b * s.p * s.q), kThreads, 0, StreamOf(args)>>>(a.dw, s.r, s.b, s.p, s.q, a.dblocks);
    CheckLaunch("BlockDiagBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(TypedGateFwdCuda, TypedGateFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(TypedGateBwdCuda, TypedGateBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(BlockDiagFwdCuda, BlockDiagFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(BlockDiagBwdCuda, BlockDiagBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
