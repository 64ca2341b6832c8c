// rgnn.hgt.fwd and rgnn.hgt.bwd on CUDA: the attention core of HGT over the segment layout
// (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "HGT"), with the semantics of hgt_cpu.cc.
//
// Nothing of size edges x width or pairs x width exists whole: the items (segments or pairs) are walked in
// relation order, in chunks of at most kMaxChunkRows rows (Sweep in fused_cuda.cuh: one host sync reads the
// runs, a counting sort orders them by relation, a second sync uploads the order), so that every product
// with a relation's [Dh, Dh] matrices is one cuBLAS GEMM per relation slice of a chunk and head.
// Per-edge values (score, alpha, dscore) are recomputed from the tiles and the per-row softmax statistics;
// a [chunk, F] tile per operand and [N, H] statistics are all the scratch (Workspace<T>).
//
// Forward, reorder on (destination side): per chunk of segments q' = Q[dst]_h att[r,h]^T (GEMM), so
// score(e, h) = K[src]_h . q'_h * prior[r,h] / sqrt(Dh). Two sweeps: the first folds each segment's max
// score into row_max (atomic compare-and-swap max); the second sums w = exp(score - row_max) into row_sum
// (atomicAdd) and A_h = sum_e w V[src]_h per segment, then Agg[dst] += A_h msg[r,h] (GEMM, atomic scatter:
// a destination has one segment per relation). Finally Agg /= row_sum; a row without an edge keeps Agg 0
// and gets max = sum = 0.
// Forward, reorder off (source side, compact materialisation without reordering): per chunk of pairs
// K' = K[src]_h att and V' = V[src]_h msg (GEMMs), score = K'_h . Q[dst]_h * ps per edge; the same two
// sweeps, the second adding w V'_h into Agg[dst] edge by edge (atomics).
// Backward (both settings), with c[i,h] = dAgg[i]_h . Agg[i]_h, dscore = alpha (dalpha - c[dst,h]):
//   D1, chunks of segments: q' = Q[dst] att^T and g' = dAgg[dst] msg^T (GEMMs); per (segment, head) one warp
//       sums A = sum_e alpha V[src], Dk = sum_e dscore K[src] and dp = sum_e dscore raw (dalpha = g' . V[src]);
//       then dQ[dst] += ps Dk att, datt += ps Dk^T Q[dst], dmsg += A^T dAgg[dst] (GEMMs per slice and head),
//       dprior[r] += (1 / sqrt(Dh)) sum over the slice of dp (a GEMM with a vector of ones).
//   D2, chunks of pairs: K' = K[src] att, V' = V[src] msg (GEMMs); per (pair, head) B = sum_e alpha dAgg[dst]
//       and Dq = sum_e dscore Q[dst] (dalpha = V' . dAgg[dst]); dV[src] += B msg^T, dK[src] += ps Dq att^T.
//
// Sums in float are reordered against the CPU kernels (atomics, cuBLAS blocking, warp reductions); outputs
// are nondeterministic in the last bits. The kernels trust the layout's indices (the binder, hgt_args.h,
// checks them on the CPU only); the host checks only what it indexes itself (the run offsets and relations
// it sorts).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda_support.h"
#include "fused_cuda.cuh"
#include "hgt_args.h"

namespace tessel::kernels::rgnn {
namespace {

// The shared helpers (fused_cuda.cuh): chunks in relation order, warps, row gathers and scatters.
using fused_cuda::AtomicMax, fused_cuda::ChunkRows, fused_cuda::DstSide, fused_cuda::Exp, fused_cuda::FillKernel,
    fused_cuda::Gather, fused_cuda::GlobalWarp, fused_cuda::kWarp, fused_cuda::Lane, fused_cuda::ScatterAdd,
    fused_cuda::SrcSide, fused_cuda::Sweep, fused_cuda::WarpBlocks, fused_cuda::WarpDot, fused_cuda::WarpStride,
    fused_cuda::ZeroAsync;

// out[rows x F] head by head: out_h = x_h mats[r, h] (Trans::kNo) or x_h mats[r, h]^T (Trans::kYes), for each
// relation slice of the current chunk; x and out are [chunk, F] tiles, mats [R, H, Dh, Dh].
template <typename T>
void HeadProducts(cublasHandle_t blas, const Sweep& sw, int64_t rows, int64_t h, int64_t dh, const T* x, const T* mats,
                  Trans trans, T* out) {
  const int64_t f = h * dh;
  sw.ForEachSlice(rows, [&](int64_t rel, int64_t lo, int64_t len) {
    for (int64_t c = 0; c < h; ++c) {
      GemmRowMajor(blas, Trans::kNo, trans, len, dh, dh, T(1), x + lo * f + c * dh, f, mats + (rel * h + c) * dh * dh,
                   dh, T(0), out + lo * f + c * dh, f);
    }
  });
}

// ---------------------------------------------------------------------------------------------------
// Forward.

// Reorder on, first sweep: row_max[seg_dst[s], h] = max(it, the max over segment s's edges of score =
// K[src]_h . q'[i]_h * prior[r,h] scale), one warp per (row, head) of a chunk of segments; q': [rows, F].
template <typename T>
__global__ void SegmentMaxKernel(const T* kx, int64_t heads, int64_t dh, DstLayout l, const T* qp, const T* prior,
                                 T scale, const int64_t* seg_of, const int32_t* rel_of, int64_t rows, T neg_inf,
                                 T* row_max) {
  const int64_t f = heads * dh;
  for (int64_t wi = GlobalWarp(); wi < rows * heads; wi += WarpStride()) {
    const int64_t i = wi / heads, h = wi % heads;
    const int64_t s = seg_of[i], row = l.seg_dst[s];
    const T ps = prior[static_cast<int64_t>(rel_of[i]) * heads + h] * scale;
    const T* qh = qp + i * f + h * dh;
    T mx = neg_inf;
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
      const T score = WarpDot(dh, kx + static_cast<int64_t>(l.edge_src[e]) * f + h * dh, qh) * ps;
      if (!(score <= mx)) mx = score;
    }
    if (Lane() == 0) AtomicMax(row_max + row * heads + h, mx);
  }
}

// Reorder on, second sweep: w = exp(score - row_max); row_sum[dst, h] += sum_e w and A[i]_h = sum_e w V[src]_h
// over the edges of segment seg_of[i]. One warp per (row, head), lanes over Dh (each lane owns its columns).
template <typename T>
__global__ void SegmentAccumulateKernel(const T* kx, const T* vx, int64_t heads, int64_t dh, DstLayout l, const T* qp,
                                        const T* prior, T scale, const T* row_max, const int64_t* seg_of,
                                        const int32_t* rel_of, int64_t rows, T* a, T* row_sum) {
  const int64_t f = heads * dh;
  const int lane = Lane();
  for (int64_t wi = GlobalWarp(); wi < rows * heads; wi += WarpStride()) {
    const int64_t i = wi / heads, h = wi % heads;
    const int64_t s = seg_of[i], rh = static_cast<int64_t>(l.seg_dst[s]) * heads + h;
    const T ps = prior[static_cast<int64_t>(rel_of[i]) * heads + h] * scale;
    const T mx = row_max[rh];
    const T* qh = qp + i * f + h * dh;
    T* ah = a + i * f + h * dh;
    for (int64_t c = lane; c < dh; c += kWarp) ah[c] = T(0);
    T sum = T(0);
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
      const int64_t off = static_cast<int64_t>(l.edge_src[e]) * f + h * dh;
      const T w = Exp(WarpDot(dh, kx + off, qh) * ps - mx);
      sum += w;
      for (int64_t c = lane; c < dh; c += kWarp) ah[c] += w * vx[off + c];
    }
    if (lane == 0) atomicAdd(row_sum + rh, sum);
  }
}

// Reorder off, first sweep: row_max[dst, h] = max(it, score) for every edge of pair pair_of[i], with score =
// K'[i]_h . Q[dst]_h * ps; one warp per (row, head) of a chunk of pairs; K': [rows, F].
template <typename T>
__global__ void PairMaxKernel(const T* qx, int64_t heads, int64_t dh, SrcLayout l, const int32_t* seg_dst, const T* kp,
                              const T* prior, T scale, const int64_t* pair_of, const int32_t* rel_of, int64_t rows,
                              T* row_max) {
  const int64_t f = heads * dh;
  for (int64_t wi = GlobalWarp(); wi < rows * heads; wi += WarpStride()) {
    const int64_t i = wi / heads, h = wi % heads, u = pair_of[i];
    const T ps = prior[static_cast<int64_t>(rel_of[i]) * heads + h] * scale;
    const T* kh = kp + i * f + h * dh;
    for (int64_t e = l.pair_edge[u]; e < l.pair_edge[u + 1]; ++e) {
      const int64_t row = seg_dst[l.edge_seg[e]];
      const T score = WarpDot(dh, kh, qx + row * f + h * dh) * ps;
      if (Lane() == 0) AtomicMax(row_max + row * heads + h, score);
    }
  }
}

// Reorder off, second sweep: for every edge of pair pair_of[i], w = exp(score - row_max[dst, h]);
// row_sum[dst, h] += w, Agg[dst]_h += w V'[i]_h (atomics); V': [rows, F].
template <typename T>
__global__ void PairAccumulateKernel(const T* qx, int64_t heads, int64_t dh, SrcLayout l, const int32_t* seg_dst,
                                     const T* kp, const T* vp, const T* prior, T scale, const T* row_max,
                                     const int64_t* pair_of, const int32_t* rel_of, int64_t rows, T* agg, T* row_sum) {
  const int64_t f = heads * dh;
  const int lane = Lane();
  for (int64_t wi = GlobalWarp(); wi < rows * heads; wi += WarpStride()) {
    const int64_t i = wi / heads, h = wi % heads, u = pair_of[i];
    const T ps = prior[static_cast<int64_t>(rel_of[i]) * heads + h] * scale;
    const T* kh = kp + i * f + h * dh;
    const T* vh = vp + i * f + h * dh;
    for (int64_t e = l.pair_edge[u]; e < l.pair_edge[u + 1]; ++e) {
      const int64_t row = seg_dst[l.edge_seg[e]], rh = row * heads + h;
      const T w = Exp(WarpDot(dh, kh, qx + row * f + h * dh) * ps - row_max[rh]);
      if (lane == 0) atomicAdd(row_sum + rh, w);
      for (int64_t c = lane; c < dh; c += kWarp) atomicAdd(agg + row * f + h * dh + c, w * vh[c]);
    }
  }
}

// Agg divided by the sum; a row without an edge keeps Agg 0 and gets max = 0 (its sum is 0). One thread per
// (row, head).
template <typename T>
__global__ void FinishKernel(T* agg, T* row_max, const T* row_sum, int64_t nh, int64_t dh) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nh; i += int64_t(gridDim.x) * blockDim.x) {
    const T sum = row_sum[i];
    if (sum > T(0)) {
      const T inv = T(1) / sum;
      T* a = agg + i * dh;
      for (int64_t c = 0; c < dh; ++c) a[c] *= inv;
    } else {
      row_max[i] = T(0);
    }
  }
}

template <typename T>
void ForwardReordered(const KernelArgs& args, const HgtInputs<T>& in, T neg_inf, T* agg, T* row_max, T* row_sum,
                      cudaStream_t stream, cublasHandle_t blas) {
  const DstLayout& l = in.dl;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  Sweep sw(args, DstSide(l), in.r, ChunkRows<T>(l.num_segs, 3 * f), "dst", stream);
  const int64_t chunk = sw.chunk();
  Workspace<T> qt(args, chunk * f), qp(args, chunk * f), at(args, chunk * f);
  // q' = Q[dst] att^T for the current chunk.
  auto project = [&](int64_t rows) {
    Gather(in.q, f, l.seg_dst, sw, rows, qt.get(), stream);
    HeadProducts(blas, sw, rows, h, dh, qt.get(), in.att, Trans::kYes, qp.get());
  };
  sw.ForEachChunk([&](int64_t rows) {
    project(rows);
    SegmentMaxKernel<T><<<WarpBlocks(rows * h), kThreads, 0, stream>>>(
        in.k, h, dh, l, qp.get(), in.prior, in.scale, sw.item_of(), sw.rel_of(), rows, neg_inf, row_max);
    CheckLaunch("SegmentMaxKernel");
  });
  sw.ForEachChunk([&](int64_t rows) {
    project(rows);
    SegmentAccumulateKernel<T><<<WarpBlocks(rows * h), kThreads, 0, stream>>>(in.k, in.v, h, dh, l, qp.get(), in.prior,
                                                                              in.scale, row_max, sw.item_of(),
                                                                              sw.rel_of(), rows, at.get(), row_sum);
    CheckLaunch("SegmentAccumulateKernel");
    // C_h = A_h msg[r, h], into qt (free once q' is formed), then Agg[dst] += C.
    HeadProducts(blas, sw, rows, h, dh, at.get(), in.msg, Trans::kNo, qt.get());
    ScatterAdd(qt.get(), f, l.seg_dst, sw, rows, agg, stream);
  });
}

template <typename T>
void ForwardMaterialised(const KernelArgs& args, const HgtInputs<T>& in, T* agg, T* row_max, T* row_sum,
                         cudaStream_t stream, cublasHandle_t blas) {
  const SrcLayout& l = in.sl;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  Sweep sw(args, SrcSide(l), in.r, ChunkRows<T>(l.num_pairs, 4 * f), "src", stream);
  const int64_t chunk = sw.chunk();
  Workspace<T> kt(args, chunk * f), kp(args, chunk * f), vt(args, chunk * f), vp(args, chunk * f);
  sw.ForEachChunk([&](int64_t rows) {
    Gather(in.k, f, l.pair_src, sw, rows, kt.get(), stream);
    HeadProducts(blas, sw, rows, h, dh, kt.get(), in.att, Trans::kNo, kp.get());
    PairMaxKernel<T><<<WarpBlocks(rows * h), kThreads, 0, stream>>>(in.q, h, dh, l, in.dl.seg_dst, kp.get(), in.prior,
                                                                    in.scale, sw.item_of(), sw.rel_of(), rows, row_max);
    CheckLaunch("PairMaxKernel");
  });
  sw.ForEachChunk([&](int64_t rows) {
    Gather(in.k, f, l.pair_src, sw, rows, kt.get(), stream);
    Gather(in.v, f, l.pair_src, sw, rows, vt.get(), stream);
    HeadProducts(blas, sw, rows, h, dh, kt.get(), in.att, Trans::kNo, kp.get());
    HeadProducts(blas, sw, rows, h, dh, vt.get(), in.msg, Trans::kNo, vp.get());
    PairAccumulateKernel<T><<<WarpBlocks(rows * h), kThreads, 0, stream>>>(
        in.q, h, dh, l, in.dl.seg_dst, kp.get(), vp.get(), in.prior, in.scale, row_max, sw.item_of(), sw.rel_of(), rows,
        agg, row_sum);
    CheckLaunch("PairAccumulateKernel");
  });
}

template <typename T>
void Forward(const KernelArgs& args, const HgtFwdArgs<T>& a) {
  const HgtInputs<T>& in = a.in;
  const int64_t n = in.n, f = in.f, h = in.h;
  T* agg = a.agg;
  T* row_max = a.row_max;
  T* row_sum = a.row_sum;
  cudaStream_t stream = StreamOf(args);
  const int64_t nh = n * h;
  ZeroAsync(agg, n * f, sizeof(T), stream, "zero Agg");
  ZeroAsync(row_sum, nh, sizeof(T), stream, "zero row_sum");
  if (nh == 0) return;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  FillKernel<T><<<Blocks(nh), kThreads, 0, stream>>>(row_max, nh, neg_inf);
  CheckLaunch("FillKernel");
  if (in.dl.num_edges > 0) {
    CublasPool::Lease blas = StateOf(args).blas.Acquire(stream);
    if (in.reorder) {
      ForwardReordered(args, in, neg_inf, agg, row_max, row_sum, stream, blas.get());
    } else {
      ForwardMaterialised(args, in, agg, row_max, row_sum, stream, blas.get());
    }
  }
  FinishKernel<T><<<Blocks(nh), kThreads, 0, stream>>>(agg, row_max, row_sum, nh, in.dh);
  CheckLaunch("FinishKernel");
}

// ---------------------------------------------------------------------------------------------------
// Backward.

// c[i, h] = dAgg[i]_h . Agg[i]_h and inv_sum = 1 / row_sum (0 for a row without edges), per (row, head).
template <typename T>
__global__ void BackwardStatsKernel(const T* dagg, const T* agg, const T* row_sum, int64_t nh, int64_t dh, T* cdot,
                                    T* inv_sum) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nh; i += int64_t(gridDim.x) * blockDim.x) {
    T acc = T(0);
    for (int64_t c = 0; c < dh; ++c) acc += dagg[i * dh + c] * agg[i * dh + c];
    cdot[i] = acc;
    const T sum = row_sum[i];
    inv_sum[i] = sum > T(0) ? T(1) / sum : T(0);
  }
}

// D1: per (row, head) of a chunk of segments, over the edges e of segment seg_of[i]: raw = K[src]_h . q'[i]_h,
// alpha = exp(raw ps - row_max) inv_sum, dalpha = g'[i]_h . V[src]_h, dscore = alpha (dalpha - c);
// A[i]_h = sum_e alpha V[src]_h, Dk[i]_h = sum_e dscore K[src]_h, dp[i, h] = sum_e dscore raw. One warp per
// (row, head), lanes over Dh (each lane owns its columns). q', g', A, Dk: [rows, F]; dp: [rows, H].
template <typename T>
__global__ void DstGradKernel(const T* kx, const T* vx, int64_t heads, int64_t dh, DstLayout l, const T* qp,
                              const T* gp, const T* prior, T scale, const T* row_max, const T* cdot, const T* inv_sum,
                              const int64_t* seg_of, const int32_t* rel_of, int64_t rows, T* a, T* dk, T* dp) {
  const int64_t f = heads * dh;
  const int lane = Lane();
  for (int64_t wi = GlobalWarp(); wi < rows * heads; wi += WarpStride()) {
    const int64_t i = wi / heads, h = wi % heads;
    const int64_t s = seg_of[i], rh = static_cast<int64_t>(l.seg_dst[s]) * heads + h;
    const T ps = prior[static_cast<int64_t>(rel_of[i]) * heads + h] * scale;
    const T mx = row_max[rh], inv = inv_sum[rh], ch = cdot[rh];
    const T* qh = qp + i * f + h * dh;
    const T* gh = gp + i * f + h * dh;
    T* ah = a + i * f + h * dh;
    T* dkh = dk + i * f + h * dh;
    for (int64_t c = lane; c < dh; c += kWarp) {
      ah[c] = T(0);
      dkh[c] = T(0);
    }
    T sum = T(0);
    for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
      const int64_t off = static_cast<int64_t>(l.edge_src[e]) * f + h * dh;
      const T raw = WarpDot(dh, kx + off, qh);
      const T alpha = Exp(raw * ps - mx) * inv;
      const T dalpha = WarpDot(dh, gh, vx + off);
      const T dscore = alpha * (dalpha - ch);
      for (int64_t c = lane; c < dh; c += kWarp) {
        ah[c] += alpha * vx[off + c];
        dkh[c] += dscore * kx[off + c];
      }
      sum += dscore * raw;
    }
    if (lane == 0) dp[i * heads + h] = sum;
  }
}

// D2: per (row, head) of a chunk of pairs, over the edges e of pair pair_of[i] (destination row dst):
// raw = K'[i]_h . Q[dst]_h, alpha, dalpha = V'[i]_h . dAgg[dst]_h, dscore; B[i]_h = sum_e alpha dAgg[dst]_h,
// Dq[i]_h = sum_e dscore Q[dst]_h. One warp per (row, head), lanes over Dh. K', V', B, Dq: [rows, F].
template <typename T>
__global__ void SrcGradKernel(const T* qx, const T* dagg, int64_t heads, int64_t dh, SrcLayout l,
                              const int32_t* seg_dst, const T* kp, const T* vp, const T* prior, T scale,
                              const T* row_max, const T* cdot, const T* inv_sum, const int64_t* pair_of,
                              const int32_t* rel_of, int64_t rows, T* b, T* dq) {
  const int64_t f = heads * dh;
  const int lane = Lane();
  for (int64_t wi = GlobalWarp(); wi < rows * heads; wi += WarpStride()) {
    const int64_t i = wi / heads, h = wi % heads, u = pair_of[i];
    const T ps = prior[static_cast<int64_t>(rel_of[i]) * heads + h] * scale;
    const T* kh = kp + i * f + h * dh;
    const T* vh = vp + i * f + h * dh;
    T* bh = b + i * f + h * dh;
    T* dqh = dq + i * f + h * dh;
    for (int64_t c = lane; c < dh; c += kWarp) {
      bh[c] = T(0);
      dqh[c] = T(0);
    }
    for (int64_t e = l.pair_edge[u]; e < l.pair_edge[u + 1]; ++e) {
      const int64_t row = seg_dst[l.edge_seg[e]], rh = row * heads + h;
      const T* qr = qx + row * f + h * dh;
      const T* gr = dagg + row * f + h * dh;
      const T raw = WarpDot(dh, kh, qr);
      const T alpha = Exp(raw * ps - row_max[rh]) * inv_sum[rh];
      const T dalpha = WarpDot(dh, vh, gr);
      const T dscore = alpha * (dalpha - cdot[rh]);
      for (int64_t c = lane; c < dh; c += kWarp) {
        bh[c] += alpha * gr[c];
        dqh[c] += dscore * qr[c];
      }
    }
  }
}

// What both backward sweeps read.
template <typename T>
struct BackwardArgs {
  const T* dagg = nullptr;     // [N, F]
  const T* row_max = nullptr;  // [N, H]
  const T* cdot = nullptr;     // [N, H]: dAgg . Agg per head
  const T* inv_sum = nullptr;  // [N, H]: 1 / row_sum, 0 for a row without edges
  std::vector<T> ps;           // [R, H] on the host: prior / sqrt(Dh), the GEMMs' scalars
};

// D1 over the segments: dQ, datt, dmsg, dprior (all zeroed by the caller).
template <typename T>
void BackwardDst(const KernelArgs& args, const HgtInputs<T>& in, const BackwardArgs<T>& ba, T* dq, T* datt, T* dmsg,
                 T* dprior, cudaStream_t stream, cublasHandle_t blas) {
  const DstLayout& l = in.dl;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  Sweep sw(args, DstSide(l), in.r, ChunkRows<T>(l.num_segs, 6 * f + h + 1), "dst", stream);
  const int64_t chunk = sw.chunk();
  Workspace<T> qt(args, chunk * f), gt(args, chunk * f), qp(args, chunk * f), gp(args, chunk * f), at(args, chunk * f),
      dk(args, chunk * f), dp(args, chunk * h), ones(args, chunk);
  FillKernel<T><<<Blocks(chunk), kThreads, 0, stream>>>(ones.get(), chunk, T(1));
  CheckLaunch("FillKernel");
  sw.ForEachChunk([&](int64_t rows) {
    Gather(in.q, f, l.seg_dst, sw, rows, qt.get(), stream);
    Gather(ba.dagg, f, l.seg_dst, sw, rows, gt.get(), stream);
    HeadProducts(blas, sw, rows, h, dh, qt.get(), in.att, Trans::kYes, qp.get());  // q' = Q att^T
    HeadProducts(blas, sw, rows, h, dh, gt.get(), in.msg, Trans::kYes, gp.get());  // g' = dAgg msg^T
    DstGradKernel<T><<<WarpBlocks(rows * h), kThreads, 0, stream>>>(
        in.k, in.v, h, dh, l, qp.get(), gp.get(), in.prior, in.scale, ba.row_max, ba.cdot, ba.inv_sum, sw.item_of(),
        sw.rel_of(), rows, at.get(), dk.get(), dp.get());
    CheckLaunch("DstGradKernel");
    sw.ForEachSlice(rows, [&](int64_t rel, int64_t lo, int64_t len) {
      for (int64_t c = 0; c < h; ++c) {
        const T ps = ba.ps[static_cast<size_t>(rel * h + c)];
        const int64_t off = lo * f + c * dh, mat = (rel * h + c) * dh * dh;
        // dQ_h = ps Dk_h att (into q', which the kernel has consumed); datt += ps Dk_h^T Q_h; dmsg += A_h^T dAgg_h.
        GemmRowMajor(blas, Trans::kNo, Trans::kNo, len, dh, dh, ps, dk.get() + off, f, in.att + mat, dh, T(0),
                     qp.get() + off, f);
        GemmRowMajor(blas, Trans::kYes, Trans::kNo, dh, dh, len, ps, dk.get() + off, f, qt.get() + off, f, T(1),
                     datt + mat, dh);
        GemmRowMajor(blas, Trans::kYes, Trans::kNo, dh, dh, len, T(1), at.get() + off, f, gt.get() + off, f, T(1),
                     dmsg + mat, dh);
      }
      // dprior[r, :] += scale * sum over the slice's rows of dp (d score / d prior = raw / sqrt(Dh)).
      GemmRowMajor(blas, Trans::kNo, Trans::kNo, 1, h, len, in.scale, ones.get(), chunk, dp.get() + lo * h, h, T(1),
                   dprior + rel * h, h);
    });
    ScatterAdd(qp.get(), f, l.seg_dst, sw, rows, dq, stream);
  });
}

// D2 over the pairs: dK and dV (zeroed by the caller).
template <typename T>
void BackwardSrc(const KernelArgs& args, const HgtInputs<T>& in, const BackwardArgs<T>& ba, T* dk, T* dv,
                 cudaStream_t stream, cublasHandle_t blas) {
  const SrcLayout& l = in.sl;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  Sweep sw(args, SrcSide(l), in.r, ChunkRows<T>(l.num_pairs, 6 * f), "src", stream);
  const int64_t chunk = sw.chunk();
  Workspace<T> kt(args, chunk * f), vt(args, chunk * f), kp(args, chunk * f), vp(args, chunk * f), bt(args, chunk * f),
      dqt(args, chunk * f);
  sw.ForEachChunk([&](int64_t rows) {
    Gather(in.k, f, l.pair_src, sw, rows, kt.get(), stream);
    Gather(in.v, f, l.pair_src, sw, rows, vt.get(), stream);
    HeadProducts(blas, sw, rows, h, dh, kt.get(), in.att, Trans::kNo, kp.get());  // K' = K att
    HeadProducts(blas, sw, rows, h, dh, vt.get(), in.msg, Trans::kNo, vp.get());  // V' = V msg
    SrcGradKernel<T><<<WarpBlocks(rows * h), kThreads, 0, stream>>>(
        in.q, ba.dagg, h, dh, l, in.dl.seg_dst, kp.get(), vp.get(), in.prior, in.scale, ba.row_max, ba.cdot, ba.inv_sum,
        sw.item_of(), sw.rel_of(), rows, bt.get(), dqt.get());
    CheckLaunch("SrcGradKernel");
    // dV_h = B_h msg^T into kt, dK_h = ps Dq_h att^T into vt (both free once K', V' are formed).
    sw.ForEachSlice(rows, [&](int64_t rel, int64_t lo, int64_t len) {
      for (int64_t c = 0; c < h; ++c) {
        const T ps = ba.ps[static_cast<size_t>(rel * h + c)];
        const int64_t off = lo * f + c * dh, mat = (rel * h + c) * dh * dh;
        GemmRowMajor(blas, Trans::kNo, Trans::kYes, len, dh, dh, T(1), bt.get() + off, f, in.msg + mat, dh, T(0),
                     kt.get() + off, f);
        GemmRowMajor(blas, Trans::kNo, Trans::kYes, len, dh, dh, ps, dqt.get() + off, f, in.att + mat, dh, T(0),
                     vt.get() + off, f);
      }
    });
    ScatterAdd(kt.get(), f, l.pair_src, sw, rows, dv, stream);
    ScatterAdd(vt.get(), f, l.pair_src, sw, rows, dk, stream);
  });
}

template <typename T>
void Backward(const KernelArgs& args, const HgtBwdArgs<T>& a) {
  const HgtInputs<T>& in = a.in;
  const int64_t n = in.n, f = in.f, m = in.m, r = in.r, h = in.h, dh = in.dh;
  const T* dagg = a.dagg;
  const T* agg = a.agg;
  const T* row_max = a.row_max;
  const T* row_sum = a.row_sum;
  T* dk = a.dk;
  T* dq = a.dq;
  T* dv = a.dv;
  T* datt = a.datt;
  T* dmsg = a.dmsg;
  T* dprior = a.dprior;
  cudaStream_t stream = StreamOf(args);
  ZeroAsync(dk, m * f, sizeof(T), stream, "zero dK");
  ZeroAsync(dq, n * f, sizeof(T), stream, "zero dQ");
  ZeroAsync(dv, m * f, sizeof(T), stream, "zero dV");
  ZeroAsync(datt, r * h * dh * dh, sizeof(T), stream, "zero datt");
  ZeroAsync(dmsg, r * h * dh * dh, sizeof(T), stream, "zero dmsg");
  ZeroAsync(dprior, r * h, sizeof(T), stream, "zero dprior");
  if (in.dl.num_edges == 0 || n * h == 0) return;  // no edge: every gradient is 0

  BackwardArgs<T> ba;
  ba.dagg = dagg;
  ba.row_max = row_max;
  // The GEMMs take their scalars on the host: prior / sqrt(Dh), rounded as the kernels round it.
  ba.ps.resize(static_cast<size_t>(r * h));
  CheckCuda(cudaMemcpyAsync(ba.ps.data(), in.prior, ba.ps.size() * sizeof(T), cudaMemcpyDeviceToHost, stream),
            "copy prior to host");
  CheckCuda(cudaStreamSynchronize(stream), "stream synchronize");
  for (T& p : ba.ps) p = p * in.scale;
  Workspace<T> stats(args, 2 * n * h);
  ba.cdot = stats.get();
  ba.inv_sum = stats.get() + n * h;
  BackwardStatsKernel<T>
      <<<Blocks(n * h), kThreads, 0, stream>>>(dagg, agg, row_sum, n * h, dh, stats.get(), stats.get() + n * h);
  CheckLaunch("BackwardStatsKernel");
  CublasPool::Lease blas = StateOf(args).blas.Acquire(stream);
  BackwardDst(args, in, ba, dq, datt, dmsg, dprior, stream, blas.get());
  BackwardSrc(args, in, ba, dk, dv, stream, blas.get());
}

struct HgtFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const HgtFwdArgs<T>& a) {
    Forward<T>(args, a);
  }
};

struct HgtBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const HgtBwdArgs<T>& a) {
    Backward<T>(args, a);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(HgtFwdCuda, HgtFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(HgtBwdCuda, HgtBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
