// rgnn.rgat.bwd and rgnn.rgat_embed.bwd on CUDA: the backward of the fused RGAT layer over the segment
// layout (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "RGAT"), with the semantics of rgat_bwd_cpu.cc; the
// forward, and how the chunks and the per-edge values are formed, is rgat_fwd.cu.
//
// Features, with dHeads = dOut (concat) or dOut / H (mean), c[i,h] = dHeads[i]_h . heads[i]_h:
//   B1, chunks of segments: dA_h = dHeads[dst]_h W_{r,h}^T (GEMM), dalpha(e) = dA_h . X[src(e)], ds_dst =
//       sum_e dz. Reorder on: dX[dst] += ds wa_dst (GEMM + scatter), dwa_dst[r] += ds^T X[dst] (GEMM).
//       Reorder off: Zd = X[dst] W_r, datt_dst += ds^T Zd_h, Q = ds att_dst, dW_r += X[dst]^T Q, dX[dst] +=
//       Q W_r^T (GEMMs + scatter).
//   B2, chunks of pairs: Z = X[src] W_r (GEMM); per (pair, head) B_h = sum_e alpha dHeads[dst]_h and ds_src =
//       sum_e dz with dalpha = dHeads[dst]_h . Z_h. Reorder off: B_h += ds att_src, datt_src += ds^T Z_h.
//       dW_r += X[src]^T B; dX[src] += B W_r^T (+ ds wa_src, reorder on); dwa_src[r] += ds^T X[src].
//   finish (reorder on): datt[r,h] = W_{r,h}^T dwa[r,h], dW_{r,h} += dwa[r,h] (outer) att[r,h].
// One-hot input (rgat_embed): B1/B2 with the table rows gathered into the Z tiles and dz scattered into
// rows (r, row_id[.]) of dW (zeroed first) with atomics.
//
// Sums in float are reordered against the CPU kernels (atomics, cuBLAS blocking, warp reductions); outputs
// are nondeterministic in the last bits. The kernels trust the layout's indices (the binder, rgat_args.h,
// checks them on the CPU only); the host checks only what it indexes itself (the run offsets and relations
// it sorts).
#include <algorithm>
#include <cmath>

#include "cuda_support.h"
#include "fused_cuda.cuh"
#include "rgat_args.h"
#include "rgat_cuda.cuh"

namespace tessel::kernels::rgnn {
namespace {

// The shared helpers (fused_cuda.cuh, rgat_cuda.cuh): chunks in relation order, warps, row gathers and
// scatters, the softmax.
using fused_cuda::ChunkRows, fused_cuda::DstSide, fused_cuda::Gather, fused_cuda::GlobalWarp, fused_cuda::HeavyBlocks,
    fused_cuda::HeavyList, fused_cuda::HeavyUnits, fused_cuda::kHeavyEdges, fused_cuda::ListHeavy, fused_cuda::kWarp,
    fused_cuda::Lane, fused_cuda::RelOuterAdd, fused_cuda::RowRelGemm, fused_cuda::ScatterAdd, fused_cuda::SrcSide,
    fused_cuda::Sweep, fused_cuda::WarpBlocks, fused_cuda::WarpDot, fused_cuda::WarpStride, fused_cuda::ZeroAsync;
using rgat_cuda::Attention, rgat_cuda::kVec, rgat_cuda::ProjectAttentionKernel;

// c[i, h] = scale dOut[i]_h . heads[i]_h (= sum_e alpha dalpha over the edges into i), one thread per (row, head).
template <typename T>
__global__ void HeadDotsKernel(const T* dout, int64_t o, bool mean, T scale, const T* heads_in, int64_t n,
                               int64_t heads, int64_t dh, T* c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * heads;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / heads, h = i % heads;
    const T* g = dout + row * o + (mean ? 0 : h * dh);
    const T* y = heads_in + (row * heads + h) * dh;
    T acc = T(0);
    for (int64_t q = 0; q < dh; ++q) acc += g[q] * y[q];
    c[i] = scale * acc;
  }
}

// The sum over the edges e in [e0, e1) of segment s of dz(e, h), with dalpha = dA_h . X[src(e)], for one warp
// (the same value on every lane).
template <typename T>
__device__ T DstGradEdges(const T* x, int64_t k, const DstLayout& l, const int32_t* edge_pair, const Attention<T>& at,
                          const T* cdot, const T* dah, int64_t s, int64_t row, int64_t h, int64_t e0, int64_t e1) {
  T sum = T(0);
  for (int64_t e = e0; e < e1; ++e) {
    const T dalpha = WarpDot(k, dah, x + static_cast<int64_t>(l.edge_src[e]) * k);
    sum += at.Dz(edge_pair[e], s, row, h, dalpha, cdot);
  }
  return sum;
}

// ds[i, h] = sum over the edges e of segment seg_of[i] of dz(e, h), with dalpha = dA_h[i] . X[src(e)]; one
// warp per (row, head); segments of more than kHeavyEdges edges are zeroed and listed for
// DstGradHeavyKernel. dA: [heads][chunk][K].
template <typename T>
__global__ void DstGradKernel(const T* x, int64_t k, DstLayout l, const int32_t* edge_pair, Attention<T> at,
                              const T* cdot, const T* da, int64_t chunk, const int64_t* seg_of, int64_t rows,
                              HeavyUnits hu, T* ds) {
  for (int64_t wi = GlobalWarp(); wi < rows * at.heads; wi += WarpStride()) {
    const int64_t i = wi / at.heads, h = wi % at.heads;
    const int64_t s = seg_of[i], row = l.seg_dst[s], e0 = l.seg_edge[s], e1 = l.seg_edge[s + 1];
    if (e1 - e0 > kHeavyEdges) {
      if (Lane() == 0) {
        ds[i * at.heads + h] = T(0);
        if (h == 0) ListHeavy(hu, i, e0, e1);
      }
      continue;
    }
    const T sum = DstGradEdges(x, k, l, edge_pair, at, cdot, da + (h * chunk + i) * k, s, row, h, e0, e1);
    if (Lane() == 0) ds[i * at.heads + h] = sum;
  }
}

template <typename T>
__global__ void DstGradHeavyKernel(const T* x, int64_t k, DstLayout l, const int32_t* edge_pair, Attention<T> at,
                                   const T* cdot, const T* da, int64_t chunk, const int64_t* seg_of, HeavyUnits hu,
                                   T* ds) {
  const int64_t units = static_cast<int64_t>(*hu.count);
  for (int64_t wi = GlobalWarp(); wi < units * at.heads; wi += WarpStride()) {
    const int64_t j = wi / at.heads, h = wi % at.heads, i = hu.unit[2 * j], e0 = hu.unit[2 * j + 1];
    const int64_t s = seg_of[i], row = l.seg_dst[s], end = l.seg_edge[s + 1];
    const T sum = DstGradEdges(x, k, l, edge_pair, at, cdot, da + (h * chunk + i) * k, s, row, h, e0,
                               e0 + kHeavyEdges < end ? e0 + kHeavyEdges : end);
    if (Lane() == 0) atomicAdd(ds + i * at.heads + h, sum);
  }
}

// The same for the one-hot input, with dalpha = dHeads[dst]_h . table[r, row_id[src]]_h; also adds the
// s_dst path into dW: dW[r, row_id[dst]]_h += ds att_dst[r, h] (atomics: row ids may repeat).
template <typename T>
__global__ void EmbedDstGradKernel(const T* dout, int64_t o, bool mean, T scale, const T* table, int64_t v,
                                   const int64_t* row_id, const T* att_dst, int64_t dh, DstLayout l,
                                   const int32_t* edge_pair, Attention<T> at, const T* cdot, const int64_t* seg_of,
                                   const int32_t* rel_of, int64_t rows, T* ds, T* dw) {
  const int64_t f = at.heads * dh;
  for (int64_t wi = GlobalWarp(); wi < rows * at.heads; wi += WarpStride()) {
    const int64_t i = wi / at.heads, h = wi % at.heads;
    const int64_t s = seg_of[i], row = l.seg_dst[s], rel = rel_of[i];
    const T* g = dout + row * o + (mean ? 0 : h * dh);
    const T* table_r = table + rel * v * f + h * dh;
    T sum = T(0);
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
      const T dalpha = scale * WarpDot(dh, g, table_r + row_id[l.edge_src[e]] * f);
      sum += at.Dz(edge_pair[e], s, row, h, dalpha, cdot);
    }
    const T* a = att_dst + (rel * at.heads + h) * dh;
    T* dw_row = dw + (rel * v + row_id[row]) * f + h * dh;
    for (int64_t c = Lane(); c < dh; c += kWarp) atomicAdd(dw_row + c, sum * a[c]);
    if (Lane() == 0) ds[i * at.heads + h] = sum;
  }
}

// The shares of the edges e in [e0, e1) of pair u in B[i]_h and ds[i, h] (SrcGradKernel), for one warp:
// stored, or with kAtomic added. Lanes own the columns c = lane (mod kWarp) of B, in passes of kWarp * kVec.
template <typename T, bool kAtomic>
__device__ void SrcGradEdges(const T* dout, int64_t o, bool mean, T scale, const int32_t* seg_dst, const SrcLayout& l,
                             const Attention<T>& at, const T* cdot, const T* zh, int64_t dh, const T* att_add_h,
                             int64_t u, int64_t h, int64_t e0, int64_t e1, T* bh, T* ds_out) {
  const int lane = Lane();
  T sum = T(0);
  for (int64_t c0 = 0; c0 < dh || c0 == 0; c0 += kWarp * kVec) {  // one pass at least, for the sum
    T acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc[v] = T(0);
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t seg = l.edge_seg[e], row = seg_dst[seg];
      const T* g = dout + row * o + (mean ? 0 : h * dh);
      const T ag = at.Alpha(u, seg, row, h) * scale;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + v * kWarp;
        if (c < dh) acc[v] += ag * g[c];
      }
      if (c0 == 0) {
        const T dalpha = scale * WarpDot(dh, g, zh);
        sum += at.Dz(u, seg, row, h, dalpha, cdot);
      }
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t c = c0 + lane + v * kWarp;
      if (c >= dh) continue;
      if constexpr (kAtomic) {
        atomicAdd(bh + c, acc[v]);
      } else {
        bh[c] = acc[v];
      }
    }
  }
  // The s_src path through z, linear in the sum (so each unit adds its share).
  if (att_add_h != nullptr) {
    for (int64_t c = lane; c < dh; c += kWarp) {
      if constexpr (kAtomic) {
        atomicAdd(bh + c, sum * att_add_h[c]);
      } else {
        bh[c] += sum * att_add_h[c];
      }
    }
  }
  if (lane == 0) {
    if constexpr (kAtomic) {
      atomicAdd(ds_out, sum);
    } else {
      *ds_out = sum;
    }
  }
}

// Per (row, head) of a chunk of pairs: B[i]_h = sum over the edges e of pair pair_of[i] of alpha(e, h)
// dHeads[dst(e)]_h and ds[i, h] = sum_e dz(e, h) with dalpha = dHeads[dst]_h . Z[i]_h; then, when att_add is
// given, B[i]_h += ds att_add[r, h] (the s_src path through z). One warp per (row, head), lanes over Dh;
// each lane owns its columns of B, so B needs no atomics. Pairs of more than kHeavyEdges edges are zeroed
// and listed for SrcGradHeavyKernel. B, Z: [rows, F].
template <typename T>
__global__ void SrcGradKernel(const T* dout, int64_t o, bool mean, T scale, const int32_t* seg_dst, SrcLayout l,
                              Attention<T> at, const T* cdot, const T* z, int64_t dh, const T* att_add,
                              const int64_t* pair_of, const int32_t* rel_of, int64_t rows, HeavyUnits hu, T* b, T* ds) {
  const int64_t f = at.heads * dh;
  for (int64_t wi = GlobalWarp(); wi < rows * at.heads; wi += WarpStride()) {
    const int64_t i = wi / at.heads, h = wi % at.heads;
    const int64_t u = pair_of[i], e0 = l.pair_edge[u], e1 = l.pair_edge[u + 1];
    T* bh = b + i * f + h * dh;
    if (e1 - e0 > kHeavyEdges) {
      for (int64_t c = Lane(); c < dh; c += kWarp) bh[c] = T(0);
      if (Lane() == 0) {
        ds[i * at.heads + h] = T(0);
        if (h == 0) ListHeavy(hu, i, e0, e1);
      }
      continue;
    }
    const T* a = att_add == nullptr ? nullptr : att_add + (static_cast<int64_t>(rel_of[i]) * at.heads + h) * dh;
    SrcGradEdges<T, false>(dout, o, mean, scale, seg_dst, l, at, cdot, z + i * f + h * dh, dh, a, u, h, e0, e1, bh,
                           ds + i * at.heads + h);
  }
}

template <typename T>
__global__ void SrcGradHeavyKernel(const T* dout, int64_t o, bool mean, T scale, const int32_t* seg_dst, SrcLayout l,
                                   Attention<T> at, const T* cdot, const T* z, int64_t dh, const T* att_add,
                                   const int64_t* pair_of, const int32_t* rel_of, HeavyUnits hu, T* b, T* ds) {
  const int64_t f = at.heads * dh;
  const int64_t units = static_cast<int64_t>(*hu.count);
  for (int64_t wi = GlobalWarp(); wi < units * at.heads; wi += WarpStride()) {
    const int64_t j = wi / at.heads, h = wi % at.heads, i = hu.unit[2 * j], e0 = hu.unit[2 * j + 1];
    const int64_t u = pair_of[i], end = l.pair_edge[u + 1];
    const T* a = att_add == nullptr ? nullptr : att_add + (static_cast<int64_t>(rel_of[i]) * at.heads + h) * dh;
    SrcGradEdges<T, true>(dout, o, mean, scale, seg_dst, l, at, cdot, z + i * f + h * dh, dh, a, u, h, e0,
                          e0 + kHeavyEdges < end ? e0 + kHeavyEdges : end, b + i * f + h * dh, ds + i * at.heads + h);
  }
}

// Q[i]_h = ds[i, h] att[rel_of[i], h], one thread per (row, column); Q: [rows, F].
template <typename T>
__global__ void ScaleAttentionKernel(const T* ds, const T* att, int64_t heads, int64_t dh, const int32_t* rel_of,
                                     int64_t rows, T* q) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * f; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / f, col = i % f, h = col / dh;
    q[i] = ds[row * heads + h] * att[(static_cast<int64_t>(rel_of[row]) * heads + h) * dh + col % dh];
  }
}

// out[i] = table[rel_of[i], row_id[item_row[item_of[i]]]], rows of F values.
template <typename T>
__global__ void EmbedGatherKernel(const T* table, int64_t v, int64_t f, const int64_t* row_id, const int32_t* item_row,
                                  const int64_t* item_of, const int32_t* rel_of, int64_t rows, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * f; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / f;
    out[i] = table[(static_cast<int64_t>(rel_of[row]) * v + row_id[item_row[item_of[row]]]) * f + i % f];
  }
}

// dW[rel_of[i], row_id[item_row[item_of[i]]]] += b[i], rows of F values (atomics: row ids may repeat).
template <typename T>
__global__ void EmbedScatterKernel(const T* b, int64_t v, int64_t f, const int64_t* row_id, const int32_t* item_row,
                                   const int64_t* item_of, const int32_t* rel_of, int64_t rows, T* dw) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * f; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / f;
    atomicAdd(dw + (static_cast<int64_t>(rel_of[row]) * v + row_id[item_row[item_of[row]]]) * f + i % f, b[i]);
  }
}

// dW[r, j, h Dh + c] += dwa_src[r, h, j] att_src[r, h, c] + dwa_dst[r, h, j] att_dst[r, h, c].
template <typename T>
__global__ void ProjectedWeightGradKernel(const T* dwa_src, const T* att_src, const T* dwa_dst, const T* att_dst,
                                          int64_t r, int64_t k, int64_t heads, int64_t dh, T* dw) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < r * k * f;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % f, j = (i / f) % k, rel = i / (k * f), h = col / dh, c = col % dh;
    const int64_t rh = rel * heads + h;
    dw[i] += dwa_src[rh * k + j] * att_src[rh * dh + c] + dwa_dst[rh * k + j] * att_dst[rh * dh + c];
  }
}

// datt[r, h, c] += sum_j W[r, j, h Dh + c] dwa[r, h, j].
template <typename T>
__global__ void ProjectedAttGradKernel(const T* w, const T* dwa, int64_t r, int64_t k, int64_t heads, int64_t dh,
                                       T* datt) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < r * heads * dh;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % dh, rh = i / dh, rel = rh / heads, h = rh % heads;
    const T* wr = w + rel * k * f + h * dh + c;
    const T* g = dwa + rh * k;
    T acc = T(0);
    for (int64_t j = 0; j < k; ++j) acc += wr[j * f] * g[j];
    datt[i] += acc;
  }
}

// B and ds for the current chunk of pairs of `sw` (SrcGradKernel, then SrcGradHeavyKernel for the pairs it
// listed).
template <typename T>
void SrcGrad(const RgatDims& d, const RgatLayout& l, const Attention<T>& at, const T* dout, T scale, const T* cdot,
             const T* z, const T* att_add, const Sweep& sw, int64_t rows, const HeavyList& heavy, T* b, T* ds,
             cudaStream_t stream) {
  heavy.Reset(stream);
  SrcGradKernel<T><<<WarpBlocks(rows * d.heads), kThreads, 0, stream>>>(dout, d.o, d.mean, scale, l.d.seg_dst, l.s, at,
                                                                        cdot, z, d.dh, att_add, sw.item_of(),
                                                                        sw.rel_of(), rows, heavy.units(), b, ds);
  CheckLaunch("SrcGradKernel");
  SrcGradHeavyKernel<T><<<HeavyBlocks(), kThreads, 0, stream>>>(dout, d.o, d.mean, scale, l.d.seg_dst, l.s, at, cdot, z,
                                                                d.dh, att_add, sw.item_of(), sw.rel_of(), heavy.units(),
                                                                b, ds);
  CheckLaunch("SrcGradHeavyKernel");
}

// datt[rel_of[i], h] += ds[i, h] Z[i]_h over a chunk's rows, for every head (ds: [rows, H], Z: [rows, F]).
template <typename T>
void AttGradFromChunk(const RgatDims& d, const Sweep& sw, int64_t rows, cublasHandle_t blas, const T* ds, const T* z,
                      T* datt, cudaStream_t stream) {
  for (int64_t h = 0; h < d.heads; ++h) {
    RelOuterAdd(sw, rows, blas, 1, d.dh, T(1), ds + h, d.heads, z + h * d.dh, d.f, datt + h * d.dh, d.heads * d.dh,
                d.dh, stream);
  }
}

template <typename T>
void BackwardFeatures(const KernelArgs& args, const RgatDims& d, const RgatLayout& l, const T* dout, const T* x,
                      const T* w, const RgatSaved<T>& sv, T* dx, T* dw, T* datt_src, T* datt_dst, const T* cdot,
                      cudaStream_t stream) {
  const Attention<T> at{sv.s_src, sv.s_dst, sv.row_max, sv.row_sum, d.heads, static_cast<T>(d.slope)};
  const T scale = d.mean ? T(1) / static_cast<T>(d.heads) : T(1);
  const int64_t kf = d.k * d.f, hk = d.heads * d.k;
  CublasPool::Lease lease = StateOf(args).blas.Acquire(stream);
  cublasHandle_t blas = lease.get();
  // Reorder on: wa and dwa, [2][R][H][K] each (src, then dst).
  Workspace<T> wa(args, d.reorder ? 2 * d.r * hk : 0), dwa(args, d.reorder ? 2 * d.r * hk : 0);
  T* wa_src = wa.get();
  T* wa_dst = d.reorder ? wa.get() + d.r * hk : nullptr;
  T* dwa_src = dwa.get();
  T* dwa_dst = d.reorder ? dwa.get() + d.r * hk : nullptr;
  if (d.reorder && d.r * hk > 0) {
    ProjectAttentionKernel<T>
        <<<Blocks(d.r * hk), kThreads, 0, stream>>>(w, sv.att_src, d.r, d.k, d.heads, d.dh, wa_src);
    CheckLaunch("ProjectAttentionKernel");
    ProjectAttentionKernel<T>
        <<<Blocks(d.r * hk), kThreads, 0, stream>>>(w, sv.att_dst, d.r, d.k, d.heads, d.dh, wa_dst);
    CheckLaunch("ProjectAttentionKernel");
    ZeroAsync(dwa.get(), 2 * d.r * hk, sizeof(T), stream, "zero dwa");
  }

  // B1, over the segments: ds_dst and the gradient through s_dst.
  if (l.d.num_segs > 0) {
    const int64_t elems = d.o + d.heads * d.k + d.heads + 2 * d.k + (d.reorder ? 0 : 2 * d.f);
    Sweep sw(args, DstSide(l.d), d.r, ChunkRows<T>(l.d.num_segs, elems), "dst", stream);
    const int64_t chunk = sw.chunk();
    Workspace<T> gt(args, chunk * d.o), da(args, d.heads * chunk * d.k), ds(args, chunk * d.heads),
        xd(args, chunk * d.k), gx(args, dx != nullptr ? chunk * d.k : 0), zd(args, d.reorder ? 0 : chunk * d.f),
        q(args, d.reorder ? 0 : chunk * d.f);
    const HeavyList heavy(args, l.d.num_edges, chunk);
    sw.ForEachChunk([&](int64_t rows) {
      Gather(dout, d.o, l.d.seg_dst, sw, rows, gt.get(), stream);
      // dA_h = scale dOut[dst]_h W_{r,h}^T
      for (int64_t h = 0; h < d.heads; ++h) {
        RowRelGemm(sw, rows, blas, d.k, d.dh, scale, gt.get() + (d.mean ? 0 : h * d.dh), d.o, w + h * d.dh, kf, d.f,
                   true, T(0), da.get() + h * chunk * d.k, d.k, stream);
      }
      heavy.Reset(stream);
      DstGradKernel<T><<<WarpBlocks(rows * d.heads), kThreads, 0, stream>>>(
          x, d.k, l.d, l.edge_pair, at, cdot, da.get(), chunk, sw.item_of(), rows, heavy.units(), ds.get());
      CheckLaunch("DstGradKernel");
      DstGradHeavyKernel<T><<<HeavyBlocks(), kThreads, 0, stream>>>(x, d.k, l.d, l.edge_pair, at, cdot, da.get(), chunk,
                                                                    sw.item_of(), heavy.units(), ds.get());
      CheckLaunch("DstGradHeavyKernel");
      Gather(x, d.k, l.d.seg_dst, sw, rows, xd.get(), stream);  // destination row i is input row i
      const int32_t* rel_of = sw.rel_of();
      if (d.reorder) {
        // dwa_dst[r] += ds^T X[dst]; G = ds wa_dst[r]
        RelOuterAdd(sw, rows, blas, d.heads, d.k, T(1), ds.get(), d.heads, xd.get(), d.k, dwa_dst, hk, d.k, stream);
        if (dx != nullptr) {
          RowRelGemm(sw, rows, blas, d.k, d.heads, T(1), ds.get(), d.heads, wa_dst, hk, d.k, false, T(0), gx.get(), d.k,
                     stream);
        }
      } else {
        // Through z(dst, r) = X[dst] W_r: datt_dst += ds Z_h; Q_h = ds att_dst[r, h]; dW_r += X[dst]^T Q;
        // G = Q W_r^T.
        RowRelGemm(sw, rows, blas, d.f, d.k, T(1), xd.get(), d.k, w, kf, d.f, false, T(0), zd.get(), d.f, stream);
        AttGradFromChunk(d, sw, rows, blas, ds.get(), zd.get(), datt_dst, stream);
        if (rows * d.f > 0) {
          ScaleAttentionKernel<T>
              <<<Blocks(rows * d.f), kThreads, 0, stream>>>(ds.get(), sv.att_dst, d.heads, d.dh, rel_of, rows, q.get());
          CheckLaunch("ScaleAttentionKernel");
        }
        RelOuterAdd(sw, rows, blas, d.k, d.f, T(1), xd.get(), d.k, q.get(), d.f, dw, kf, d.f, stream);
        if (dx != nullptr) {
          RowRelGemm(sw, rows, blas, d.k, d.f, T(1), q.get(), d.f, w, kf, d.f, true, T(0), gx.get(), d.k, stream);
        }
      }
      if (dx != nullptr) ScatterAdd(gx.get(), d.k, l.d.seg_dst, sw, rows, dx, stream);
    });
  }

  // B2, over the pairs: the messages and ds_src.
  if (l.s.num_pairs > 0) {
    const int64_t elems = 2 * d.k + 2 * d.f + d.heads;
    Sweep sw(args, SrcSide(l.s), d.r, ChunkRows<T>(l.s.num_pairs, elems), "src", stream);
    const int64_t chunk = sw.chunk();
    Workspace<T> xt(args, chunk * d.k), z(args, chunk * d.f), b(args, chunk * d.f), ds(args, chunk * d.heads),
        gx(args, dx != nullptr ? chunk * d.k : 0);
    const HeavyList heavy(args, l.s.num_edges, chunk);
    sw.ForEachChunk([&](int64_t rows) {
      Gather(x, d.k, l.s.pair_src, sw, rows, xt.get(), stream);
      const int32_t* rel_of = sw.rel_of();
      RowRelGemm(sw, rows, blas, d.f, d.k, T(1), xt.get(), d.k, w, kf, d.f, false, T(0), z.get(), d.f, stream);
      SrcGrad(d, l, at, dout, scale, cdot, z.get(), d.reorder ? nullptr : sv.att_src, sw, rows, heavy, b.get(),
              ds.get(), stream);
      if (!d.reorder) AttGradFromChunk(d, sw, rows, blas, ds.get(), z.get(), datt_src, stream);
      // dW_r += X[src]^T B
      RelOuterAdd(sw, rows, blas, d.k, d.f, T(1), xt.get(), d.k, b.get(), d.f, dw, kf, d.f, stream);
      if (d.reorder) {
        RelOuterAdd(sw, rows, blas, d.heads, d.k, T(1), ds.get(), d.heads, xt.get(), d.k, dwa_src, hk, d.k, stream);
      }
      if (dx != nullptr) {
        // G = B W_r^T (+ ds wa_src[r])
        RowRelGemm(sw, rows, blas, d.k, d.f, T(1), b.get(), d.f, w, kf, d.f, true, T(0), gx.get(), d.k, stream);
        if (d.reorder) {
          RowRelGemm(sw, rows, blas, d.k, d.heads, T(1), ds.get(), d.heads, wa_src, hk, d.k, false, T(1), gx.get(), d.k,
                     stream);
        }
      }
      if (dx != nullptr) ScatterAdd(gx.get(), d.k, l.s.pair_src, sw, rows, dx, stream);
    });
  }

  // Reorder on: datt = W^T dwa, dW += dwa (outer) att.
  if (d.reorder && d.r * hk > 0) {
    if (d.r * kf > 0) {
      ProjectedWeightGradKernel<T><<<Blocks(d.r * kf), kThreads, 0, stream>>>(dwa_src, sv.att_src, dwa_dst, sv.att_dst,
                                                                              d.r, d.k, d.heads, d.dh, dw);
      CheckLaunch("ProjectedWeightGradKernel");
    }
    const int64_t rhd = d.r * d.heads * d.dh;
    if (rhd > 0) {
      ProjectedAttGradKernel<T><<<Blocks(rhd), kThreads, 0, stream>>>(w, dwa_src, d.r, d.k, d.heads, d.dh, datt_src);
      CheckLaunch("ProjectedAttGradKernel");
      ProjectedAttGradKernel<T><<<Blocks(rhd), kThreads, 0, stream>>>(w, dwa_dst, d.r, d.k, d.heads, d.dh, datt_dst);
      CheckLaunch("ProjectedAttGradKernel");
    }
  }
}

template <typename T>
void BackwardEmbed(const KernelArgs& args, const RgatDims& d, const RgatLayout& l, const T* dout, const T* table,
                   const int64_t* row_id, const RgatSaved<T>& sv, T* dw, T* datt_src, T* datt_dst, const T* cdot,
                   cudaStream_t stream) {
  const Attention<T> at{sv.s_src, sv.s_dst, sv.row_max, sv.row_sum, d.heads, static_cast<T>(d.slope)};
  const T scale = d.mean ? T(1) / static_cast<T>(d.heads) : T(1);
  CublasPool::Lease lease = StateOf(args).blas.Acquire(stream);
  cublasHandle_t blas = lease.get();
  // B1, over the segments: ds_dst, dW[r, row_id[dst]] += ds att_dst, datt_dst += ds z(dst).
  if (l.d.num_segs > 0) {
    Sweep sw(args, DstSide(l.d), d.r, ChunkRows<T>(l.d.num_segs, d.heads + d.f), "dst", stream);
    const int64_t chunk = sw.chunk();
    Workspace<T> ds(args, chunk * d.heads), zd(args, chunk * d.f);
    sw.ForEachChunk([&](int64_t rows) {
      EmbedDstGradKernel<T><<<WarpBlocks(rows * d.heads), kThreads, 0, stream>>>(
          dout, d.o, d.mean, scale, table, d.k, row_id, sv.att_dst, d.dh, l.d, l.edge_pair, at, cdot, sw.item_of(),
          sw.rel_of(), rows, ds.get(), dw);
      CheckLaunch("EmbedDstGradKernel");
      if (rows * d.f == 0) return;
      EmbedGatherKernel<T><<<Blocks(rows * d.f), kThreads, 0, stream>>>(table, d.k, d.f, row_id, l.d.seg_dst,
                                                                        sw.item_of(), sw.rel_of(), rows, zd.get());
      CheckLaunch("EmbedGatherKernel");
      AttGradFromChunk(d, sw, rows, blas, ds.get(), zd.get(), datt_dst, stream);
    });
  }
  // B2, over the pairs: B = messages + ds_src att_src into dW[r, row_id[src]], datt_src += ds z(src).
  if (l.s.num_pairs > 0) {
    Sweep sw(args, SrcSide(l.s), d.r, ChunkRows<T>(l.s.num_pairs, 2 * d.f + d.heads), "src", stream);
    const int64_t chunk = sw.chunk();
    Workspace<T> zs(args, chunk * d.f), b(args, chunk * d.f), ds(args, chunk * d.heads);
    const HeavyList heavy(args, l.s.num_edges, chunk);
    sw.ForEachChunk([&](int64_t rows) {
      if (rows * d.f > 0) {
        EmbedGatherKernel<T><<<Blocks(rows * d.f), kThreads, 0, stream>>>(table, d.k, d.f, row_id, l.s.pair_src,
                                                                          sw.item_of(), sw.rel_of(), rows, zs.get());
        CheckLaunch("EmbedGatherKernel");
      }
      SrcGrad(d, l, at, dout, scale, cdot, zs.get(), sv.att_src, sw, rows, heavy, b.get(), ds.get(), stream);
      if (rows * d.f == 0) return;
      AttGradFromChunk(d, sw, rows, blas, ds.get(), zs.get(), datt_src, stream);
      EmbedScatterKernel<T><<<Blocks(rows * d.f), kThreads, 0, stream>>>(b.get(), d.k, d.f, row_id, l.s.pair_src,
                                                                         sw.item_of(), sw.rel_of(), rows, dw);
      CheckLaunch("EmbedScatterKernel");
    });
  }
}

template <typename T>
void Backward(const KernelArgs& args, const RgatBackwardArgs<T>& a) {
  const bool embed = a.input == RgatInput::kOneHot;
  const RgatDims& d = a.d;
  const RgatLayout& l = a.l;
  const RgatSaved<T>& sv = a.sv;
  const T* dout = a.dout;
  const T* x = a.x;
  const T* w = a.w;
  const int64_t* row_id = a.row_id;
  T* dx = a.dx;
  T* dw = a.dw;
  T* datt_src = a.datt_src;
  T* datt_dst = a.datt_dst;
  cudaStream_t stream = StreamOf(args);
  ZeroAsync(dw, d.r * d.k * d.f, sizeof(T), stream, "zero dW");
  ZeroAsync(datt_src, d.r * d.f, sizeof(T), stream, "zero datt_src");
  ZeroAsync(datt_dst, d.r * d.f, sizeof(T), stream, "zero datt_dst");
  if (dx != nullptr) ZeroAsync(dx, d.m * d.k, sizeof(T), stream, "zero dX");
  if (l.d.num_edges == 0 || d.f == 0 || d.k == 0) return;  // no edge, or no width: every gradient is 0
  // c[i, h] = dHeads[i]_h . heads[i]_h
  Workspace<T> cdot(args, d.n * d.heads);
  const T scale = d.mean ? T(1) / static_cast<T>(d.heads) : T(1);
  if (d.n * d.heads > 0) {
    HeadDotsKernel<T><<<Blocks(d.n * d.heads), kThreads, 0, stream>>>(dout, d.o, d.mean, scale, sv.heads, d.n, d.heads,
                                                                      d.dh, cdot.get());
    CheckLaunch("HeadDotsKernel");
  }
  if (embed) {
    BackwardEmbed(args, d, l, dout, w, row_id, sv, dw, datt_src, datt_dst, cdot.get(), stream);
  } else {
    BackwardFeatures(args, d, l, dout, x, w, sv, dx, dw, datt_src, datt_dst, cdot.get(), stream);
  }
}

struct RgatBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatBackwardArgs<T>& a) {
    Backward<T>(args, a);
  }
};

struct RgatEmbedBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatBackwardArgs<T>& a) {
    Backward<T>(args, a);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(RgatBwdCuda, RgatBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(RgatEmbedBwdCuda, RgatEmbedBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
