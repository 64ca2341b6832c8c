// rgnn.rgat.* and rgnn.rgat_embed.* on CUDA: the fused RGAT layer over the segment layout
// (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "RGAT"), with the semantics of rgat_cpu.cc.
//
// Nothing of size edges x width or pairs x width exists whole. The logits are two scalars per head, s_src
// per pair and s_dst per segment (outputs of the forward, inputs of the backward); every per-edge value
// (score, alpha, dalpha, dz) is recomputed from them and the per-row softmax statistics where it is needed.
// Work that needs a relation's weights runs over the items (segments or pairs) in relation order, in chunks
// of at most kMaxChunkRows rows (Sweep in fused_cuda.cuh: one host sync reads the runs, a counting sort
// orders them by relation, a second sync uploads the order), so each chunk is a few relation slices and each
// slice one cuBLAS GEMM per head (or per relation). Scratch is a handful of [chunk, width] tiles from the host's
// workspace (Workspace<T>), bounded by kChunkBytes together.
//
// Forward (features):
//   logits  reorder on: wa[r,h] = W_{r,h} att[r,h] (a K-vector; ProjectAttentionKernel), then one warp per
//           item dots X[row] with wa. Reorder off: per chunk of each side, Z = X[row] W_r (GEMM), then
//           att . Z_h per (row, head).
//   stats   one thread per (segment, head): the segment's max score, folded into row_max with an atomic
//           compare-and-swap max; then exp(score - row_max) summed into row_sum with atomicAdd; rows without
//           an edge get max = sum = 0.
//   heads   per chunk of segments: A_h[row] = sum_{e in s} alpha(e, h) X[src(e)] (one warp per (row, head),
//           lanes over K), C_h = A_h W_{r,h} (one GEMM per slice and head), heads[seg_dst] += C (atomics: a
//           destination has one segment per relation). Out = heads (concat) or their mean.
// Backward (features), with dHeads = dOut (concat) or dOut / H (mean), c[i,h] = dHeads[i]_h . heads[i]_h:
//   B1, chunks of segments: dA_h = dHeads[dst]_h W_{r,h}^T (GEMM), dalpha(e) = dA_h . X[src(e)], ds_dst =
//       sum_e dz. Reorder on: dX[dst] += ds wa_dst (GEMM + scatter), dwa_dst[r] += ds^T X[dst] (GEMM).
//       Reorder off: Zd = X[dst] W_r, datt_dst += ds^T Zd_h, Q = ds att_dst, dW_r += X[dst]^T Q, dX[dst] +=
//       Q W_r^T (GEMMs + scatter).
//   B2, chunks of pairs: Z = X[src] W_r (GEMM); per (pair, head) B_h = sum_e alpha dHeads[dst]_h and ds_src =
//       sum_e dz with dalpha = dHeads[dst]_h . Z_h. Reorder off: B_h += ds att_src, datt_src += ds^T Z_h.
//       dW_r += X[src]^T B; dX[src] += B W_r^T (+ ds wa_src, reorder on); dwa_src[r] += ds^T X[src].
//   finish (reorder on): datt[r,h] = W_{r,h}^T dwa[r,h], dW_{r,h} += dwa[r,h] (outer) att[r,h].
// One-hot input (rgat_embed): z(v, r) is row (r, row_id[v]) of the table, so the logits and the forward
// aggregation are per-(item, head) warps with no GEMM; the backward is B1/B2 with the table rows gathered
// into the Z tiles and dz scattered into rows (r, row_id[.]) of dW (zeroed first) with atomics.
//
// Sums in float are reordered against the CPU kernels (atomics, cuBLAS blocking, warp reductions); outputs
// are nondeterministic in the last bits. The kernels trust the layout's indices (LayoutCheck::kStructure);
// the host checks only what it indexes itself (the run offsets and relations it sorts).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cuda_support.h"
#include "fused_cuda.cuh"
#include "kernels.h"
#include "segment_layout.h"

namespace tessel::kernels::rgnn {
namespace {

using std::to_string;

// The shared helpers (fused_cuda.cuh): chunks in relation order, warps, row gathers and scatters.
using fused_cuda::AtomicMax, fused_cuda::ChunkRows, fused_cuda::DstSide, fused_cuda::Exp, fused_cuda::FillKernel,
    fused_cuda::Gather, fused_cuda::GlobalWarp, fused_cuda::HeavyBlocks, fused_cuda::HeavyList, fused_cuda::HeavyUnits,
    fused_cuda::kHeavyEdges, fused_cuda::ListHeavy, fused_cuda::kWarp, fused_cuda::Lane, fused_cuda::RunOf,
    fused_cuda::RelOuterAdd, fused_cuda::RowRelGemm, fused_cuda::ScatterAdd, fused_cuda::Side, fused_cuda::SrcSide,
    fused_cuda::Sweep, fused_cuda::WarpBlocks, fused_cuda::WarpDot, fused_cuda::WarpStride, fused_cuda::ZeroAsync;

// ---------------------------------------------------------------------------------------------------
// Shapes, parameters and the layout (as rgat_cpu.cc; the indices themselves are trusted).

// `k` is the input width (features) or the table's row count V (embed).
struct Dims {
  int64_t m = 0, k = 0, r = 0, f = 0, heads = 0, dh = 0, n = 0, o = 0;
  bool mean = false, reorder = false;
  double slope = 0.2;
};

void CheckParams(const char* op, const tessel_rgat_params& p, Dims* d, int64_t att_heads, int64_t att_dh) {
  auto bad = [op](const std::string& message) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(op) + ": " + message);
  };
  if (p.heads < 1) bad("params.heads must be >= 1, is " + to_string(p.heads));
  if (p.merge != 0 && p.merge != 1) bad("params.merge must be 0 (concat) or 1 (mean), is " + to_string(p.merge));
  if (p.reorder != 0 && p.reorder != 1) bad("params.reorder must be 0 or 1, is " + to_string(p.reorder));
  if (!std::isfinite(p.negative_slope)) bad("params.negative_slope must be finite");
  if (d->f % p.heads != 0) {
    bad("the width F = " + to_string(d->f) + " of W is not divisible by params.heads = " + to_string(p.heads));
  }
  d->heads = p.heads;
  d->dh = d->f / p.heads;
  if (att_heads != d->heads || att_dh != d->dh) {
    bad("att_src/att_dst have shape [R, " + to_string(att_heads) + ", " + to_string(att_dh) + "], expected [R, " +
        to_string(d->heads) + ", " + to_string(d->dh) + "] (heads, F / heads)");
  }
  d->mean = p.merge == 1;
  d->reorder = p.reorder == 1;
  d->slope = static_cast<double>(p.negative_slope);
  const int64_t want_o = d->mean ? d->dh : d->f;
  if (d->o != want_o) {
    bad("dOut/Out has width " + to_string(d->o) + ", expected " + to_string(want_o) +
        (d->mean ? " (F / heads, merge = mean)" : " (F, merge = concat)"));
  }
  if (d->n > d->m) {
    bad("the output has " + to_string(d->n) + " rows, more than the input's " + to_string(d->m) +
        " (a destination row i is input row i)");
  }
}

void CheckRows(const char* what, int64_t actual, int64_t expected) {
  if (actual != expected) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         std::string(what) + " has " + to_string(actual) + " rows, expected " + to_string(expected));
  }
}

struct Layout {
  DstLayout d;
  SrcLayout s;
  const int32_t* edge_pair = nullptr;  // [E] the pair of each dst-major edge
};

// The DST layout at `first`, dedge_pair at first + 7, the SRC layout at first + 8.
Layout ReadLayout(const KernelArgs& args, int first, const Dims& dims) {
  Layout l;
  l.d = ReadDstLayout(args, first, dims.n, dims.m, dims.r, LayoutCheck::kStructure);
  l.s = ReadSrcLayout(args, first + 8, dims.m, dims.r, l.d.num_segs, LayoutCheck::kStructure);
  if (l.s.num_edges != l.d.num_edges) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "sedge_seg has " + to_string(l.s.num_edges) + " edges, dedge_src " + to_string(l.d.num_edges));
  }
  l.edge_pair = ReadEdgePair(args, first + 7, l.d.num_edges, l.s.num_pairs, LayoutCheck::kStructure);
  if ((l.d.num_segs > 0 && l.d.num_runs == 0) || (l.s.num_pairs > 0 && l.s.num_runs == 0)) {
    Fail(TESSEL_STATUS_BAD_DATA, "segment layout: items but no runs");
  }
  return l;
}

// ---------------------------------------------------------------------------------------------------
// Attention on the device.

// The softmax of one head over the edges into a row, from the per-item logits and the row statistics.
template <typename T>
struct Attention {
  const T* s_src;    // [U, H]
  const T* s_dst;    // [S, H]
  const T* row_max;  // [N, H]
  const T* row_sum;  // [N, H]
  int64_t heads;
  T slope;
  __device__ T Raw(int64_t pair, int64_t seg, int64_t h) const {
    return s_src[pair * heads + h] + s_dst[seg * heads + h];
  }
  __device__ T Score(T raw) const { return raw > T(0) ? raw : slope * raw; }
  // d score / d raw
  __device__ T Slope(T raw) const { return raw > T(0) ? T(1) : slope; }
  __device__ T Alpha(int64_t pair, int64_t seg, int64_t row, int64_t h) const {
    return Exp(Score(Raw(pair, seg, h)) - row_max[row * heads + h]) / row_sum[row * heads + h];
  }
  // d L / d raw of one edge: alpha (dalpha - c[row, h]) LeakyReLU'(raw).
  __device__ T Dz(int64_t pair, int64_t seg, int64_t row, int64_t h, T dalpha, const T* c) const {
    const T raw = Raw(pair, seg, h);
    const T alpha = Exp(Score(raw) - row_max[row * heads + h]) / row_sum[row * heads + h];
    return alpha * (dalpha - c[row * heads + h]) * Slope(raw);
  }
};

// wa[r, h, j] = sum_c W[r, j, h Dh + c] att[r, h, c]: att[r,h] . (x W_r)_h = x . wa[r, h].
template <typename T>
__global__ void ProjectAttentionKernel(const T* w, const T* att, int64_t r, int64_t k, int64_t heads, int64_t dh,
                                       T* wa) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < r * heads * k;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % k, rh = i / k, rel = rh / heads, h = rh % heads;
    const T* wr = w + (rel * k + j) * f + h * dh;
    const T* a = att + rh * dh;
    T acc = T(0);
    for (int64_t c = 0; c < dh; ++c) acc += wr[c] * a[c];
    wa[i] = acc;
  }
}

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
void Statistics(const Dims& d, const Layout& l, const Attention<T>& at, T* row_max, T* row_sum, cudaStream_t stream) {
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

// ---------------------------------------------------------------------------------------------------
// Forward.

constexpr int kVec = 4;  // columns per lane held in registers by AggregateKernel (128 per pass of a warp)

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

template <typename T>
struct Outputs {
  T *out, *heads, *s_src, *s_dst, *row_max, *row_sum;
};

template <typename T>
Outputs<T> ReadOutputs(const KernelArgs& args, Dims* d, int64_t* att_h, int64_t* s, int64_t* u) {
  Outputs<T> o{};
  d->n = kUnbound;
  d->o = kUnbound;
  int64_t hn = kUnbound, hf = kUnbound;
  o.out = args.Out<T>(0, "Out", {&d->n, &d->o});
  o.heads = args.Out<T>(1, "heads", {&hn, &hf});
  o.s_src = args.Out<T>(2, "s_src", {u, att_h});
  o.s_dst = args.Out<T>(3, "s_dst", {s, att_h});
  o.row_max = args.Out<T>(4, "row_max", {&d->n, att_h});
  o.row_sum = args.Out<T>(5, "row_sum", {&d->n, att_h});
  if (hn != 0 && (hn != d->n || hf != d->f)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'heads' must be [" + to_string(d->n) + ", " + to_string(d->f) +
                                             "] or have 0 rows (concat only), is [" + to_string(hn) + ", " +
                                             to_string(hf) + "]");
  }
  if (hn == 0) o.heads = nullptr;
  return o;
}

// The logits of the feature forward: s[item, h] for every item of `side`.
template <typename T>
void FeatureScores(const KernelArgs& args, const Dims& d, const Side& side, const T* x, const T* w, const T* att,
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
void MergeHeads(const Dims& d, const Outputs<T>& o, cudaStream_t stream) {
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
void Forward(const KernelArgs& args, bool embed) {
  const char* op = embed ? "rgnn.rgat_embed.fwd" : "rgnn.rgat.fwd";
  Dims d;
  int64_t att_h = kUnbound, att_dh = kUnbound, s = kUnbound, u = kUnbound;
  d.m = d.k = d.r = d.f = kUnbound;
  const T* x = nullptr;
  const T* w = nullptr;
  const int64_t* row_id = nullptr;
  if (embed) {
    w = args.In<T>(0, "W", {&d.r, &d.k, &d.f});
    row_id = args.In<int64_t>(1, "row_id", {&d.m});
  } else {
    x = args.In<T>(0, "X", {&d.m, &d.k});
    w = args.In<T>(1, "W", {&d.r, &d.k, &d.f});
  }
  const T* att_src = args.In<T>(2, "att_src", {&d.r, &att_h, &att_dh});
  const T* att_dst = args.In<T>(3, "att_dst", {&d.r, &att_h, &att_dh});
  const Outputs<T> o = ReadOutputs<T>(args, &d, &att_h, &s, &u);
  CheckParams(op, args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
  if (d.mean && o.heads == nullptr && d.n > 0) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(op) + ": merge = mean needs the output 'heads' [N, F]");
  }
  const Layout l = ReadLayout(args, 4, d);
  CheckRows("output 's_dst'", s, l.d.num_segs);
  CheckRows("output 's_src'", u, l.s.num_pairs);
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

// ---------------------------------------------------------------------------------------------------
// Backward.

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

// The inputs both backward kernels share after the weights: att_src, att_dst, heads, s_src, s_dst,
// row_max, row_sum (from input `first` on).
template <typename T>
struct Saved {
  const T *att_src, *att_dst, *heads, *s_src, *s_dst, *row_max, *row_sum;
  int64_t s = kUnbound, u = kUnbound;
};

template <typename T>
Saved<T> ReadSaved(const KernelArgs& args, int first, Dims* d, int64_t* att_h, int64_t* att_dh) {
  Saved<T> sv{};
  sv.att_src = args.In<T>(first, "att_src", {&d->r, att_h, att_dh});
  sv.att_dst = args.In<T>(first + 1, "att_dst", {&d->r, att_h, att_dh});
  sv.heads = args.In<T>(first + 2, "heads", {&d->n, &d->f});
  sv.s_src = args.In<T>(first + 3, "s_src", {&sv.u, att_h});
  sv.s_dst = args.In<T>(first + 4, "s_dst", {&sv.s, att_h});
  sv.row_max = args.In<T>(first + 5, "row_max", {&d->n, att_h});
  sv.row_sum = args.In<T>(first + 6, "row_sum", {&d->n, att_h});
  return sv;
}

// B and ds for the current chunk of pairs of `sw` (SrcGradKernel, then SrcGradHeavyKernel for the pairs it
// listed).
template <typename T>
void SrcGrad(const Dims& d, const Layout& l, const Attention<T>& at, const T* dout, T scale, const T* cdot, const T* z,
             const T* att_add, const Sweep& sw, int64_t rows, const HeavyList& heavy, T* b, T* ds,
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
void AttGradFromChunk(const Dims& d, const Sweep& sw, int64_t rows, cublasHandle_t blas, const T* ds, const T* z,
                      T* datt, cudaStream_t stream) {
  for (int64_t h = 0; h < d.heads; ++h) {
    RelOuterAdd(sw, rows, blas, 1, d.dh, T(1), ds + h, d.heads, z + h * d.dh, d.f, datt + h * d.dh, d.heads * d.dh,
                d.dh, stream);
  }
}

template <typename T>
void BackwardFeatures(const KernelArgs& args, const Dims& d, const Layout& l, const T* dout, const T* x, const T* w,
                      const Saved<T>& sv, T* dx, T* dw, T* datt_src, T* datt_dst, const T* cdot, cudaStream_t stream) {
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
void BackwardEmbed(const KernelArgs& args, const Dims& d, const Layout& l, const T* dout, const T* table,
                   const int64_t* row_id, const Saved<T>& sv, T* dw, T* datt_src, T* datt_dst, const T* cdot,
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
void Backward(const KernelArgs& args, bool embed) {
  const char* op = embed ? "rgnn.rgat_embed.bwd" : "rgnn.rgat.bwd";
  Dims d;
  int64_t att_h = kUnbound, att_dh = kUnbound;
  d.n = d.o = d.m = d.k = d.r = d.f = kUnbound;
  const T* dout = args.In<T>(0, "dOut", {&d.n, &d.o});
  const T* x = nullptr;
  const T* w = nullptr;
  const int64_t* row_id = nullptr;
  if (embed) {
    w = args.In<T>(1, "W", {&d.r, &d.k, &d.f});
    row_id = args.In<int64_t>(2, "row_id", {&d.m});
  } else {
    x = args.In<T>(1, "X", {&d.m, &d.k});
    w = args.In<T>(2, "W", {&d.r, &d.k, &d.f});
  }
  const Saved<T> sv = ReadSaved<T>(args, 3, &d, &att_h, &att_dh);
  T* dx = nullptr;
  int first_grad = 0;
  if (!embed) {
    int64_t dx_rows = kUnbound, dx_k = kUnbound;
    dx = args.Out<T>(0, "dX", {&dx_rows, &dx_k});
    if (dx_rows != 0 && (dx_rows != d.m || dx_k != d.k)) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT,
           "output 'dX' must have 0 rows (skip) or the shape of X [" + to_string(d.m) + ", " + to_string(d.k) + "]");
    }
    if (dx_rows == 0) dx = nullptr;
    first_grad = 1;
  }
  T* dw = args.Out<T>(first_grad, "dW", {&d.r, &d.k, &d.f});
  T* datt_src = args.Out<T>(first_grad + 1, "datt_src", {&d.r, &att_h, &att_dh});
  T* datt_dst = args.Out<T>(first_grad + 2, "datt_dst", {&d.r, &att_h, &att_dh});
  CheckParams(op, args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
  const Layout l = ReadLayout(args, 10, d);
  CheckRows("input 's_dst'", sv.s, l.d.num_segs);
  CheckRows("input 's_src'", sv.u, l.s.num_pairs);
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

struct RgatFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Forward<T>(args, /*embed=*/false);
  }
};

struct RgatBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Backward<T>(args, /*embed=*/false);
  }
};

struct RgatEmbedFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_embed_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Forward<T>(args, /*embed=*/true);
  }
};

struct RgatEmbedBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_embed_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Backward<T>(args, /*embed=*/true);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(RgatFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(RgatBwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(RgatEmbedFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(RgatEmbedBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn
