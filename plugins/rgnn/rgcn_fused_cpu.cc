// rgnn.rgcn.* and rgnn.rgcn_embed.* on CPU: the fused R-GCN layer over the segment layout
// (<tessel/ops/rgnn.h>). Forward aggregates each segment's inputs first and applies W_r to the
// aggregate (one GEMM per tile of a run's segments), so no pairs x width tensor ever exists; backward
// walks the source side the same way. Blocks run in parallel; each owns its output rows, so nothing is
// written by two threads and sums run in a fixed order. Arguments, the layout and its checks:
// rgcn_fused_args.h.
#include <vector>

#include "blas.h"
#include "fused_support.h"
#include "rgcn_fused_args.h"
#include "row_ops.h"

namespace tessel::kernels::rgnn {
namespace {

// Forward, with the input rows of a segment summed by `gather(src_row, acc)` (a feature row, or a row of
// W for the one-hot input) and then either multiplied by W_r (`apply`) or used as they are.
template <typename T>
void ForwardFeatures(const KernelArgs& args, const T* x, int64_t k, const T* w, int64_t d, const T* seg_norm,
                     const DstLayout& l, T* h) {
  args.ParallelFor(l.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> a(static_cast<size_t>(kTileRows * k)), c(static_cast<size_t>(kTileRows * d));
    for (int64_t b = b0; b < b1; ++b) {
      Zero((l.blk_row[b + 1] - l.blk_row[b]) * d, h + l.blk_row[b] * d);
      for (int64_t q = l.blk_run[b]; q < l.blk_run[b + 1]; ++q) {
        const T* w_r = w + static_cast<int64_t>(l.run_rel[q]) * k * d;
        for (int64_t s0 = l.run_seg[q]; s0 < l.run_seg[q + 1]; s0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, l.run_seg[q + 1] - s0);
          GatherSumItems(x, k, l.seg_edge + s0, rows, l.edge_src, nullptr, seg_norm + s0, a.data());
          Gemm<T>(Trans::kNo, Trans::kNo, rows, d, k, T(1), a.data(), k, w_r, d, T(0), c.data(), d);
          for (int64_t i = 0; i < rows; ++i)
            AddRow(d, c.data() + i * d, h + static_cast<int64_t>(l.seg_dst[s0 + i]) * d);
        }
      }
    }
  });
}

template <typename T>
void ForwardOneHot(const KernelArgs& args, const T* w, int64_t v, int64_t d, const int64_t* row_id, const T* seg_norm,
                   const DstLayout& l, T* h) {
  args.ParallelFor(l.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> c(static_cast<size_t>(kTileRows * d));
    for (int64_t b = b0; b < b1; ++b) {
      Zero((l.blk_row[b + 1] - l.blk_row[b]) * d, h + l.blk_row[b] * d);
      for (int64_t q = l.blk_run[b]; q < l.blk_run[b + 1]; ++q) {
        const T* w_r = w + static_cast<int64_t>(l.run_rel[q]) * v * d;
        for (int64_t s0 = l.run_seg[q]; s0 < l.run_seg[q + 1]; s0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, l.run_seg[q + 1] - s0);
          GatherSumItems(w_r, d, l.seg_edge + s0, rows, l.edge_src, row_id, seg_norm + s0, c.data());
          for (int64_t i = 0; i < rows; ++i)
            AddRow(d, c.data() + i * d, h + static_cast<int64_t>(l.seg_dst[s0 + i]) * d);
        }
      }
    }
  });
}

// B[u] = sum over the edges e of pair u of seg_norm[seg(e)] * dH[dst(e)], for the `count` pairs from u0
// (out: [count, d]): the gradient that reaches each pair's (aggregated, normalised) input.
template <typename T>
void PairGradients(const SrcLayout& l, int64_t u0, int64_t count, const T* dh, int64_t d, const T* seg_norm,
                   const int32_t* seg_dst, T* out) {
  GatherSegmentItems(dh, d, l.pair_edge + u0, count, l.edge_seg, seg_dst, seg_norm, out);
}

template <typename T>
void BackwardFeatures(const KernelArgs& args, const T* dh, int64_t d, const T* x, int64_t k, const T* w, int64_t r,
                      const T* seg_norm, const int32_t* seg_dst, const SrcLayout& l, T* dx, T* dw) {
  const int64_t weight = k * d;
  const int64_t groups = GradientGroups(l.num_blocks, r * weight * static_cast<int64_t>(sizeof(T)));
  Workspace<T> partial(args, groups * r * weight);
  std::vector<uint8_t> touched(static_cast<size_t>(groups * r), 0);
  args.ParallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
    std::vector<T> bt(static_cast<size_t>(kTileRows * d)), xt(static_cast<size_t>(kTileRows * k)),
        gt(static_cast<size_t>(kTileRows * k));
    for (int64_t g = g0; g < g1; ++g) {
      T* dw_g = partial.get() + g * r * weight;
      for (int64_t c = GroupBegin(g, groups, l.num_blocks); c < GroupBegin(g + 1, groups, l.num_blocks); ++c) {
        if (dx != nullptr) Zero((l.blk_row[c + 1] - l.blk_row[c]) * k, dx + l.blk_row[c] * k);
        for (int64_t p = l.blk_run[c]; p < l.blk_run[c + 1]; ++p) {
          const int64_t rel = l.run_rel[p];
          const T* w_r = w + rel * weight;
          uint8_t& first = touched[static_cast<size_t>(g * r + rel)];
          for (int64_t u0 = l.run_pair[p]; u0 < l.run_pair[p + 1]; u0 += kTileRows) {
            const int64_t rows = std::min(kTileRows, l.run_pair[p + 1] - u0);
            PairGradients(l, u0, rows, dh, d, seg_norm, seg_dst, bt.data());
            for (int64_t i = 0; i < rows; ++i) {
              std::copy_n(x + static_cast<int64_t>(l.pair_src[u0 + i]) * k, k, xt.data() + i * k);
            }
            Gemm<T>(Trans::kYes, Trans::kNo, k, d, rows, T(1), xt.data(), k, bt.data(), d, first ? T(1) : T(0),
                    dw_g + rel * weight, d);
            first = 1;
            if (dx == nullptr) continue;
            Gemm<T>(Trans::kNo, Trans::kYes, rows, k, d, T(1), bt.data(), d, w_r, d, T(0), gt.data(), k);
            for (int64_t i = 0; i < rows; ++i)
              AddRow(k, gt.data() + i * k, dx + static_cast<int64_t>(l.pair_src[u0 + i]) * k);
          }
        }
      }
    }
  });
  // dW[r] = the groups' partials in group order; zero for a relation no group touched.
  args.ParallelFor(r, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t rel = r0; rel < r1; ++rel) {
      T* out = dw + rel * weight;
      Zero(weight, out);
      for (int64_t g = 0; g < groups; ++g) {
        if (touched[static_cast<size_t>(g * r + rel)]) AddRow(weight, partial.get() + (g * r + rel) * weight, out);
      }
    }
  });
}

template <typename T>
void BackwardOneHot(const KernelArgs& args, const T* dh, int64_t d, const int64_t* row_id, int64_t r, int64_t v,
                    const T* seg_norm, const int32_t* seg_dst, const SrcLayout& l, T* dw) {
  args.ParallelFor(r * v, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)),
                   [&](int64_t i0, int64_t i1) { Zero((i1 - i0) * d, dw + i0 * d); });
  // Every (relation, row id) belongs to one source row, so to one block: blocks write disjoint rows of dW.
  args.ParallelFor(l.num_blocks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<T> bt(static_cast<size_t>(kTileRows * d));
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t p = l.blk_run[c]; p < l.blk_run[c + 1]; ++p) {
        T* dw_r = dw + static_cast<int64_t>(l.run_rel[p]) * v * d;
        for (int64_t u0 = l.run_pair[p]; u0 < l.run_pair[p + 1]; u0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, l.run_pair[p + 1] - u0);
          PairGradients(l, u0, rows, dh, d, seg_norm, seg_dst, bt.data());
          for (int64_t i = 0; i < rows; ++i) AddRow(d, bt.data() + i * d, dw_r + row_id[l.pair_src[u0 + i]] * d);
        }
      }
    }
  });
}

// dRows[u] = B[u] (PairGradients) for every pair: the one-hot weight gradient as rows (pair u's row of W is
// (r(u), row_id[src(u)])), each written by the block that owns the pair.
template <typename T>
void BackwardRows(const KernelArgs& args, const T* dh, int64_t d, const T* seg_norm, const int32_t* seg_dst,
                  const SrcLayout& l, T* rows) {
  args.ParallelFor(l.num_blocks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t u0 = l.run_pair[l.blk_run[c]], u1 = l.run_pair[l.blk_run[c + 1]];
      PairGradients(l, u0, u1 - u0, dh, d, seg_norm, seg_dst, rows + u0 * d);
    }
  });
}

struct RgcnFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnFwdArgs<T>& a) {
    ForwardFeatures(args, a.x, a.k, a.w, a.d, a.seg_norm, a.l, a.h);
  }
};

struct RgcnBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnBwdArgs<T>& a) {
    BackwardFeatures(args, a.dh, a.d, a.x, a.k, a.w, a.r, a.seg_norm, a.seg_dst, a.l, a.dx, a.dw);
  }
};

struct RgcnEmbedFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnEmbedFwdArgs<T>& a) {
    ForwardOneHot(args, a.w, a.v, a.d, a.row_id, a.seg_norm, a.l, a.h);
  }
};

struct RgcnEmbedBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnEmbedBwdArgs<T>& a) {
    BackwardOneHot(args, a.dh, a.d, a.row_id, a.r, a.v, a.seg_norm, a.seg_dst, a.l, a.dw);
  }
};

struct RgcnEmbedBwdRowsCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgcnEmbedBwdRowsArgs<T>& a) {
    BackwardRows(args, a.dh, a.d, a.seg_norm, a.seg_dst, a.l, a.rows);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(RgcnFwdCpu, RgcnFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(RgcnBwdCpu, RgcnBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(RgcnEmbedFwdCpu, RgcnEmbedFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(RgcnEmbedBwdCpu, RgcnEmbedBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(RgcnEmbedBwdRowsCpu, RgcnEmbedBwdRowsArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn
