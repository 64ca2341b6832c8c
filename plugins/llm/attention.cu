// llm.attention.fwd/.bwd on CUDA, f32 and f64: FlashAttention-2's tiling of causal attention, the
// algorithm of the CPU reference (attention_cpu.cc), on CUDA cores in the op's type (no tensor cores; bf16
// runs on the tensor cores in attention_tc.cu, in the same two-pass structure). A block works on square
// tiles of kTile queries by kTile keys (64 in f32, 32 in f64, so that a block's tiles fit in shared memory
// at hs = 128) with kLanesPerRow threads per row of a tile. Every tile of qkv, dY and Y is staged through
// shared memory by coalesced loads (consecutive threads read consecutive elements of a row), zero-filled
// past the end of the sequence; tiles wholly above the diagonal are skipped, and the diagonal tile is
// masked per element.
//  - forward, one block per (b, h, query tile i), over the key tiles j = 0 .. i: S = scale Q_i K_j^T, the
//    online softmax (running row max m and sum l; the accumulator O, in registers, rescaled by
//    exp(m_old - m_new)), O += P V_j; then Y_i = O / l and lse_i = m + log(l).
//  - backward, in two passes that each own what they write (so no atomics and no zeroed buffer):
//    the query pass, one block per (b, h, query tile i): D_i = dY_i . Y_i (kept for the key pass), then
//    over the key tiles j <= i: P = exp(scale Q_i K_j^T - lse_i), dS = P (dY_i V_j^T - D_i),
//    dQ_i += scale dS K_j; dQ_i is written once at the end.
//    the key pass, one block per (b, h, key tile j), over the query tiles i >= j: P and dS recomputed,
//    dV_j += P^T dY_i, dK_j += scale dS^T Q_i, in registers; written once at the end.
//    FlashAttention-2 proper adds dQ from the key pass with atomics, whose order varies from run to run.
//    The separate query pass recomputes the two score products (7 tile products per pair of tiles
//    instead of 5) and in exchange every sum runs in a fixed order, as Tessel promises deterministic
//    results.
// hs = C / H is a runtime value up to kMaxHeadSize; a larger one is refused (invalid-argument). Every
// element of dqkv is written. Dynamic shared memory per block, f32: 65 KiB (forward) to 98 KiB (key
// pass) at hs = 64, up to 162 KiB at hs = 128 (AllowSharedMemory raises the 48 KiB default; sm_90 allows
// 227).
// Written for correctness first: the products read about one shared-memory value per multiply-add (no
// register tiling, no tensor cores). Arguments: attention_args.h.
#include <string>
#include <type_traits>

#include "attention_tc.h"
#include "attention_tiles.cuh"

namespace tessel::kernels::llm {
namespace {

// Threads per row of a tile: the 4 lanes of a row sit in one warp, which holds 8 whole rows.
constexpr int kLanesPerRow = 4;

// The tile edge by the type a block computes and stages its tiles in, Accumulate<T>.
// The largest block, the key pass at hs = 128, holds four tiles of rows (Q, dY, K, V) and two of scores
// (P, dS): 162 KiB in float at 64, 146 KiB in double at 32.
template <typename T>
struct TileOf {
  static constexpr int kSize = sizeof(Accumulate<T>) == 4 ? 64 : 32;
};

// Copies the `valid` rows of a tile (row r at src + r * stride, hs wide) to dst [kTile][ld], with zeros
// in the rows after them. The caller synchronises before the tile
// is read.
template <typename T, int kTile>
__device__ void LoadTile(const T* src, int64_t stride, int valid, int hs, int ld, Accumulate<T>* dst) {
  for (int idx = threadIdx.x; idx < kTile * hs; idx += blockDim.x) {
    const int r = idx / hs, d = idx - r * hs;
    dst[r * ld + d] = r < valid ? ToAccumulate(src[r * stride + d]) : Accumulate<T>(0);
  }
}

// The reverse, for the `valid` rows.
template <typename T>
__device__ void StoreTile(const Accumulate<T>* src, int ld, int valid, int hs, T* dst, int64_t stride) {
  for (int idx = threadIdx.x; idx < valid * hs; idx += blockDim.x) {
    const int r = idx / hs, d = idx - r * hs;
    dst[r * stride + d] = FromAccumulate<T>(src[r * ld + d]);
  }
}

// Reduces v over the kLanesPerRow lanes of a row (every lane of the warp must call it). Butterfly order:
// every lane gets the same bits.
template <typename T, typename Op>
__device__ T RowReduce(T v, Op op) {
  for (int offset = 1; offset < kLanesPerRow; offset *= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Shared memory: tiles of rows are [kTile][ld] with an odd ld (hs or hs + 1), so the rows a warp reads at
// once fall in different banks; tiles of scores are [kTile][kTile + 1].
inline int RowStride(int64_t hs) { return static_cast<int>(hs | 1); }

// Bytes of a block's tiles and vectors, which hold Accumulate<T>.
template <typename T, int kTile>
size_t SharedBytes(int64_t hs, int row_tiles, int score_tiles, int vectors) {
  return sizeof(Accumulate<T>) *
         (static_cast<size_t>(row_tiles) * kTile * RowStride(hs) +
          static_cast<size_t>(score_tiles) * kTile * (kTile + 1) + static_cast<size_t>(vectors) * kTile);
}

// Block = (b, h, query tile i); thread = (row r of the tile, lane), owning the scores of keys lane + 4k
// and the columns d = lane + 4k of O. Shared: Q_i (then Y_i), K_j, V_j, P.
template <typename T, int kTile, int kDims>
__global__ void __launch_bounds__(kTile* kLanesPerRow)
    AttentionFwdKernel(const T* qkv, Dims dm, Accumulate<T> scale, T* y, Accumulate<T>* lse) {
  using A = Accumulate<T>;
  constexpr int kCols = kTile / kLanesPerRow;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const int hs = static_cast<int>(dm.hs), ld = static_cast<int>(dm.hs | 1), lds = kTile + 1;
  A* sq = reinterpret_cast<A*>(shared_bytes);
  A* sk = sq + kTile * ld;
  A* sv = sk + kTile * ld;
  A* sp = sv + kTile * ld;
  const BlockTile tile = TileOfBlock<kTile>(dm);
  const int r = threadIdx.x / kLanesPerRow, lane = threadIdx.x % kLanesPerRow;
  const int64_t i = tile.t0 + r;  // this thread's query (past the sequence in a partial tile's last rows)
  const T* base = qkv + tile.bi * dm.s * dm.q + tile.hi * dm.hs;  // q of (b, 0, h); k at +c, v at +2c
  LoadTile<T, kTile>(base + tile.t0 * dm.q, dm.q, tile.count, hs, ld, sq);
  A o[kDims] = {};
  A m = A(-INFINITY), l = A(0);
  for (int64_t j0 = 0; j0 <= tile.t0; j0 += kTile) {  // key tiles up to the diagonal one
    const int cols = static_cast<int>(dm.s - j0 < kTile ? dm.s - j0 : kTile);
    __syncthreads();  // the previous K_j, V_j and P are read
    LoadTile<T, kTile>(base + j0 * dm.q + dm.c, dm.q, cols, hs, ld, sk);
    LoadTile<T, kTile>(base + j0 * dm.q + 2 * dm.c, dm.q, cols, hs, ld, sv);
    __syncthreads();
    A sc[kCols] = {};
    for (int d = 0; d < hs; ++d) {
      const A qd = sq[r * ld + d];
#pragma unroll
      for (int k = 0; k < kCols; ++k) sc[k] += qd * sk[(lane + kLanesPerRow * k) * ld + d];
    }
    A tile_max = A(-INFINITY);
#pragma unroll
    for (int k = 0; k < kCols; ++k) {
      const int64_t j = j0 + lane + kLanesPerRow * k;
      sc[k] = j <= i && j < dm.s ? scale * sc[k] : A(-INFINITY);
      tile_max = MaxOp()(tile_max, sc[k]);
    }
    // Key j0 <= i is in every row's view (j0 < S too), so m_new is finite; on the first tile m = -inf and
    // alpha = 0.
    const A m_new = MaxOp()(m, RowReduce(tile_max, MaxOp()));
    const A alpha = exp(m - m_new);
    A tile_sum = A(0);
#pragma unroll
    for (int k = 0; k < kCols; ++k) {
      const A p = sc[k] == A(-INFINITY) ? A(0) : exp(sc[k] - m_new);
      sp[r * lds + lane + kLanesPerRow * k] = p;
      tile_sum += p;
    }
    l = alpha * l + RowReduce(tile_sum, SumOp());
    m = m_new;
    __syncwarp();  // row r of P, written by its 4 lanes, all in this warp
#pragma unroll
    for (int k = 0; k < kDims; ++k) o[k] *= alpha;
    for (int j = 0; j < cols; ++j) {
      const A p = sp[r * lds + j];
#pragma unroll
      for (int k = 0; k < kDims; ++k) {
        const int d = lane + kLanesPerRow * k;
        if (d < hs) o[k] += p * sv[j * ld + d];
      }
    }
  }
  __syncthreads();  // every thread is done with Q_i: Y_i takes its place
  const A inv_sum = A(1) / l;
#pragma unroll
  for (int k = 0; k < kDims; ++k) {
    const int d = lane + kLanesPerRow * k;
    if (d < hs) sq[r * ld + d] = o[k] * inv_sum;
  }
  if (lane == 0 && r < tile.count) lse[(tile.bi * dm.h + tile.hi) * dm.s + i] = m + log(l);
  __syncthreads();
  StoreTile(sq, ld, tile.count, hs, y + (tile.bi * dm.s + tile.t0) * dm.c + tile.hi * dm.hs, dm.c);
}

// The query pass. Block = (b, h, query tile i); thread = (row r, lane) as in the forward, owning the
// columns d = lane + 4k of dQ. Shared: Q_i, dY_i, K_j (Y_i before the first key tile), V_j, dS.
template <typename T, int kTile, int kDims>
__global__ void __launch_bounds__(kTile* kLanesPerRow)
    AttentionBwdQueryKernel(const T* dy, const T* qkv, const T* y, const Accumulate<T>* lse, Dims dm,
                            Accumulate<T> scale, T* dqkv, Accumulate<T>* dvec) {
  using A = Accumulate<T>;
  constexpr int kCols = kTile / kLanesPerRow;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const int hs = static_cast<int>(dm.hs), ld = static_cast<int>(dm.hs | 1), lds = kTile + 1;
  A* sq = reinterpret_cast<A*>(shared_bytes);
  A* sdy = sq + kTile * ld;
  A* sk = sdy + kTile * ld;
  A* sv = sk + kTile * ld;
  A* sds = sv + kTile * ld;
  const BlockTile tile = TileOfBlock<kTile>(dm);
  const int r = threadIdx.x / kLanesPerRow, lane = threadIdx.x % kLanesPerRow;
  const int64_t i = tile.t0 + r;
  const T* base = qkv + tile.bi * dm.s * dm.q + tile.hi * dm.hs;
  const int64_t y_tile = (tile.bi * dm.s + tile.t0) * dm.c + tile.hi * dm.hs;  // dY_i and Y_i
  LoadTile<T, kTile>(base + tile.t0 * dm.q, dm.q, tile.count, hs, ld, sq);
  LoadTile<T, kTile>(dy + y_tile, dm.c, tile.count, hs, ld, sdy);
  LoadTile<T, kTile>(y + y_tile, dm.c, tile.count, hs, ld, sk);
  __syncthreads();
  A dot = A(0);
#pragma unroll
  for (int k = 0; k < kDims; ++k) {
    const int d = lane + kLanesPerRow * k;
    if (d < hs) dot += sdy[r * ld + d] * sk[r * ld + d];
  }
  const A big_d = RowReduce(dot, SumOp());
  const int64_t row = (tile.bi * dm.h + tile.hi) * dm.s + i;  // of lse and D
  const A row_lse = r < tile.count ? lse[row] : A(0);
  if (lane == 0 && r < tile.count) dvec[row] = big_d;
  A dq[kDims] = {};
  for (int64_t j0 = 0; j0 <= tile.t0; j0 += kTile) {
    const int cols = static_cast<int>(dm.s - j0 < kTile ? dm.s - j0 : kTile);
    __syncthreads();  // Y_i (before the first key tile), or the previous K_j, V_j and dS, are read
    LoadTile<T, kTile>(base + j0 * dm.q + dm.c, dm.q, cols, hs, ld, sk);
    LoadTile<T, kTile>(base + j0 * dm.q + 2 * dm.c, dm.q, cols, hs, ld, sv);
    __syncthreads();
    A sc[kCols] = {}, dp[kCols] = {};
    for (int d = 0; d < hs; ++d) {
      const A qd = sq[r * ld + d], dyd = sdy[r * ld + d];
#pragma unroll
      for (int k = 0; k < kCols; ++k) {
        const int key = lane + kLanesPerRow * k;
        sc[k] += qd * sk[key * ld + d];
        dp[k] += dyd * sv[key * ld + d];
      }
    }
#pragma unroll
    for (int k = 0; k < kCols; ++k) {
      const int64_t j = j0 + lane + kLanesPerRow * k;
      const A p = j <= i && j < dm.s ? exp(scale * sc[k] - row_lse) : A(0);
      sds[r * lds + lane + kLanesPerRow * k] = p * (dp[k] - big_d);
    }
    __syncwarp();  // row r of dS, written by its 4 lanes, all in this warp
    for (int j = 0; j < cols; ++j) {
      const A ds = sds[r * lds + j];
#pragma unroll
      for (int k = 0; k < kDims; ++k) {
        const int d = lane + kLanesPerRow * k;
        if (d < hs) dq[k] += ds * sk[j * ld + d];
      }
    }
  }
  __syncthreads();  // every thread is done with Q_i: dQ_i takes its place
#pragma unroll
  for (int k = 0; k < kDims; ++k) {
    const int d = lane + kLanesPerRow * k;
    if (d < hs) sq[r * ld + d] = scale * dq[k];
  }
  __syncthreads();
  StoreTile(sq, ld, tile.count, hs, dqkv + (tile.bi * dm.s + tile.t0) * dm.q + tile.hi * dm.hs, dm.q);
}

// The key pass. Block = (b, h, key tile j); thread = (key row r of the tile, lane), owning the scores of
// queries lane + 4k and the columns d = lane + 4k of dK and dV. Shared: K_j, V_j (then dK_j, dV_j), Q_i,
// dY_i, P and dS ([key][query]), lse_i and D_i.
template <typename T, int kTile, int kDims>
__global__ void __launch_bounds__(kTile* kLanesPerRow)
    AttentionBwdKeyKernel(const T* dy, const T* qkv, const Accumulate<T>* lse, const Accumulate<T>* dvec, Dims dm,
                          Accumulate<T> scale, T* dqkv) {
  using A = Accumulate<T>;
  constexpr int kRows = kTile / kLanesPerRow;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const int hs = static_cast<int>(dm.hs), ld = static_cast<int>(dm.hs | 1), lds = kTile + 1;
  A* sk = reinterpret_cast<A*>(shared_bytes);
  A* sv = sk + kTile * ld;
  A* sq = sv + kTile * ld;
  A* sdy = sq + kTile * ld;
  A* sp = sdy + kTile * ld;
  A* sds = sp + kTile * lds;
  A* slse = sds + kTile * lds;
  A* sd = slse + kTile;
  const BlockTile tile = TileOfBlock<kTile>(dm);
  const int r = threadIdx.x / kLanesPerRow, lane = threadIdx.x % kLanesPerRow;
  const int64_t j = tile.t0 + r;  // this thread's key
  const T* base = qkv + tile.bi * dm.s * dm.q + tile.hi * dm.hs;
  const T* dy_seq = dy + tile.bi * dm.s * dm.c + tile.hi * dm.hs;
  const int64_t seq = (tile.bi * dm.h + tile.hi) * dm.s;  // of lse and D
  LoadTile<T, kTile>(base + tile.t0 * dm.q + dm.c, dm.q, tile.count, hs, ld, sk);
  LoadTile<T, kTile>(base + tile.t0 * dm.q + 2 * dm.c, dm.q, tile.count, hs, ld, sv);
  A dk[kDims] = {}, dv[kDims] = {};
  for (int64_t i0 = tile.t0; i0 < dm.s; i0 += kTile) {  // query tiles from the diagonal one
    const int rows = static_cast<int>(dm.s - i0 < kTile ? dm.s - i0 : kTile);
    __syncthreads();  // the previous Q_i, dY_i, P and dS are read
    LoadTile<T, kTile>(base + i0 * dm.q, dm.q, rows, hs, ld, sq);
    LoadTile<T, kTile>(dy_seq + i0 * dm.c, dm.c, rows, hs, ld, sdy);
    for (int t = threadIdx.x; t < kTile; t += blockDim.x) {
      slse[t] = t < rows ? lse[seq + i0 + t] : A(0);
      sd[t] = t < rows ? dvec[seq + i0 + t] : A(0);
    }
    __syncthreads();
    A sc[kRows] = {}, dp[kRows] = {};
    for (int d = 0; d < hs; ++d) {
      const A kd = sk[r * ld + d], vd = sv[r * ld + d];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const int query = lane + kLanesPerRow * k;
        sc[k] += sq[query * ld + d] * kd;
        dp[k] += sdy[query * ld + d] * vd;
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const int query = lane + kLanesPerRow * k;
      const int64_t i = i0 + query;
      const A p = j <= i && i < dm.s && j < dm.s ? exp(scale * sc[k] - slse[query]) : A(0);
      sp[r * lds + query] = p;
      sds[r * lds + query] = p * (dp[k] - sd[query]);
    }
    __syncwarp();  // row r of P and dS, written by its 4 lanes, all in this warp
    for (int query = 0; query < rows; ++query) {
      const A p = sp[r * lds + query], ds = sds[r * lds + query];
#pragma unroll
      for (int k = 0; k < kDims; ++k) {
        const int d = lane + kLanesPerRow * k;
        if (d < hs) {
          dv[k] += p * sdy[query * ld + d];
          dk[k] += ds * sq[query * ld + d];
        }
      }
    }
  }
  __syncthreads();  // every thread is done with K_j and V_j: dK_j and dV_j take their places
#pragma unroll
  for (int k = 0; k < kDims; ++k) {
    const int d = lane + kLanesPerRow * k;
    if (d < hs) {
      sk[r * ld + d] = scale * dk[k];
      sv[r * ld + d] = dv[k];
    }
  }
  __syncthreads();
  T* out = dqkv + (tile.bi * dm.s + tile.t0) * dm.q + tile.hi * dm.hs;
  StoreTile(sk, ld, tile.count, hs, out + dm.c, dm.q);
  StoreTile(sv, ld, tile.count, hs, out + 2 * dm.c, dm.q);
}

// Calls f(std::integral_constant<int, kDims>), kDims = the columns of a row each lane owns: 16 up to
// hs = 64 (GPT-2's), else 32. Refuses hs above kMaxHeadSize.
template <typename F>
void DispatchHeadSize(const KernelArgs& args, int64_t hs, F&& f) {
  CheckHeadSize(args, hs);
  if (hs <= 64) {
    f(std::integral_constant<int, 64 / kLanesPerRow>());
  } else {
    f(std::integral_constant<int, kMaxHeadSize / kLanesPerRow>());
  }
}

struct AttentionFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionFwdArgs<T>& a) {
    if constexpr (std::is_same_v<T, Bf16>) {
      AttentionFwdTensorCores(args, a);
    } else {
      RunCudaCores(args, a);
    }
  }
  template <typename T>
  static void RunCudaCores(const KernelArgs& args, const AttentionFwdArgs<T>& a) {
    using A = Accumulate<T>;
    constexpr int kTile = TileOf<T>::kSize;
    const A scale = A(1) / std::sqrt(static_cast<A>(a.shape.hs));
    DispatchHeadSize(args, a.shape.hs, [&](auto dims) {  // refuses a head size over the limit, even if B S = 0
      constexpr int kDims = decltype(dims)::value;
      if (a.shape.b * a.shape.s == 0) return;
      const auto kernel = AttentionFwdKernel<T, kTile, kDims>;
      const size_t shared = SharedBytes<T, kTile>(a.shape.hs, 3, 1, 0);  // Q, K, V; P
      AllowSharedMemory(kernel, shared);
      kernel<<<TileBlocks<kTile>(a.shape), kTile * kLanesPerRow, shared, StreamOf(args)>>>(a.qkv, DimsOf(a.shape),
                                                                                           scale, a.y, a.lse);
      CheckLaunch("AttentionFwdKernel");
    });
  }
};

struct AttentionBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionBwdArgs<T>& a) {
    if constexpr (std::is_same_v<T, Bf16>) {
      AttentionBwdTensorCores(args, a);
    } else {
      RunCudaCores(args, a);
    }
  }
  template <typename T>
  static void RunCudaCores(const KernelArgs& args, const AttentionBwdArgs<T>& a) {
    using A = Accumulate<T>;
    constexpr int kTile = TileOf<T>::kSize;
    cudaStream_t stream = StreamOf(args);
    const A scale = A(1) / std::sqrt(static_cast<A>(a.shape.hs));
    DispatchHeadSize(args, a.shape.hs, [&](auto dims) {  // refuses a head size over the limit, even if B S = 0
      constexpr int kDims = decltype(dims)::value;
      if (a.shape.b * a.shape.s == 0) return;
      Workspace<A> dvec(args, a.shape.b * a.shape.h * a.shape.s);
      const auto query_kernel = AttentionBwdQueryKernel<T, kTile, kDims>;
      const size_t query_shared = SharedBytes<T, kTile>(a.shape.hs, 4, 1, 0);  // Q, dY, K, V; dS
      AllowSharedMemory(query_kernel, query_shared);
      query_kernel<<<TileBlocks<kTile>(a.shape), kTile * kLanesPerRow, query_shared, stream>>>(
          a.dy, a.qkv, a.y, a.lse, DimsOf(a.shape), scale, a.dqkv, dvec.get());
      CheckLaunch("AttentionBwdQueryKernel");
      const auto key_kernel = AttentionBwdKeyKernel<T, kTile, kDims>;
      const size_t key_shared = SharedBytes<T, kTile>(a.shape.hs, 4, 2, 2);  // K, V, Q, dY; P, dS; lse, D
      AllowSharedMemory(key_kernel, key_shared);
      key_kernel<<<TileBlocks<kTile>(a.shape), kTile * kLanesPerRow, key_shared, stream>>>(
          a.dy, a.qkv, a.lse, dvec.get(), DimsOf(a.shape), scale, a.dqkv);
      CheckLaunch("AttentionBwdKeyKernel");
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(AttentionFwdCuda, AttentionFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(AttentionBwdCuda, AttentionBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm
