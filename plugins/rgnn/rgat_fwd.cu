// rgnn.rgat.fwd and rgnn.rgat_embed.fwd on CUDA: the forward of the fused RGAT layer over the segment
// layout (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "RGAT"), with the semantics of rgat_fwd_cpu.cc; the
// backward is rgat_bwd.cu.
//
// Nothing of size edges x width or pairs x width exists whole. The logits are two scalars per head, s_src
// per pair and s_dst per segment (outputs of the forward, inputs of the backward); every per-edge value
// (score, alpha) is recomputed from them and the per-row softmax statistics where it is needed. Work that
// needs a relation's weights runs over the items (segments or pairs) in relation order, in chunks of at
// most kMaxChunkRows rows (Sweep in fused_cuda.cuh: one host sync reads the runs, a counting sort orders
// them by relation, a second sync uploads the order), so each chunk is a few relation slices and each
// slice one cuBLAS GEMM per head (or per relation). Scratch is a handful of [chunk, width] tiles from the
// host's workspace (Workspace<T>), bounded by kChunkBytes together.
//
// Features:
//   logits  reorder on: wa[r,h] = W_{r,h} att[r,h] (a K-vector; ProjectAttentionKernel), then one warp per
//           item dots X[row] with wa. Reorder off: per chunk of each side, Z = X[row] W_r (GEMM), then
//           att . Z_h per (row, head).
//   stats   one thread per (segment, head): the segment's max score, folded into row_max with an atomic
//           compare-and-swap max; then exp(score - row_max) summed into row_sum with atomicAdd; rows without
//           an edge get max = sum = 0.
//   heads   per chunk of segments: A_h[row] = sum_{e in s} alpha(e, h) X[src(e)] (one warp per (row, head),
//           lanes over K), C_h = A_h W_{r,h} (one GEMM per slice and head), heads[seg_dst] += C (atomics: a
//           destination has one segment per relation). Out = heads (concat) or their mean.
// One-hot input (rgat_embed): z(v, r) is row (r, row_id[v]) of the table, so the logits and the
// aggregation are per-(item, head) warps with no GEMM.
//
// Sums in float are reordered against the CPU kernels (atomics, cuBLAS blocking, warp reductions); outputs
// are nondeterministic in the last bits. The kernels trust the layout's indices (the binder, rgat_args.h,
// checks them on the CPU only); the host checks only what it indexes itself (the run offsets and relations
// it sorts).
#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda_support.h"
#include "fused_cuda.cuh"
#include "rgat_args.h"
#include "rgat_cuda.cuh"

namespace tessel::kernels::rgnn {
namespace {

// The shared helpers (fused_cuda.cuh, rgat_cuda.cuh): chunks in relation order, warps, row gathers and
// scatters, the softmax.
using fused_cuda::AtomicMax, fused_cuda::ChunkRows, fused_cuda::DstSide, fused_cuda::Exp, fused_cuda::FillKernel,
    fused_cuda::Gather, fused_cuda::GlobalWarp, fused_cuda::HeavyBlocks, fused_cuda::HeavyList, fused_cuda::HeavyUnits,
    fused_cuda::kHeavyEdges, fused_cuda::ListHeavy, fused_cuda::kWarp, fused_cuda::Lane, fused_cuda::RunOf,
    fused_cuda::RowRelGemm, fused_cuda::ScatterAdd, fused_cuda::Side, fused_cuda::SrcSide, fused_cuda::Sweep,
    fused_cuda::WarpBlocks, fused_cuda::WarpDot, fused_cuda::WarpStride, fused_cuda::ZeroAsync;
using rgat_cuda::Attention, rgat_cuda::kVec, rgat_cuda::ProjectAttentionKernel;

// s[item, h] = X[row(item)] . wa[r(item), h], one warp per item.
template <typename T>
__global__ void ProjectedScoresKernel(Side side, const T* x, int64_t k, const T* wa, int64_t heads, T* s) {
  for (int64_t it = GlobalWarp(); it < side.num_items; it += WarpStride()) {
    const int64_t rel = side.run_rel[RunOf(side.run_item, side.num_runs, it)];
    const T* row = x + static_cast<int64_t>(side.item_row[it]) * k;
    for (int64_t h = 0; h < heads; ++h) {
      const T v = WarpDot(k, row, wa + (rel * heads + h) * k);
      if (Lane() == 0) s[it * heads + h] = v;
    }
  }
}

// s[item_of[i], h] = att[rel_of[i], h] . Z[i]_h, one thread per (row, head); Z: [rows, F].
template <typename T>
__global__ void TileScoresKernel(const T* z, const T* att, int64_t heads, int64_t dh, const int64_t* item_of,
                                 const int32_t* rel_of, int64_t rows, T* s) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * heads;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / heads, h = i % heads;
    const T* zh = z + row * f + h * dh;
    const T* a = att + (static_cast<int64_t>(rel_of[row]) * heads + h) * dh;
    T acc = T(0);
    for (int64_t c = 0; c < dh; ++c) acc += zh[c] * a[c];
    s[item_of[row] * heads + h] = acc;
  }
}

// s[item, h] = att[r, h] . table[r, row_id[row(item)]]_h, one thread per (item, head).
template <typename T>
__global__ void EmbedScoresKernel(Side side, const T* table, int64_t v, const int64_t* row_id, const T* att,
                                  int64_t heads, int64_t dh, T* s) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < side.num_items * heads;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t it = i / heads, h = i % heads;
    const int64_t rel = side.run_rel[RunOf(side.run_item, side.num_runs, it)];
    const T* z = table + (rel * v + row_id[side.item_row[it]]) * f + h * dh;
    const T* a = att + (rel * heads + h) * dh;
    T acc = T(0);
    for (int64_t c = 0; c < dh; ++c) acc += z[c] * a[c];
    s[i] = acc;
  }
}

// row_max[seg_dst[s], h] = max(it, the max score over segment s's edges), one thread per (segment, head).
template <typename T>
__global__ void SegmentMaxKernel(DstLayout l, const int32_t* edge_pair, Attention<T> at, T neg_inf, T* row_max) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.num_segs * at.heads;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i / at.heads, h = i % at.heads;
    T mx = neg_inf;
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
      const T score = at.Score(at.Raw(edge_pair[e], s, h));
      if (!(score <= mx)) mx = score;
    }
    AtomicMax(row_max + static_cast<int64_t>(l.seg_dst[s]) * at.heads + h, mx);
  }
}

// row_sum[seg_dst[s], h] += sum over segment s's edges of exp(score - row_max), one thread per (segment, head).
template <typename T>
__global__ void SegmentSumKernel(DstLayout l, const int32_t* edge_pair, Attention<T> at, T* row_sum) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.num_segs * at.heads;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i / at.heads, h = i % at.heads;
    const int64_t rh = static_cast<int64_t>(l.seg_dst[s]) * at.heads + h;
    const T mx = at.row_max[rh];
    T sum = T(0);
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) sum += Exp(at.Score(at.Raw(edge_pair[e], s, h)) - mx);
    atomicAdd(row_sum + rh, sum);
  }
}

// A row without an edge: max 0 (its sum stays 0).
template <typename T>
__global__ void EmptyRowsKernel(T* row_max, int64_t n, T neg_inf) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (row_max[i] == neg_inf) row_max[i] = T(0);
  }
}

// The softmax statistics: row_max, row_sum [N, H] from the logits.
template <typename T>
void Statistics(const RgatDims& d, const RgatLayout& l, const Attention<T>& at, T* row_max, T* row_sum,
                cudaStream_t stream) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t nh = d.n * d.heads, sh = l.d.num_segs * d.heads;
  ZeroAsync(row_sum, nh, sizeof(T), stream, "zero row_sum");
  if (nh == 0) return;
  FillKernel<T><<<Blocks(nh), kThreads, 0, stream>>>(row_max, nh, neg_inf);
  CheckLaunch("FillKernel");
  if (sh > 0) {
    SegmentMaxKernel<T><<<Blocks(sh), kThreads, 0, stream>>>(l.d, l.edge_pair, at, neg_inf, row_max);
    CheckLaunch("SegmentMaxKernel");
  }
  EmptyRowsKernel<T><<<Blocks(nh), kThreads, 0, stream>>>(row_max, nh, neg_inf);
  CheckLaunch("EmptyRowsKernel");
  if (sh > 0) {
    SegmentSumKernel<T><<<Blocks(sh), kThreads, 0, stream>>>(l.d, l.edge_pair, at, row_sum);
    CheckLaunch("SegmentSumKernel");
  }
}

// A_h[i] = (or, kAtomic, +=) the sum over the edges e in [e0, e1) of segment s of alpha(e, h) X[src(e)], for one
// warp, lanes over K in passes of kWarp * kVec columns.
template <typename T, bool kAtomic>
__device__ void AggregateEdges(const T* x, int64_t k, const DstLayout& l, const int32_t* edge_pair,
                               const Attention<T>& at, int64_t s, int64_t row, int64_t h, int64_t e0, int64_t e1,
                               T* out) {
  const int lane = Lane();
  for (int64_t c0 = 0; c0 < k; c0 += kWarp * kVec) {
    T acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc[v] = T(0);
    for (int64_t e = e0; e < e1; ++e) {
      const T alpha = at.Alpha(edge_pair[e], s, row, h);
      const T* xs = x + static_cast<int64_t>(l.edge_src[e]) * k;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + v * kWarp;
        if (c < k) acc[v] += alpha * xs[c];
      }
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t c = c0 + lane + v * kWarp;
      if (c >= k) continue;
      if constexpr (kAtomic) {
        atomicAdd(out + c, acc[v]);
      } else {
        out[c] = acc[v];
      }
    }
  }
}

// A_h[i] for the segments seg_of[i] of a chunk, one warp per (row, head); segments of more than kHeavyEdges
// edges are zeroed and listed for AggregateHeavyKernel. A: [heads][chunk][K].
template <typename T>
__global__ void AggregateKernel(const T* x, int64_t k, DstLayout l, const int32_t* edge_pair, Attention<T> at,
                                const int64_t* seg_of, int64_t rows, int64_t chunk, HeavyUnits hu, T* a) {
  for (int64_t wi = GlobalWarp(); wi < rows * at.heads; wi += WarpStride()) {
    const int64_t i = wi / at.heads, h = wi % at.heads;
    const int64_t s = seg_of[i], row = l.seg_dst[s], e0 = l.seg_edge[s], e1 = l.seg_edge[s + 1];
    T* out = a + (h * chunk + i) * k;
    if (e1 - e0 > kHeavyEdges) {
      for (int64_t c = Lane(); c < k; c += kWarp) out[c] = T(0);
      if (h == 0 && Lane() == 0) ListHeavy(hu, i, e0, e1);
      continue;
    }
    AggregateEdges<T, false>(x, k, l, edge_pair, at, s, row, h, e0, e1, out);
  }
}

template <typename T>
__global__ void AggregateHeavyKernel(const T* x, int64_t k, DstLayout l, const int32_t* edge_pair, Attention<T> at,
                                     const int64_t* seg_of, int64_t chunk, HeavyUnits hu, T* a) {
  const int64_t units = static_cast<int64_t>(*hu.count);
  for (int64_t wi = GlobalWarp(); wi < units * at.heads; wi += WarpStride()) {
    const int64_t j = wi / at.heads, h = wi % at.heads, i = hu.unit[2 * j], e0 = hu.unit[2 * j + 1];
    const int64_t s = seg_of[i], row = l.seg_dst[s], end = l.seg_edge[s + 1];
    AggregateEdges<T, true>(x, k, l, edge_pair, at, s, row, h, e0, e0 + kHeavyEdges < end ? e0 + kHeavyEdges : end,
                            a + (h * chunk + i) * k);
  }
}

// acc[seg_dst[s]]_h += sum over the edges e of s of alpha(e, h) table[r, row_id[src(e)]]_h, one warp per
// (segment, head), lanes over Dh.
template <typename T>
__global__ void EmbedAggregateKernel(const T* table, int64_t v, const int64_t* row_id, DstLayout l,
                                     const int32_t* edge_pair, Attention<T> at, int64_t dh, T* acc) {
  const int64_t f = at.heads * dh;
  const int lane = Lane();
  for (int64_t wi = GlobalWarp(); wi < l.num_segs * at.heads; wi += WarpStride()) {
    const int64_t s = wi / at.heads, h = wi % at.heads;
    const int64_t rel = l.run_rel[RunOf(l.run_seg, l.num_runs, s)];
    const int64_t row = l.seg_dst[s];
    const T* table_r = table + rel * v * f + h * dh;
    for (int64_t c0 = 0; c0 < dh; c0 += kWarp) {
      const int64_t c = c0 + lane;
      T sum = T(0);
      for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
        const T alpha = at.Alpha(edge_pair[e], s, row, h);
        if (c < dh) sum += alpha * table_r[row_id[l.edge_src[e]] * f + c];
      }
      if (c < dh) atomicAdd(acc + row * f + h * dh + c, sum);
    }
  }
}

// Out[i, c] = (1 / H) sum_h heads[i, h Dh + c].
template <typename T>
__global__ void MeanHeadsKernel(const T* heads_out, int64_t n, int64_t heads, int64_t dh, T inv, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * dh; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / dh, c = i % dh;
    T sum = T(0);
    for (int64_t h = 0; h < heads; ++h) sum += heads_out[(row * heads + h) * dh + c];
    out[i] = sum * inv;
  }
}

// The logits of the feature forward: s[item, h] for every item of `side`.
template <typename T>
void FeatureScores(const KernelArgs& args, const RgatDims& d, const Side& side, const T* x, const T* w, const T* att,
                   const T* wa, T* s, const char* name, cudaStream_t stream) {
  if (side.num_items == 0) return;
  if (wa != nullptr) {
    ProjectedScoresKernel<T><<<WarpBlocks(side.num_items), kThreads, 0, stream>>>(side, x, d.k, wa, d.heads, s);
    CheckLaunch("ProjectedScoresKernel");
    return;
  }
  Sweep sw(args, side, d.r, ChunkRows<T>(side.num_items, d.k + d.f), name, stream);
  CublasPool::Lease lease = StateOf(args).blas.Acquire(stream);
  cublasHandle_t blas = lease.get();
  Workspace<T> xt(args, sw.chunk() * d.k), z(args, sw.chunk() * d.f);
  sw.ForEachChunk([&](int64_t rows) {
    Gather(x, d.k, side.item_row, sw, rows, xt.get(), stream);
    RowRelGemm(sw, rows, blas, d.f, d.k, T(1), xt.get(), d.k, w, d.k * d.f, d.f, false, T(0), z.get(), d.f, stream);
    TileScoresKernel<T><<<Blocks(rows * d.heads), kThreads, 0, stream>>>(z.get(), att, d.heads, d.dh, sw.item_of(),
                                                                         sw.rel_of(), rows, s);
    CheckLaunch("TileScoresKernel");
  });
}

// Out from the per-head outputs (mean), or a copy of Out into the heads output (concat, when asked for).
template <typename T>
void MergeHeads(const RgatDims& d, const RgatOutputs<T>& o, cudaStream_t stream) {
  if (d.n == 0) return;
  if (d.mean) {
    if (d.dh == 0) return;
    MeanHeadsKernel<T><<<Blocks(d.n * d.dh), kThreads, 0, stream>>>(o.heads, d.n, d.heads, d.dh,
                                                                    T(1) / static_cast<T>(d.heads), o.out);
    CheckLaunch("MeanHeadsKernel");
  } else if (o.heads != nullptr && d.f > 0) {
    CheckCuda(
        cudaMemcpyAsync(o.heads, o.out, static_cast<size_t>(d.n * d.f) * sizeof(T), cudaMemcpyDeviceToDevice, stream),
        "copy Out to heads");
  }
}

template <typename T>
void Forward(const KernelArgs& args, const RgatForwardArgs<T>& a) {
  const bool embed = a.input == RgatInput::kOneHot;
  const RgatDims& d = a.d;
  const RgatLayout& l = a.l;
  const RgatOutputs<T>& o = a.o;
  const T* x = a.x;
  const T* w = a.w;
  const int64_t* row_id = a.row_id;
  const T* att_src = a.att_src;
  const T* att_dst = a.att_dst;
  cudaStream_t stream = StreamOf(args);
  T* acc = d.mean ? o.heads : o.out;  // the per-head outputs, [N, F]
  ZeroAsync(acc, d.n * d.f, sizeof(T), stream, "zero the heads");

  // The logits.
  if (embed) {
    const Side sides[2] = {SrcSide(l.s), DstSide(l.d)};
    T* const outs[2] = {o.s_src, o.s_dst};
    const T* const atts[2] = {att_src, att_dst};
    for (int i = 0; i < 2; ++i) {
      if (sides[i].num_items * d.heads == 0) continue;
      EmbedScoresKernel<T><<<Blocks(sides[i].num_items * d.heads), kThreads, 0, stream>>>(
          sides[i], w, d.k, row_id, atts[i], d.heads, d.dh, outs[i]);
      CheckLaunch("EmbedScoresKernel");
    }
  } else {
    const int64_t hk = d.r * d.heads * d.k;
    Workspace<T> wa(args, d.reorder ? 2 * hk : 0);
    if (d.reorder && hk > 0) {
      ProjectAttentionKernel<T><<<Blocks(hk), kThreads, 0, stream>>>(w, att_src, d.r, d.k, d.heads, d.dh, wa.get());
      CheckLaunch("ProjectAttentionKernel");
      ProjectAttentionKernel<T>
          <<<Blocks(hk), kThreads, 0, stream>>>(w, att_dst, d.r, d.k, d.heads, d.dh, wa.get() + hk);
      CheckLaunch("ProjectAttentionKernel");
    }
    const T* wa_src = d.reorder ? wa.get() : nullptr;
    const T* wa_dst = d.reorder ? wa.get() + hk : nullptr;
    // With reorder on and K = 0 there is no wa (hk = 0): the dot products over K = 0 columns are 0 all the same.
    FeatureScores(args, d, SrcSide(l.s), x, w, att_src, wa_src, o.s_src, "src", stream);
    FeatureScores(args, d, DstSide(l.d), x, w, att_dst, wa_dst, o.s_dst, "dst", stream);
  }

  // The softmax statistics.
  const Attention<T> at{o.s_src, o.s_dst, o.row_max, o.row_sum, d.heads, static_cast<T>(d.slope)};
  Statistics(d, l, at, o.row_max, o.row_sum, stream);

  // The per-head outputs.
  if (l.d.num_segs > 0 && d.k > 0 && d.dh > 0) {
    if (embed) {
      EmbedAggregateKernel<T><<<WarpBlocks(l.d.num_segs * d.heads), kThreads, 0, stream>>>(w, d.k, row_id, l.d,
                                                                                           l.edge_pair, at, d.dh, acc);
      CheckLaunch("EmbedAggregateKernel");
    } else {
      Sweep sw(args, DstSide(l.d), d.r, ChunkRows<T>(l.d.num_segs, d.heads * d.k + d.f), "dst", stream);
      CublasPool::Lease lease = StateOf(args).blas.Acquire(stream);
      cublasHandle_t blas = lease.get();
      const int64_t chunk = sw.chunk();
      Workspace<T> a(args, d.heads * chunk * d.k), c(args, chunk * d.f);
      const HeavyList heavy(args, l.d.num_edges, chunk);
      sw.ForEachChunk([&](int64_t rows) {
        heavy.Reset(stream);
        AggregateKernel<T><<<WarpBlocks(rows * d.heads), kThreads, 0, stream>>>(
            x, d.k, l.d, l.edge_pair, at, sw.item_of(), rows, chunk, heavy.units(), a.get());
        CheckLaunch("AggregateKernel");
        AggregateHeavyKernel<T><<<HeavyBlocks(), kThreads, 0, stream>>>(x, d.k, l.d, l.edge_pair, at, sw.item_of(),
                                                                        chunk, heavy.units(), a.get());
        CheckLaunch("AggregateHeavyKernel");
        for (int64_t h = 0; h < d.heads; ++h) {
          RowRelGemm(sw, rows, blas, d.dh, d.k, T(1), a.get() + h * chunk * d.k, d.k, w + h * d.dh, d.k * d.f, d.f,
                     false, T(0), c.get() + h * d.dh, d.f, stream);
        }
        ScatterAdd(c.get(), d.f, l.d.seg_dst, sw, rows, acc, stream);
      });
    }
  }
  MergeHeads(d, o, stream);
}

struct RgatFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatForwardArgs<T>& a) {
    Forward<T>(args, a);
  }
};

struct RgatEmbedFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatForwardArgs<T>& a) {
    Forward<T>(args, a);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(RgatFwdCuda, RgatFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(RgatEmbedFwdCuda, RgatEmbedFwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
