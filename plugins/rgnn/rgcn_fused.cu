// rgnn.rgcn.* and rgnn.rgcn_embed.* on CUDA: the fused R-GCN layer over the segment layout
// (<tessel/ops/rgnn.h>), with the semantics of rgcn_fused_cpu.cc.
//
// Feature input (rgnn.rgcn.fwd/.bwd). The items (segments forward, pairs backward) are visited in an order
// that makes each relation's items contiguous (Sweep in fused_cuda.cuh): the host reads the runs' offsets
// and relations (one sync), sorts the nonempty runs by relation (a counting sort over Q runs, not over the
// items) and uploads that order (a second sync, so the host buffer may go). Then, chunk by chunk of at most
// kMaxChunkRows items:
//   1. MapRowsKernel: chunk row -> item id and relation (a binary search over the sorted runs);
//   2. an aggregation kernel, one thread per (row, column): forward A[row] = seg_norm[s] * sum_{e in s}
//      X[src(e)]; backward B[row] = sum_{e in u} seg_norm[seg(e)] dH[dst(e)] and the pair's input row X[src(u)];
//   3. one cuBLAS GEMM per relation slice of the chunk (at most R + chunks GEMMs per call, however many
//      blocks and runs the layout has): forward C = A W_r; backward dW[r] += X_u^T B (beta = 1 into the
//      zeroed dW) and G = B W_r^T;
//   4. ScatterAddKernel: H[seg_dst[s]] += C[row] (forward) or dX[pair_src[u]] += G[row] (backward) with
//      atomicAdd: a destination has one segment per relation (more with compaction off), a source row one
//      pair per relation, and these lie in different chunk slices.
// Scratch memory is two [chunk, width] tiles and the chunk's item ids and relations, bounded by kTileBytes
// per tile and kMaxChunkRows rows: never a pairs x width or edges x width tensor. cuBLAS rather than a
// hand-written fused tile kernel: grouping by relation makes the GEMMs large (the runs of one relation
// inside a dst block are short), and the kernels left to write are plain coalesced gathers.
//
// One-hot input (rgnn.rgcn_embed.*): no GEMM. One thread per (item, column) finds its run by binary search
// in the run offsets, sums the rows W[r][row_id[.]] (forward) or the pair gradient (backward) and adds the
// result atomically into H[seg_dst[s]] or dW[r][row_id[pair_src[u]]] (dW zeroed first).
//
// Sums in float are reordered against the CPU kernels (atomics, cuBLAS blocking); outputs are
// nondeterministic in the last bits. The kernels trust the layout's indices (the binder, rgcn_fused_args.h,
// checks them on the CPU only); the host checks only what it indexes itself (the run offsets and relations
// it sorts).
#include <algorithm>

#include "cuda_support.h"
#include "fused_cuda.cuh"
#include "rgcn_fused_args.h"

namespace tessel::kernels::rgnn {
namespace {

// The shared helpers (fused_cuda.cuh): chunks in relation order, row gathers and scatters.
using fused_cuda::ChunkRows, fused_cuda::DstSide, fused_cuda::Gather, fused_cuda::RelOuterAdd, fused_cuda::RowRelGemm,
    fused_cuda::RunOf, fused_cuda::ScatterAdd, fused_cuda::SrcSide, fused_cuda::Sweep, fused_cuda::ZeroAsync;

// The scratch bound: bytes per [rows, width] tile (ChunkRows with the larger of the two widths).
constexpr int64_t kTileBytes = int64_t{32} << 20;

// sum over the edges e of pair u of seg_norm[seg(e)] * dH[dst(e), col]: column col of the gradient that
// reaches the pair's (aggregated, normalised) input.
template <typename T>
__device__ T PairGradient(const SrcLayout& l, const T* dh, int64_t d, const T* seg_norm, const int32_t* seg_dst,
                          int64_t u, int64_t col) {
  T acc = 0;
  for (int64_t e = l.pair_edge[u]; e < l.pair_edge[u + 1]; ++e) {
    const int64_t s = l.edge_seg[e];
    acc += seg_norm[s] * dh[static_cast<int64_t>(seg_dst[s]) * d + col];
  }
  return acc;
}

// A[i] = seg_norm[s] * sum over the edges e of segment s = seg_of[i] of X[src(e)], A: [rows, k].
template <typename T>
__global__ void SegmentSumKernel(const T* x, int64_t k, const T* seg_norm, DstLayout l, const int64_t* seg_of,
                                 int64_t rows, T* a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * k; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = seg_of[i / k], col = i % k;
    T acc = 0;
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) acc += x[static_cast<int64_t>(l.edge_src[e]) * k + col];
    a[i] = seg_norm[s] * acc;
  }
}

// B[i] = the gradient of pair u = pair_of[i] (PairGradient), B: [rows, d].
template <typename T>
__global__ void PairGradientKernel(const T* dh, int64_t d, const T* seg_norm, const int32_t* seg_dst, SrcLayout l,
                                   const int64_t* pair_of, int64_t rows, T* b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * d; i += int64_t(gridDim.x) * blockDim.x) {
    b[i] = PairGradient(l, dh, d, seg_norm, seg_dst, pair_of[i / d], i % d);
  }
}

// H[seg_dst[s]] += seg_norm[s] * sum over the edges e of s of W[r(s)][row_id[src(e)]], one thread per
// (segment, column).
template <typename T>
__global__ void EmbedForwardKernel(const T* w, int64_t v, int64_t d, const int64_t* row_id, const T* seg_norm,
                                   DstLayout l, T* h) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.num_segs * d;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i / d, col = i % d;
    const T* w_r = w + static_cast<int64_t>(l.run_rel[RunOf(l.run_seg, l.num_runs, s)]) * v * d;
    T acc = 0;
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) acc += w_r[row_id[l.edge_src[e]] * d + col];
    atomicAdd(h + static_cast<int64_t>(l.seg_dst[s]) * d + col, seg_norm[s] * acc);
  }
}

// dW[r(u)][row_id[src(u)]] += PairGradient(u), one thread per (pair, column).
template <typename T>
__global__ void EmbedBackwardKernel(const T* dh, int64_t d, const T* seg_norm, const int32_t* seg_dst,
                                    const int64_t* row_id, int64_t v, SrcLayout l, T* dw) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.num_pairs * d;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t u = i / d, col = i % d;
    const int64_t rel = l.run_rel[RunOf(l.run_pair, l.num_runs, u)];
    const T g = PairGradient(l, dh, d, seg_norm, seg_dst, u, col);
    atomicAdd(dw + (rel * v + row_id[l.pair_src[u]]) * d + col, g);
  }
}

// dRows[u] = PairGradient(u), one thread per (pair, column): every element written once, no atomics.
template <typename T>
__global__ void EmbedBackwardRowsKernel(const T* dh, int64_t d, const T* seg_norm, const int32_t* seg_dst, SrcLayout l,
                                        T* rows) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.num_pairs * d;
       i += int64_t(gridDim.x) * blockDim.x) {
    rows[i] = PairGradient(l, dh, d, seg_norm, seg_dst, i / d, i % d);
  }
}

struct RgcnFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnFwdArgs<T>& in);
};

template <typename T>
void RgcnFwdCuda::Run(const KernelArgs& args, const RgcnFwdArgs<T>& in) {
  const int64_t k = in.k, r = in.r, d = in.d, n = in.n;
  const T* x = in.x;
  const T* w = in.w;
  const T* seg_norm = in.seg_norm;
  T* h = in.h;
  const DstLayout& l = in.l;
  cudaStream_t stream = StreamOf(args);
  ZeroAsync(h, n * d, sizeof(T), stream, "zero H");
  if (l.num_segs == 0 || k == 0 || d == 0) return;  // H = 0
  Sweep sw(args, DstSide(l), r, ChunkRows<T>(l.num_segs, std::max(k, d), kTileBytes), "dst", stream);
  const int64_t chunk = sw.chunk();
  Workspace<T> a(args, chunk * k), c(args, chunk * d);
  CublasPool::Lease blas = StateOf(args).blas.Acquire(stream);
  sw.ForEachChunk([&](int64_t rows) {
    SegmentSumKernel<T><<<Blocks(rows * k), kThreads, 0, stream>>>(x, k, seg_norm, l, sw.item_of(), rows, a.get());
    CheckLaunch("SegmentSumKernel");
    RowRelGemm(sw, rows, blas.get(), d, k, T(1), a.get(), k, w, k * d, d, false, T(0), c.get(), d, stream);
    ScatterAdd(c.get(), d, l.seg_dst, sw, rows, h, stream);
  });
}

struct RgcnBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnBwdArgs<T>& a);
};

template <typename T>
void RgcnBwdCuda::Run(const KernelArgs& args, const RgcnBwdArgs<T>& a) {
  const int64_t d = a.d, m = a.m, k = a.k, r = a.r;
  const T* dh = a.dh;
  const T* x = a.x;
  const T* w = a.w;
  const T* seg_norm = a.seg_norm;
  const int32_t* seg_dst = a.seg_dst;
  T* dx = a.dx;
  T* dw = a.dw;
  const SrcLayout& l = a.l;
  const bool want_dx = dx != nullptr;
  cudaStream_t stream = StreamOf(args);
  ZeroAsync(dw, r * k * d, sizeof(T), stream, "zero dW");
  if (want_dx) ZeroAsync(dx, m * k, sizeof(T), stream, "zero dX");
  if (l.num_pairs == 0 || k == 0 || d == 0) return;  // dW = 0, dX = 0
  Sweep sw(args, SrcSide(l), r, ChunkRows<T>(l.num_pairs, std::max(k, d), kTileBytes), "src", stream);
  const int64_t chunk = sw.chunk();
  Workspace<T> xg(args, chunk * k);  // the pairs' input rows, then G = B W_r^T
  Workspace<T> b(args, chunk * d);   // the pairs' gradients
  CublasPool::Lease blas = StateOf(args).blas.Acquire(stream);
  sw.ForEachChunk([&](int64_t rows) {
    PairGradientKernel<T>
        <<<Blocks(rows * d), kThreads, 0, stream>>>(dh, d, seg_norm, seg_dst, l, sw.item_of(), rows, b.get());
    CheckLaunch("PairGradientKernel");
    Gather(x, k, l.pair_src, sw, rows, xg.get(), stream);
    // dW[r] += X^T B over each relation's rows, then (same stream, so after that read) X's rows become G.
    RelOuterAdd(sw, rows, blas.get(), k, d, T(1), xg.get(), k, b.get(), d, dw, k * d, d, stream);
    if (want_dx) {
      RowRelGemm(sw, rows, blas.get(), k, d, T(1), b.get(), d, w, k * d, d, true, T(0), xg.get(), k, stream);
    }
    if (want_dx) ScatterAdd(xg.get(), k, l.pair_src, sw, rows, dx, stream);
  });
}

struct RgcnEmbedFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnEmbedFwdArgs<T>& a) {
    const int64_t d = a.d;
    const DstLayout& l = a.l;
    cudaStream_t stream = StreamOf(args);
    ZeroAsync(a.h, a.n * d, sizeof(T), stream, "zero H");
    if (l.num_segs * d == 0) return;
    EmbedForwardKernel<T><<<Blocks(l.num_segs * d), kThreads, 0, stream>>>(a.w, a.v, d, a.row_id, a.seg_norm, l, a.h);
    CheckLaunch("EmbedForwardKernel");
  }
};

struct RgcnEmbedBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnEmbedBwdArgs<T>& a) {
    const int64_t d = a.d;
    const SrcLayout& l = a.l;
    cudaStream_t stream = StreamOf(args);
    ZeroAsync(a.dw, a.r * a.v * d, sizeof(T), stream, "zero dW");
    if (l.num_pairs * d == 0) return;
    EmbedBackwardKernel<T>
        <<<Blocks(l.num_pairs * d), kThreads, 0, stream>>>(a.dh, d, a.seg_norm, a.seg_dst, a.row_id, a.v, l, a.dw);
    CheckLaunch("EmbedBackwardKernel");
  }
};

struct RgcnEmbedBwdRowsCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnEmbedBwdRowsArgs<T>& a) {
    const int64_t u = a.u, d = a.d;
    if (u * d == 0) return;
    EmbedBackwardRowsKernel<T>
        <<<Blocks(u * d), kThreads, 0, StreamOf(args)>>>(a.dh, d, a.seg_norm, a.seg_dst, a.l, a.rows);
    CheckLaunch("EmbedBackwardRowsKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(RgcnFwdCuda, RgcnFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(RgcnBwdCuda, RgcnBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(RgcnEmbedFwdCuda, RgcnEmbedFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(RgcnEmbedBwdCuda, RgcnEmbedBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(RgcnEmbedBwdRowsCuda, RgcnEmbedBwdRowsArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
