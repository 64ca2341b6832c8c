// llm.encoder.fwd/.bwd on CUDA (arguments: encoder_args.h). The tokens stay on the device and are not
// checked against V on the host (the CPU kernel's binder does that); a token outside [0, V) is never read
// through: its row of Y becomes NaN, and the backward skips it. The backward sums in the CPU kernel's
// order, deterministically. For dwte it first sorts the positions by token, stably, with a counting sort
// over K chunks of positions (one warp per chunk counts, then scatters, its positions in order); then one
// thread per (t, column) adds that column of the token's dY rows into dwte in increasing position, so each
// element of dwte sees the same additions in the same order as encoder_cpu.cc. For dwpe one thread per
// (t, column) walks the sequences in order. Under bf16 the forward adds the two rows in f32 and rounds each
// output once, and the backward adds each widened dY into dwte and dwpe, which are f32 (A), as in
// encoder_cpu.cc.
#include <algorithm>
#include <cstdint>

#include "cuda_rows.cuh"
#include "encoder_args.h"

namespace tessel::kernels::llm {
namespace {

template <typename T>
__global__ void EncoderFwdKernel(const T* wte, const T* wpe, const int32_t* tokens, int64_t n, int64_t s, int64_t c,
                                 int64_t v, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * c; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / c, j = i % c;
    const int32_t token = tokens[r];
    y[i] = FromAccumulate<T>(token >= 0 && token < v
                                 ? ToAccumulate(wte[token * c + j]) + ToAccumulate(wpe[(r % s) * c + j])
                                 : QuietNaN(Accumulate<T>(0)));
  }
}

// The counting sort of the dwte backward. The N positions split into K chunks, chunk k being
// [k N / K, (k + 1) N / K); a [K, V] matrix (chunk-major) holds each chunk's count of each token, and
// later that chunk's next slot for the token. Index is int32 where N allows, else int64.
constexpr int kWarp = 32;
// The most cells of the count matrix (8 MiB of int32), and the most chunks.
constexpr int64_t kCountCells = int64_t{1} << 21;
constexpr int64_t kMaxChunks = 256;
// Threads of the single-block scan over the tokens, and the consecutive values each one scans per tile.
constexpr int kScanThreads = 1024;
constexpr int kScanItems = 4;

// The lanes of the calling warp whose key equals this lane's (all 32 lanes must call it), and the
// highest of them, which alone writes the group's cell.
__device__ inline unsigned Peers(int32_t key) { return __match_any_sync(0xffffffffu, key); }
__device__ inline int Leader(unsigned peers) { return 31 - __clz(static_cast<int>(peers)); }

// One warp per chunk (grid-stride over chunks) reads its positions 32 at a time, in order, and adds to
// count[k, t] the number of them with token t. Lanes with the same token add once, through the highest.
template <typename Index>
__global__ void EncoderSortCountKernel(const int32_t* __restrict__ tokens, int64_t n, int64_t v, int64_t chunks,
                                       Index* count) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t k = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; k < chunks; k += warps) {
    const int64_t end = (k + 1) * n / chunks;
    for (int64_t base = k * n / chunks; base < end; base += kWarp) {
      const int64_t r = base + lane;
      const int32_t token = r < end ? tokens[r] : -1;
      const bool valid = token >= 0 && token < v;
      const unsigned peers = Peers(valid ? token : -1);
      if (valid && lane == Leader(peers)) count[k * v + token] += __popc(peers);
      __syncwarp();
    }
  }
}

// One thread per token (grid-stride): replaces count[k, t] by the exclusive prefix over k of the token's
// counts, and writes the token's total to start[t].
template <typename Index>
__global__ void EncoderSortChunkScanKernel(int64_t v, int64_t chunks, Index* __restrict__ count,
                                           Index* __restrict__ start) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < v; t += int64_t(gridDim.x) * blockDim.x) {
    Index sum = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      const Index cell = count[k * v + t];
      count[k * v + t] = sum;
      sum += cell;
    }
    start[t] = sum;
  }
}

// One block of kScanThreads: replaces start[0, V) by its exclusive prefix sum, tile by tile, and writes the
// total to start[V]. So the token t's positions go to [start[t], start[t + 1]) of the sorted order.
template <typename Index>
__global__ void __launch_bounds__(kScanThreads) EncoderSortTokenScanKernel(int64_t v, Index* __restrict__ start) {
  __shared__ Index warp_sum[kScanThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  Index carry = 0;
  for (int64_t tile = 0; tile < v; tile += int64_t(blockDim.x) * kScanItems) {
    const int64_t first = tile + int64_t(threadIdx.x) * kScanItems;
    Index item[kScanItems];
    Index own = 0;
    for (int i = 0; i < kScanItems; ++i) {
      item[i] = first + i < v ? start[first + i] : 0;
      own += item[i];
    }
    Index inclusive = own;  // over the lanes of the warp
    for (int offset = 1; offset < kWarp; offset *= 2) {
      const Index up = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += up;
    }
    if (lane == kWarp - 1) warp_sum[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {  // warp_sum becomes inclusive over the warps
      Index w = lane < warps ? warp_sum[lane] : 0;
      for (int offset = 1; offset < kWarp; offset *= 2) {
        const Index up = __shfl_up_sync(0xffffffffu, w, offset);
        if (lane >= offset) w += up;
      }
      if (lane < warps) warp_sum[lane] = w;
    }
    __syncthreads();
    Index prefix = carry + (warp > 0 ? warp_sum[warp - 1] : 0) + (inclusive - own);
    for (int i = 0; i < kScanItems; ++i) {
      if (first + i < v) start[first + i] = prefix;
      prefix += item[i];
    }
    carry += warp_sum[warps - 1];
    __syncthreads();
  }
  if (threadIdx.x == 0) start[v] = carry;
}

// One warp per chunk, as in the count: each position r with a valid token t goes to sorted[start[t] +
// count[k, t] + its rank among the lanes with token t], and the highest such lane then advances count[k, t].
// So the sort is stable: a token's positions are in increasing order.
template <typename Index>
__global__ void EncoderSortScatterKernel(const int32_t* __restrict__ tokens, int64_t n, int64_t v, int64_t chunks,
                                         const Index* __restrict__ start, Index* count, Index* __restrict__ sorted) {
  const int lane = threadIdx.x % kWarp;
  const unsigned below = (1u << lane) - 1u;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t k = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; k < chunks; k += warps) {
    const int64_t end = (k + 1) * n / chunks;
    for (int64_t base = k * n / chunks; base < end; base += kWarp) {
      const int64_t r = base + lane;
      const int32_t token = r < end ? tokens[r] : -1;
      const bool valid = token >= 0 && token < v;
      const unsigned peers = Peers(valid ? token : -1);
      const Index slot = valid ? start[token] + count[k * v + token] + __popc(peers & below) : 0;
      __syncwarp();
      if (valid) {
        if (lane == Leader(peers)) count[k * v + token] += __popc(peers);
        sorted[slot] = static_cast<Index>(r);
      }
      __syncwarp();
    }
  }
}

// Blocks over tokens (grid-stride), threads over columns (grid-stride across blockIdx.y): for each (t, j)
// of a token with positions, dwte[t, j] plus dY[r, j] for its positions r in increasing order, one add at a
// time in A. The threads of a block read each dY row coalesced.
template <typename T, typename Index>
__global__ void EncoderBwdWteKernel(const T* __restrict__ dy, const Index* __restrict__ start,
                                    const Index* __restrict__ sorted, int64_t c, int64_t v,
                                    Accumulate<T>* __restrict__ dwte) {
  for (int64_t t = blockIdx.x; t < v; t += gridDim.x) {
    const Index begin = start[t], end = start[t + 1];
    if (begin == end) continue;
    for (int64_t j = blockIdx.y * int64_t(blockDim.x) + threadIdx.x; j < c; j += int64_t(gridDim.y) * blockDim.x) {
      Accumulate<T> acc = dwte[t * c + j];
      for (Index i = begin; i < end; ++i) acc += ToAccumulate(dy[int64_t(sorted[i]) * c + j]);
      dwte[t * c + j] = acc;
    }
  }
}

// The dwte backward of n = B S positions: the sort into workspace, then the sum. K = min(256, N / 32, 2^21 /
// V), at least 1: chunks of at least a warp of positions, and a count matrix of at most 2^21 cells (8 MiB
// of int32) however large V is (K = 41 at V = 50304).
template <typename T, typename Index>
void EncoderBwdWte(const KernelArgs& args, const EncoderBwdArgs<T>& a, int64_t n, cudaStream_t stream) {
  const int64_t v = a.v, c = a.c;
  const int64_t chunks = std::max<int64_t>(1, std::min({kMaxChunks, n / kWarp, kCountCells / v}));
  Workspace<Index> count(args, chunks * v), start(args, v + 1), sorted(args, n);
  CheckCuda(cudaMemsetAsync(count.get(), 0, sizeof(Index) * chunks * v, stream), "cudaMemsetAsync(token counts)");
  const unsigned chunk_blocks = Blocks(chunks * kWarp);
  EncoderSortCountKernel<Index><<<chunk_blocks, kThreads, 0, stream>>>(a.tokens, n, v, chunks, count.get());
  CheckLaunch("EncoderSortCountKernel");
  EncoderSortChunkScanKernel<Index><<<Blocks(v), kThreads, 0, stream>>>(v, chunks, count.get(), start.get());
  CheckLaunch("EncoderSortChunkScanKernel");
  EncoderSortTokenScanKernel<Index><<<1, kScanThreads, 0, stream>>>(v, start.get());
  CheckLaunch("EncoderSortTokenScanKernel");
  EncoderSortScatterKernel<Index>
      <<<chunk_blocks, kThreads, 0, stream>>>(a.tokens, n, v, chunks, start.get(), count.get(), sorted.get());
  CheckLaunch("EncoderSortScatterKernel");
  const dim3 grid(RowBlocks(v), static_cast<unsigned>(std::min<int64_t>((c + kThreads - 1) / kThreads, 65535)));
  EncoderBwdWteKernel<T, Index><<<grid, kThreads, 0, stream>>>(a.dy, start.get(), sorted.get(), c, v, a.dwte);
  CheckLaunch("EncoderBwdWteKernel");
}

template <typename T>
__global__ void EncoderBwdWpeKernel(const T* dy, int64_t b, int64_t s, int64_t c, Accumulate<T>* dwpe) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s * c; i += int64_t(gridDim.x) * blockDim.x) {
    Accumulate<T> acc = dwpe[i];
    for (int64_t bi = 0; bi < b; ++bi) acc += ToAccumulate(dy[bi * s * c + i]);
    dwpe[i] = acc;
  }
}

struct EncoderFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const EncoderFwdArgs<T>& a) {
    const int64_t b = a.b, s = a.s, c = a.c;
    if (b * s * c == 0) return;
    EncoderFwdKernel<T>
        <<<Blocks(b * s * c), kThreads, 0, StreamOf(args)>>>(a.wte, a.wpe, a.tokens, b * s, s, c, a.v, a.y);
    CheckLaunch("EncoderFwdKernel");
  }
};

struct EncoderBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const EncoderBwdArgs<T>& a) {
    const int64_t b = a.b, s = a.s, c = a.c;
    if (b * s * c == 0) return;
    cudaStream_t stream = StreamOf(args);
    if (a.v > 0) {  // with V = 0 every token is outside [0, V)
      if (b * s <= INT32_MAX) {
        EncoderBwdWte<T, int32_t>(args, a, b * s, stream);
      } else {
        EncoderBwdWte<T, int64_t>(args, a, b * s, stream);
      }
    }
    EncoderBwdWpeKernel<T><<<Blocks(s * c), kThreads, 0, stream>>>(a.dy, b, s, c, a.dwpe);
    CheckLaunch("EncoderBwdWpeKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(EncoderFwdCuda, EncoderFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(EncoderBwdCuda, EncoderBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm
