// rgnn.rgat.fwd and rgnn.rgat_embed.fwd on CPU: the forward of the fused RGAT layer over the segment
// layout (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "RGAT"); the backward is rgat_bwd_cpu.cc.
//
// Nothing of size edges x width or pairs x width ever exists. The attention logits are two scalars per
// head, s_src per pair and s_dst per segment (from X . (W_r att_r) with reorder on, K flops a row and
// head; from one GEMM per tile of X W_r with it off); per-edge values (score, alpha) are recomputed from
// them and the per-row softmax statistics whenever they are needed. The messages are aggregated first and
// multiplied by W_{r,h} once per tile of segments (linear-operator reordering).
//
// A1 s_src over the source blocks, A2 s_dst over the destination blocks, A3 per destination block: the
// softmax statistics of its rows, the aggregation, the merge of the heads. Every row a phase writes
// belongs to one block of that phase: no atomics, no races. Arguments, the layout and its checks:
// rgat_args.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "blas.h"
#include "fused_support.h"
#include "rgat_args.h"
#include "rgat_cpu.h"
#include "row_ops.h"

namespace tessel::kernels::rgnn {
namespace {

using rgat_cpu::ProjectAttention, rgat_cpu::Softmax;

// One side's hierarchy: blocks -> runs of one relation -> items (segments or pairs), each with a row.
struct Items {
  int64_t num_blocks;
  const int64_t* blk_run;
  const int32_t* run_rel;
  const int64_t* run_item;
  const int32_t* item_row;
};
Items DstItems(const DstLayout& l) { return {l.num_blocks, l.blk_run, l.run_rel, l.run_seg, l.seg_dst}; }
Items SrcItems(const SrcLayout& l) { return {l.num_blocks, l.blk_run, l.run_rel, l.run_pair, l.pair_src}; }

// s[item, h] = att[r, h] . (X[row(item)] W_r)_h for every item of one side, over its blocks: from wa
// when it is given (reorder), else from the tile's X W_r product.
template <typename T>
void FeatureScores(const KernelArgs& args, const RgatDims& d, const Items& it, const T* x, const T* w, const T* att,
                   const T* wa, T* s) {
  args.ParallelFor(it.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> xt, zt;
    if (wa == nullptr) {
      xt.resize(static_cast<size_t>(kTileRows * d.k));
      zt.resize(static_cast<size_t>(kTileRows * d.f));
    }
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t q = it.blk_run[b]; q < it.blk_run[b + 1]; ++q) {
        const int64_t rel = it.run_rel[q];
        if (wa != nullptr) {
          for (int64_t i = it.run_item[q]; i < it.run_item[q + 1]; ++i) {
            const T* row = x + static_cast<int64_t>(it.item_row[i]) * d.k;
            for (int64_t h = 0; h < d.heads; ++h) s[i * d.heads + h] = DotRow(d.k, row, wa + (rel * d.heads + h) * d.k);
          }
          continue;
        }
        for (int64_t i0 = it.run_item[q]; i0 < it.run_item[q + 1]; i0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, it.run_item[q + 1] - i0);
          for (int64_t i = 0; i < rows; ++i) {
            std::copy_n(x + static_cast<int64_t>(it.item_row[i0 + i]) * d.k, d.k, xt.data() + i * d.k);
          }
          Gemm<T>(Trans::kNo, Trans::kNo, rows, d.f, d.k, T(1), xt.data(), d.k, w + rel * d.k * d.f, d.f, T(0),
                  zt.data(), d.f);
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t h = 0; h < d.heads; ++h) {
              s[(i0 + i) * d.heads + h] =
                  DotRow(d.dh, zt.data() + i * d.f + h * d.dh, att + (rel * d.heads + h) * d.dh);
            }
          }
        }
      }
    }
  });
}

// The same with a one-hot input: (X[v] W_r) is row row_id[v] of the table W_r.
template <typename T>
void EmbedScores(const KernelArgs& args, const RgatDims& d, const Items& it, const T* table, const int64_t* row_id,
                 const T* att, T* s) {
  args.ParallelFor(it.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t q = it.blk_run[b]; q < it.blk_run[b + 1]; ++q) {
        const int64_t rel = it.run_rel[q];
        for (int64_t i = it.run_item[q]; i < it.run_item[q + 1]; ++i) {
          const T* z = table + (rel * d.k + row_id[it.item_row[i]]) * d.f;
          for (int64_t h = 0; h < d.heads; ++h) {
            s[i * d.heads + h] = DotRow(d.dh, z + h * d.dh, att + (rel * d.heads + h) * d.dh);
          }
        }
      }
    }
  });
}

// row_max and row_sum of destination block b's rows: the max over every edge into the row (all
// relations) of the score, and the sum of exp(score - max). A row without an edge gets 0 and 0.
template <typename T>
void BlockStatistics(const RgatDims& d, const RgatLayout& l, int64_t b, const T* s_src, const T* s_dst, T* row_max,
                     T* row_sum) {
  const DstLayout& dl = l.d;
  const int64_t h_n = d.heads;
  const T slope = static_cast<T>(d.slope);
  const int64_t r0 = dl.blk_row[b], r1 = dl.blk_row[b + 1];
  const int64_t s0 = dl.run_seg[dl.blk_run[b]], s1 = dl.run_seg[dl.blk_run[b + 1]];
  std::fill(row_max + r0 * h_n, row_max + r1 * h_n, -std::numeric_limits<T>::infinity());
  Zero((r1 - r0) * h_n, row_sum + r0 * h_n);
  const Softmax<T> sm{s_src, s_dst, row_max, row_sum, h_n, slope};
  for (int64_t s = s0; s < s1; ++s) {
    T* mx = row_max + static_cast<int64_t>(dl.seg_dst[s]) * h_n;
    for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
      for (int64_t h = 0; h < h_n; ++h) {
        const T score = sm.Score(sm.Raw(l.edge_pair[e], s, h));
        if (!(score <= mx[h])) mx[h] = score;  // NaN propagates
      }
    }
  }
  for (int64_t i = r0 * h_n; i < r1 * h_n; ++i) {
    if (row_max[i] == -std::numeric_limits<T>::infinity()) row_max[i] = T(0);  // no edge
  }
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t row = dl.seg_dst[s];
    for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
      for (int64_t h = 0; h < h_n; ++h) {
        row_sum[row * h_n + h] += std::exp(sm.Score(sm.Raw(l.edge_pair[e], s, h)) - row_max[row * h_n + h]);
      }
    }
  }
}

// Out of block b's rows from the per-head outputs `acc` [N, F]: their mean (merge = mean; acc is the
// heads output), or a copy of Out into the heads output when the caller asked for it (concat; acc is
// Out).
template <typename T>
void MergeHeads(const RgatDims& d, int64_t r0, int64_t r1, const T* acc, T* out, T* heads_out) {
  if (d.mean) {
    const T inv = T(1) / static_cast<T>(d.heads);
    for (int64_t i = r0; i < r1; ++i) {
      T* o = out + i * d.o;
      Zero(d.dh, o);
      for (int64_t h = 0; h < d.heads; ++h) AddRow(d.dh, acc + i * d.f + h * d.dh, o);
      for (int64_t c = 0; c < d.dh; ++c) o[c] *= inv;
    }
  } else if (heads_out != nullptr) {
    std::copy(out + r0 * d.f, out + r1 * d.f, heads_out + r0 * d.f);
  }
}

template <typename T>
void ForwardFeatures(const KernelArgs& args, const RgatDims& d, const RgatLayout& l, const T* x, const T* w,
                     const T* att_src, const T* att_dst, const RgatOutputs<T>& o) {
  // A1, A2: the logits.
  Workspace<T> wa(args, d.reorder ? 2 * d.r * d.heads * d.k : 0);
  const T* wa_src = nullptr;
  const T* wa_dst = nullptr;
  if (d.reorder) {
    ProjectAttention(args, d, w, att_src, wa.get());
    ProjectAttention(args, d, w, att_dst, wa.get() + d.r * d.heads * d.k);
    wa_src = wa.get();
    wa_dst = wa.get() + d.r * d.heads * d.k;
  }
  FeatureScores(args, d, SrcItems(l.s), x, w, att_src, wa_src, o.s_src);
  FeatureScores(args, d, DstItems(l.d), x, w, att_dst, wa_dst, o.s_dst);
  // A3: per destination block, the statistics, then per run and tile of segments the alpha-weighted sums
  // of the inputs per head, A_h [rows, K], times W_{r,h}.
  T* acc = d.mean ? o.heads : o.out;
  const DstLayout& dl = l.d;
  args.ParallelFor(dl.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> a(static_cast<size_t>(d.heads * kTileRows * d.k)), c(static_cast<size_t>(kTileRows * d.f));
    for (int64_t b = b0; b < b1; ++b) {
      BlockStatistics(d, l, b, o.s_src, o.s_dst, o.row_max, o.row_sum);
      const Softmax<T> sm{o.s_src, o.s_dst, o.row_max, o.row_sum, d.heads, static_cast<T>(d.slope)};
      Zero((dl.blk_row[b + 1] - dl.blk_row[b]) * d.f, acc + dl.blk_row[b] * d.f);
      for (int64_t q = dl.blk_run[b]; q < dl.blk_run[b + 1]; ++q) {
        const T* w_r = w + static_cast<int64_t>(dl.run_rel[q]) * d.k * d.f;
        for (int64_t s0 = dl.run_seg[q]; s0 < dl.run_seg[q + 1]; s0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, dl.run_seg[q + 1] - s0);
          for (int64_t h = 0; h < d.heads; ++h) Zero(rows * d.k, a.data() + h * kTileRows * d.k);
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t s = s0 + i, row = dl.seg_dst[s];
            for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
              if (e + kPrefetchAhead < dl.num_edges)
                PrefetchRow(x + static_cast<int64_t>(dl.edge_src[e + kPrefetchAhead]) * d.k, d.k);
              const T* xs = x + static_cast<int64_t>(dl.edge_src[e]) * d.k;
              for (int64_t h = 0; h < d.heads; ++h) {
                const T alpha = sm.Alpha(sm.Score(sm.Raw(l.edge_pair[e], s, h)), row, h);
                AxpyRow(d.k, alpha, xs, a.data() + (h * kTileRows + i) * d.k);
              }
            }
          }
          for (int64_t h = 0; h < d.heads; ++h) {
            Gemm<T>(Trans::kNo, Trans::kNo, rows, d.dh, d.k, T(1), a.data() + h * kTileRows * d.k, d.k, w_r + h * d.dh,
                    d.f, T(0), c.data() + h * d.dh, d.f);
          }
          for (int64_t i = 0; i < rows; ++i)
            AddRow(d.f, c.data() + i * d.f, acc + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.f);
        }
      }
      MergeHeads(d, dl.blk_row[b], dl.blk_row[b + 1], acc, o.out, o.heads);
    }
  });
}

template <typename T>
void ForwardEmbed(const KernelArgs& args, const RgatDims& d, const RgatLayout& l, const T* table, const int64_t* row_id,
                  const T* att_src, const T* att_dst, const RgatOutputs<T>& o) {
  EmbedScores(args, d, SrcItems(l.s), table, row_id, att_src, o.s_src);
  EmbedScores(args, d, DstItems(l.d), table, row_id, att_dst, o.s_dst);
  T* acc = d.mean ? o.heads : o.out;
  const DstLayout& dl = l.d;
  args.ParallelFor(dl.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      BlockStatistics(d, l, b, o.s_src, o.s_dst, o.row_max, o.row_sum);
      const Softmax<T> sm{o.s_src, o.s_dst, o.row_max, o.row_sum, d.heads, static_cast<T>(d.slope)};
      Zero((dl.blk_row[b + 1] - dl.blk_row[b]) * d.f, acc + dl.blk_row[b] * d.f);
      for (int64_t q = dl.blk_run[b]; q < dl.blk_run[b + 1]; ++q) {
        const T* table_r = table + static_cast<int64_t>(dl.run_rel[q]) * d.k * d.f;
        for (int64_t s = dl.run_seg[q]; s < dl.run_seg[q + 1]; ++s) {
          const int64_t row = dl.seg_dst[s];
          T* out_row = acc + row * d.f;
          for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
            if (e + kPrefetchAhead < dl.num_edges)
              PrefetchRow(table_r + row_id[dl.edge_src[e + kPrefetchAhead]] * d.f, d.f);
            const T* z = table_r + row_id[dl.edge_src[e]] * d.f;
            for (int64_t h = 0; h < d.heads; ++h) {
              const T alpha = sm.Alpha(sm.Score(sm.Raw(l.edge_pair[e], s, h)), row, h);
              AxpyRow(d.dh, alpha, z + h * d.dh, out_row + h * d.dh);
            }
          }
        }
      }
      MergeHeads(d, dl.blk_row[b], dl.blk_row[b + 1], acc, o.out, o.heads);
    }
  });
}

struct RgatFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatForwardArgs<T>& a) {
    ForwardFeatures(args, a.d, a.l, a.x, a.w, a.att_src, a.att_dst, a.o);
  }
};

struct RgatEmbedFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatForwardArgs<T>& a) {
    ForwardEmbed(args, a.d, a.l, a.w, a.row_id, a.att_src, a.att_dst, a.o);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(RgatFwdCpu, RgatFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(RgatEmbedFwdCpu, RgatEmbedFwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn
