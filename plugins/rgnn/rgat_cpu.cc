// rgnn.rgat.* and rgnn.rgat_embed.* on CPU: the fused RGAT layer over the segment layout
// (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "RGAT").
//
// Nothing of size edges x width or pairs x width ever exists. The attention logits are two scalars per
// head, s_src per pair and s_dst per segment (from X . (W_r att_r) with reorder on, K flops a row and
// head; from one GEMM per tile of X W_r with it off); per-edge values (score, alpha, dalpha) are
// recomputed from them and the per-row softmax statistics whenever they are needed. The messages are
// aggregated first and multiplied by W_{r,h} once per tile of segments (linear-operator reordering).
//
// Forward:  A1 s_src over the source blocks, A2 s_dst over the destination blocks, A3 per destination
//           block: the softmax statistics of its rows, the aggregation, the merge of the heads.
// Backward: c[i, h] = dHeads[i]_h . heads[i]_h (= sum_e alpha dalpha over the edges into i); B1 over
//           the destination blocks: ds_dst and the gradient through s_dst (dX of destination rows);
//           B2 over the source blocks: the messages and ds_src (dX of source rows, dW); the weight-type
//           gradients go to per-group partials summed in group order after each phase, so the result
//           depends on the shapes only, never on the number of threads.
// Every row a phase writes belongs to one block of that phase: no atomics, no races.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "blas.h"
#include "fused_support.h"
#include "kernels.h"
#include "row_ops.h"
#include "segment_layout.h"

namespace tessel::kernels::rgnn {
namespace {

using std::to_string;

// ---------------------------------------------------------------------------------------------------
// Shapes, parameters and the layout, checked.

// The sizes every rgat kernel shares. `k` is the input width (features) or the table's row count V
// (embed).
struct Dims {
  int64_t m = 0, k = 0, r = 0, f = 0, heads = 0, dh = 0, n = 0, o = 0;
  bool mean = false, reorder = false;
  double slope = 0.2;
};

// Checks the parameter struct against the shapes: heads >= 1, merge and reorder 0 or 1, a finite slope,
// F divisible by heads, att [R, heads, F / heads], O = F (concat) or F / heads (mean).
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

[[noreturn]] void BadLayout(const std::string& message) { Fail(TESSEL_STATUS_BAD_DATA, "segment layout: " + message); }

struct Layout {
  DstLayout d;
  SrcLayout s;
  const int32_t* edge_pair = nullptr;  // [E] the pair of each dst-major edge
};

// The relation of every item (segment or pair) of one side, from its runs.
void ItemRelations(int64_t runs, const int32_t* run_rel, const int64_t* run_item, int32_t* rel) {
  for (int64_t q = 0; q < runs; ++q) {
    for (int64_t i = run_item[q]; i < run_item[q + 1]; ++i) rel[i] = run_rel[q];
  }
}

// Both sides must describe the same edges: the pair of a dst-major edge has its source and relation, the
// segment of a src-major edge its relation, and every pair (segment) is named by as many edges of the
// other side as it holds.
void CheckCrossReferences(const KernelArgs& args, const Layout& l) {
  const DstLayout& d = l.d;
  const SrcLayout& s = l.s;
  Workspace<int32_t> rel(args, d.num_segs + s.num_pairs);
  Workspace<int64_t> count(args, d.num_segs + s.num_pairs);
  int32_t* seg_rel = rel.get();
  int32_t* pair_rel = rel.get() + d.num_segs;
  int64_t* seg_count = count.get();
  int64_t* pair_count = count.get() + d.num_segs;
  ItemRelations(d.num_runs, d.run_rel, d.run_seg, seg_rel);
  ItemRelations(s.num_runs, s.run_rel, s.run_pair, pair_rel);
  Zero(d.num_segs + s.num_pairs, count.get());
  for (int64_t sg = 0; sg < d.num_segs; ++sg) {
    for (int64_t e = d.seg_edge[sg]; e < d.seg_edge[sg + 1]; ++e) {
      const int64_t u = l.edge_pair[e];
      if (s.pair_src[u] != d.edge_src[e] || pair_rel[u] != seg_rel[sg]) {
        BadLayout("dedge_pair[" + to_string(e) + "] = " + to_string(u) + " is the pair (relation " +
                  to_string(pair_rel[u]) + ", source " + to_string(s.pair_src[u]) + "), but the edge is (relation " +
                  to_string(seg_rel[sg]) + ", source " + to_string(d.edge_src[e]) + ")");
      }
      ++pair_count[u];
    }
  }
  for (int64_t u = 0; u < s.num_pairs; ++u) {
    if (pair_count[u] != s.pair_edge[u + 1] - s.pair_edge[u]) {
      BadLayout("dedge_pair names pair " + to_string(u) + " " + to_string(pair_count[u]) + " times, it has " +
                to_string(s.pair_edge[u + 1] - s.pair_edge[u]) + " edges");
    }
    for (int64_t e = s.pair_edge[u]; e < s.pair_edge[u + 1]; ++e) {
      const int64_t sg = s.edge_seg[e];
      if (seg_rel[sg] != pair_rel[u]) {
        BadLayout("sedge_seg[" + to_string(e) + "] = " + to_string(sg) + " is a segment of relation " +
                  to_string(seg_rel[sg]) + ", the edge's pair has relation " + to_string(pair_rel[u]));
      }
      ++seg_count[sg];
    }
  }
  for (int64_t sg = 0; sg < d.num_segs; ++sg) {
    if (seg_count[sg] != d.seg_edge[sg + 1] - d.seg_edge[sg]) {
      BadLayout("sedge_seg names segment " + to_string(sg) + " " + to_string(seg_count[sg]) + " times, it has " +
                to_string(d.seg_edge[sg + 1] - d.seg_edge[sg]) + " edges");
    }
  }
}

// The DST layout at `first`, dedge_pair at first + 7, the SRC layout at first + 8, each index checked.
Layout ReadLayout(const KernelArgs& args, int first, const Dims& dims) {
  Layout l;
  l.d = ReadDstLayout(args, first, dims.n, dims.m, dims.r, LayoutCheck::kFull);
  l.s = ReadSrcLayout(args, first + 8, dims.m, dims.r, l.d.num_segs, LayoutCheck::kFull);
  if (l.s.num_edges != l.d.num_edges) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "sedge_seg has " + to_string(l.s.num_edges) + " edges, dedge_src " + to_string(l.d.num_edges));
  }
  l.edge_pair = ReadEdgePair(args, first + 7, l.d.num_edges, l.s.num_pairs, LayoutCheck::kFull);
  CheckCrossReferences(args, l);
  return l;
}

void CheckRowIds(const int64_t* row_id, int64_t m, int64_t v) {
  for (int64_t i = 0; i < m; ++i) {
    if (row_id[i] < 0 || row_id[i] >= v) {
      Fail(TESSEL_STATUS_BAD_DATA,
           "row_id[" + to_string(i) + "] = " + to_string(row_id[i]) + " is out of range [0, " + to_string(v) + ")");
    }
  }
}

// Whether no two input rows share a table row. Then the rows (r, row_id[j]) of dW that a block writes
// belong to it alone; otherwise the embed backward runs its blocks one after another.
bool RowIdsDistinct(const KernelArgs& args, const int64_t* row_id, int64_t m, int64_t v) {
  Workspace<uint8_t> seen(args, v);
  Zero(v, seen.get());
  for (int64_t i = 0; i < m; ++i) {
    if (seen.get()[row_id[i]]) return false;
    seen.get()[row_id[i]] = 1;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Shared pieces.

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

// The softmax of one head over the edges into a row, from the per-item logits and the row statistics.
template <typename T>
struct Softmax {
  const T* s_src;    // [U, H]
  const T* s_dst;    // [S, H]
  const T* row_max;  // [N, H]
  const T* row_sum;  // [N, H]
  int64_t heads;
  T slope;
  T Raw(int64_t pair, int64_t seg, int64_t h) const { return s_src[pair * heads + h] + s_dst[seg * heads + h]; }
  T Score(T raw) const { return raw > T(0) ? raw : slope * raw; }
  // d score / d raw
  T Slope(T raw) const { return raw > T(0) ? T(1) : slope; }
  T Alpha(T score, int64_t row, int64_t h) const {
    return std::exp(score - row_max[row * heads + h]) / row_sum[row * heads + h];
  }
};

// The gradient reaching head h of output row i: dOut[i]_h (concat) or dOut[i] / H (mean), as a row of
// dOut and a scale.
template <typename T>
struct HeadGrad {
  const T* dout;  // [N, O]
  int64_t o, dh;
  bool mean;
  T scale;
  HeadGrad(const T* dout_, const Dims& d)
      : dout(dout_), o(d.o), dh(d.dh), mean(d.mean), scale(d.mean ? T(1) / static_cast<T>(d.heads) : T(1)) {}
  const T* Row(int64_t i, int64_t h) const { return dout + i * o + (mean ? 0 : h * dh); }
};

// wa[r, h, :] = W_{r,h} att[r, h] (a K-vector per relation and head), so that att[r,h] . (x W_r)_h is
// x . wa[r, h, :]: the reordered attention logits.
template <typename T>
void ProjectAttention(const KernelArgs& args, const Dims& d, const T* w, const T* att, T* wa) {
  args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t rel = r0; rel < r1; ++rel) {
      for (int64_t h = 0; h < d.heads; ++h) {
        const T* a = att + (rel * d.heads + h) * d.dh;
        T* out = wa + (rel * d.heads + h) * d.k;
        for (int64_t j = 0; j < d.k; ++j) out[j] = DotRow(d.dh, w + (rel * d.k + j) * d.f + h * d.dh, a);
      }
    }
  });
}

// s[item, h] = att[r, h] . (X[row(item)] W_r)_h for every item of one side, over its blocks: from wa
// when it is given (reorder), else from the tile's X W_r product.
template <typename T>
void FeatureScores(const KernelArgs& args, const Dims& d, const Items& it, const T* x, const T* w, const T* att,
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
void EmbedScores(const KernelArgs& args, const Dims& d, const Items& it, const T* table, const int64_t* row_id,
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
void BlockStatistics(const Dims& d, const Layout& l, int64_t b, const T* s_src, const T* s_dst, T* row_max,
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
void MergeHeads(const Dims& d, int64_t r0, int64_t r1, const T* acc, T* out, T* heads_out) {
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

// Per-group partial sums of weight-type gradients: `slice` values per (group, relation), zeroed on first
// use, summed in group order.
template <typename T>
class Partials {
 public:
  Partials(const KernelArgs& args, int64_t groups, int64_t r, int64_t slice)
      : groups_(groups),
        r_(r),
        slice_(slice),
        data_(args, groups * r * slice),
        touched_(static_cast<size_t>(groups * r), 0) {}
  int64_t groups() const { return groups_; }
  // The slice of (group g, relation rel), zeroed the first time. Only group g's task calls this for g.
  T* Slice(int64_t g, int64_t rel) {
    T* p = data_.get() + (g * r_ + rel) * slice_;
    uint8_t& t = touched_[static_cast<size_t>(g * r_ + rel)];
    if (!t) {
      Zero(slice_, p);
      t = 1;
    }
    return p;
  }
  // out[0..n) += sum over groups, in order, of values [offset, offset + n) of relation rel's slices.
  void AddTo(int64_t rel, int64_t offset, int64_t n, T* out) const {
    for (int64_t g = 0; g < groups_; ++g) {
      if (touched_[static_cast<size_t>(g * r_ + rel)]) AddRow(n, data_.get() + (g * r_ + rel) * slice_ + offset, out);
    }
  }

 private:
  int64_t groups_, r_, slice_;
  Workspace<T> data_;
  std::vector<uint8_t> touched_;
};

// The groups of `num_blocks` blocks for partials of `slice` values per relation (at most 32 MiB of them
// per phase).
template <typename T>
int64_t Groups(int64_t num_blocks, int64_t r, int64_t slice) {
  return GradientGroups(num_blocks, r * slice * static_cast<int64_t>(sizeof(T)), int64_t{32} << 20);
}

// Runs fn(g, block) for every block of every group, groups in parallel, a group's blocks in order.
template <typename F>
void ForGroups(const KernelArgs& args, int64_t groups, int64_t num_blocks, F&& fn) {
  args.ParallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t b = GroupBegin(g, groups, num_blocks); b < GroupBegin(g + 1, groups, num_blocks); ++b) fn(g, b);
    }
  });
}

// c[i, h] = dHeads[i]_h . heads[i]_h: the softmax's sum_e alpha dalpha over the edges into i.
template <typename T>
void HeadDots(const KernelArgs& args, const Dims& d, const HeadGrad<T>& dg, const T* heads, T* c) {
  args.ParallelFor(d.n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t h = 0; h < d.heads; ++h) {
        c[i * d.heads + h] = dg.scale * DotRow(d.dh, dg.Row(i, h), heads + i * d.f + h * d.dh);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------------
// Forward.

// The outputs of rgnn.rgat.fwd / rgnn.rgat_embed.fwd; heads is null when the caller skipped it.
template <typename T>
struct Outputs {
  T *out, *heads, *s_src, *s_dst, *row_max, *row_sum;
};

// Reads and checks them, binding N and O in d, S in *s and U in *u (d->heads and d->f already bound).
template <typename T>
Outputs<T> ReadOutputs(const KernelArgs& args, Dims* d, int64_t* s, int64_t* u) {
  Outputs<T> o{};
  d->n = kUnbound;
  d->o = kUnbound;
  int64_t hn = kUnbound, hf = kUnbound;
  o.out = args.Out<T>(0, "Out", {&d->n, &d->o});
  o.heads = args.Out<T>(1, "heads", {&hn, &hf});
  o.s_src = args.Out<T>(2, "s_src", {u, &d->heads});
  o.s_dst = args.Out<T>(3, "s_dst", {s, &d->heads});
  o.row_max = args.Out<T>(4, "row_max", {&d->n, &d->heads});
  o.row_sum = args.Out<T>(5, "row_sum", {&d->n, &d->heads});
  if (hn != 0 && (hn != d->n || hf != d->f)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'heads' must be [" + to_string(d->n) + ", " + to_string(d->f) +
                                             "] or have 0 rows (concat only), is [" + to_string(hn) + ", " +
                                             to_string(hf) + "]");
  }
  if (hn == 0) o.heads = nullptr;
  return o;
}

template <typename T>
void ForwardFeatures(const KernelArgs& args, const Dims& d, const Layout& l, const T* x, const T* w, const T* att_src,
                     const T* att_dst, const Outputs<T>& o) {
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
void ForwardEmbed(const KernelArgs& args, const Dims& d, const Layout& l, const T* table, const int64_t* row_id,
                  const T* att_src, const T* att_dst, const Outputs<T>& o) {
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

// ---------------------------------------------------------------------------------------------------
// Backward.

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

void CheckSavedRows(const Layout& l, int64_t s, int64_t u) {
  CheckRows("input 's_dst'", s, l.d.num_segs);
  CheckRows("input 's_src'", u, l.s.num_pairs);
}

// dW, datt_src, datt_dst of the feature backward.
template <typename T>
struct WeightGrads {
  T *dw, *datt_src, *datt_dst;
};

template <typename T>
void BackwardFeatures(const KernelArgs& args, const Dims& d, const Layout& l, const T* dout, const T* x, const T* w,
                      const Saved<T>& sv, T* dx, const WeightGrads<T>& out) {
  const HeadGrad<T> dg(dout, d);
  const Softmax<T> sm{sv.s_src, sv.s_dst, sv.row_max, sv.row_sum, d.heads, static_cast<T>(d.slope)};
  const int64_t kf = d.k * d.f, hk = d.heads * d.k, hd = d.heads * d.dh;
  Workspace<T> c(args, d.n * d.heads);
  HeadDots(args, d, dg, sv.heads, c.get());
  Workspace<T> wa(args, d.reorder ? 2 * d.r * hk : 0);
  if (d.reorder) {
    ProjectAttention(args, d, w, sv.att_src, wa.get());
    ProjectAttention(args, d, w, sv.att_dst, wa.get() + d.r * hk);
  }
  const T* wa_src = wa.get();
  const T* wa_dst = d.reorder ? wa.get() + d.r * hk : nullptr;
  if (dx != nullptr) {
    args.ParallelFor(d.m, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.k)),
                     [&](int64_t i0, int64_t i1) { Zero((i1 - i0) * d.k, dx + i0 * d.k); });
  }
  // The per-edge dz = alpha (dalpha - c[dst]) LeakyReLU'(raw), summed into ds of the edge's item.
  auto dz = [&](int64_t pair, int64_t seg, int64_t row, int64_t h, T dalpha) {
    const T raw = sm.Raw(pair, seg, h);
    return sm.Alpha(sm.Score(raw), row, h) * (dalpha - c.get()[row * d.heads + h]) * sm.Slope(raw);
  };

  // B1, over the destination blocks: per tile of segments, dA_h = dHeads[dst]_h W_{r,h}^T, dalpha = dA_h .
  // X[src], ds_dst; then the s_dst path into dX[dst] and the dwa_dst (reorder) or dW, datt_dst partials.
  {
    const DstLayout& dl = l.d;
    const int64_t slice = d.reorder ? hk : kf + hd;  // [dwa [H, K]] or [dW [K, F], datt [H, Dh]]
    Partials<T> part(args, Groups<T>(dl.num_blocks, d.r, slice), d.r, slice);
    args.ParallelFor(part.groups(), 1, [&](int64_t g0, int64_t g1) {
      std::vector<T> gt(static_cast<size_t>(kTileRows * d.o)), da(static_cast<size_t>(d.heads * kTileRows * d.k)),
          ds(static_cast<size_t>(kTileRows * d.heads)), xt, zt, qt, gx;
      if (!d.reorder) {
        xt.resize(static_cast<size_t>(kTileRows * d.k));
        zt.resize(static_cast<size_t>(kTileRows * d.f));
        qt.resize(static_cast<size_t>(kTileRows * d.f));
        gx.resize(static_cast<size_t>(kTileRows * d.k));
      }
      for (int64_t g = g0; g < g1; ++g) {
        for (int64_t b = GroupBegin(g, part.groups(), dl.num_blocks);
             b < GroupBegin(g + 1, part.groups(), dl.num_blocks); ++b) {
          for (int64_t q = dl.blk_run[b]; q < dl.blk_run[b + 1]; ++q) {
            const int64_t rel = dl.run_rel[q];
            const T* w_r = w + rel * kf;
            T* p = part.Slice(g, rel);
            for (int64_t s0 = dl.run_seg[q]; s0 < dl.run_seg[q + 1]; s0 += kTileRows) {
              const int64_t rows = std::min(kTileRows, dl.run_seg[q + 1] - s0);
              for (int64_t i = 0; i < rows; ++i) {
                std::copy_n(dout + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.o, d.o, gt.data() + i * d.o);
              }
              for (int64_t h = 0; h < d.heads; ++h) {
                Gemm<T>(Trans::kNo, Trans::kYes, rows, d.k, d.dh, dg.scale, gt.data() + (d.mean ? 0 : h * d.dh), d.o,
                        w_r + h * d.dh, d.f, T(0), da.data() + h * kTileRows * d.k, d.k);
              }
              Zero(rows * d.heads, ds.data());
              for (int64_t i = 0; i < rows; ++i) {
                const int64_t s = s0 + i, row = dl.seg_dst[s];
                for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
                  if (e + kPrefetchAhead < dl.num_edges)
                    PrefetchRow(x + static_cast<int64_t>(dl.edge_src[e + kPrefetchAhead]) * d.k, d.k);
                  const T* xs = x + static_cast<int64_t>(dl.edge_src[e]) * d.k;
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T dalpha = DotRow(d.k, da.data() + (h * kTileRows + i) * d.k, xs);
                    ds[i * d.heads + h] += dz(l.edge_pair[e], s, row, h, dalpha);
                  }
                }
              }
              if (d.reorder) {
                for (int64_t i = 0; i < rows; ++i) {
                  const int64_t row = dl.seg_dst[s0 + i];
                  const T* xd = x + row * d.k;
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T v = ds[i * d.heads + h];
                    if (dx != nullptr) AxpyRow(d.k, v, wa_dst + (rel * d.heads + h) * d.k, dx + row * d.k);
                    AxpyRow(d.k, v, xd, p + h * d.k);
                  }
                }
                continue;
              }
              // Through z(dst, r) = X[dst] W_r: dz_h = ds_h att_dst[r, h] (Q); datt_dst += ds z;
              // dW_r += X[dst]^T Q; dX[dst] += Q W_r^T.
              for (int64_t i = 0; i < rows; ++i) {
                std::copy_n(x + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.k, d.k, xt.data() + i * d.k);
              }
              Gemm<T>(Trans::kNo, Trans::kNo, rows, d.f, d.k, T(1), xt.data(), d.k, w_r, d.f, T(0), zt.data(), d.f);
              for (int64_t i = 0; i < rows; ++i) {
                for (int64_t h = 0; h < d.heads; ++h) {
                  const T v = ds[i * d.heads + h];
                  const T* a = sv.att_dst + (rel * d.heads + h) * d.dh;
                  T* qrow = qt.data() + i * d.f + h * d.dh;
                  for (int64_t j = 0; j < d.dh; ++j) qrow[j] = v * a[j];
                  AxpyRow(d.dh, v, zt.data() + i * d.f + h * d.dh, p + kf + h * d.dh);
                }
              }
              Gemm<T>(Trans::kYes, Trans::kNo, d.k, d.f, rows, T(1), xt.data(), d.k, qt.data(), d.f, T(1), p, d.f);
              if (dx == nullptr) continue;
              Gemm<T>(Trans::kNo, Trans::kYes, rows, d.k, d.f, T(1), qt.data(), d.f, w_r, d.f, T(0), gx.data(), d.k);
              for (int64_t i = 0; i < rows; ++i) {
                AddRow(d.k, gx.data() + i * d.k, dx + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.k);
              }
            }
          }
        }
      }
    });
    // dW and datt_dst from B1's partials (this is where dW starts).
    args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
      std::vector<T> dwa(static_cast<size_t>(hk));
      for (int64_t rel = r0; rel < r1; ++rel) {
        T* dw_r = out.dw + rel * kf;
        T* datt_r = out.datt_dst + rel * hd;
        Zero(kf, dw_r);
        Zero(hd, datt_r);
        if (!d.reorder) {
          part.AddTo(rel, 0, kf, dw_r);
          part.AddTo(rel, kf, hd, datt_r);
          continue;
        }
        // datt_dst[r, h] = W_{r,h}^T dwa_dst[r, h]; dW_{r,h} = dwa_dst[r, h] (outer) att_dst[r, h].
        Zero(hk, dwa.data());
        part.AddTo(rel, 0, hk, dwa.data());
        for (int64_t j = 0; j < d.k; ++j) {
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = dwa[static_cast<size_t>(h * d.k + j)];
            AxpyRow(d.dh, v, w + rel * kf + j * d.f + h * d.dh, datt_r + h * d.dh);
            AxpyRow(d.dh, v, sv.att_dst + (rel * d.heads + h) * d.dh, dw_r + j * d.f + h * d.dh);
          }
        }
      }
    });
  }

  // B2, over the source blocks: per tile of pairs, Z = X[src] W_r, B_h = sum_e alpha dHeads[dst]_h,
  // dalpha = dHeads[dst]_h . Z_h, ds_src; dX[src] += B W_r^T, dW_r += X[src]^T B (B including the
  // attention path ds_src att_src with reorder off), and the s_src path through wa_src with it on.
  {
    const SrcLayout& sl = l.s;
    const int64_t slice = kf + (d.reorder ? hk : hd);  // [dW [K, F], dwa [H, K] or datt [H, Dh]]
    Partials<T> part(args, Groups<T>(sl.num_blocks, d.r, slice), d.r, slice);
    args.ParallelFor(part.groups(), 1, [&](int64_t g0, int64_t g1) {
      std::vector<T> xt(static_cast<size_t>(kTileRows * d.k)), zt(static_cast<size_t>(kTileRows * d.f)),
          bt(static_cast<size_t>(kTileRows * d.f)), ds(static_cast<size_t>(kTileRows * d.heads)),
          gx(static_cast<size_t>(kTileRows * d.k));
      for (int64_t g = g0; g < g1; ++g) {
        for (int64_t cb = GroupBegin(g, part.groups(), sl.num_blocks);
             cb < GroupBegin(g + 1, part.groups(), sl.num_blocks); ++cb) {
          for (int64_t pr = sl.blk_run[cb]; pr < sl.blk_run[cb + 1]; ++pr) {
            const int64_t rel = sl.run_rel[pr];
            const T* w_r = w + rel * kf;
            T* p = part.Slice(g, rel);
            for (int64_t u0 = sl.run_pair[pr]; u0 < sl.run_pair[pr + 1]; u0 += kTileRows) {
              const int64_t rows = std::min(kTileRows, sl.run_pair[pr + 1] - u0);
              for (int64_t i = 0; i < rows; ++i) {
                std::copy_n(x + static_cast<int64_t>(sl.pair_src[u0 + i]) * d.k, d.k, xt.data() + i * d.k);
              }
              Gemm<T>(Trans::kNo, Trans::kNo, rows, d.f, d.k, T(1), xt.data(), d.k, w_r, d.f, T(0), zt.data(), d.f);
              Zero(rows * d.f, bt.data());
              Zero(rows * d.heads, ds.data());
              for (int64_t i = 0; i < rows; ++i) {
                const int64_t u = u0 + i;
                for (int64_t e = sl.pair_edge[u]; e < sl.pair_edge[u + 1]; ++e) {
                  if (e + kPrefetchAhead < sl.num_edges)
                    PrefetchRow(dg.Row(l.d.seg_dst[sl.edge_seg[e + kPrefetchAhead]], 0), d.o);
                  const int64_t seg = sl.edge_seg[e], row = l.d.seg_dst[seg];
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T* gh = dg.Row(row, h);
                    const T alpha = sm.Alpha(sm.Score(sm.Raw(u, seg, h)), row, h);
                    AxpyRow(d.dh, alpha * dg.scale, gh, bt.data() + i * d.f + h * d.dh);
                    const T dalpha = dg.scale * DotRow(d.dh, gh, zt.data() + i * d.f + h * d.dh);
                    ds[i * d.heads + h] += dz(u, seg, row, h, dalpha);
                  }
                }
              }
              if (!d.reorder) {
                // Through z(src, r): datt_src += ds z; the message gradient B gains ds att_src.
                for (int64_t i = 0; i < rows; ++i) {
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T v = ds[i * d.heads + h];
                    AxpyRow(d.dh, v, zt.data() + i * d.f + h * d.dh, p + kf + h * d.dh);
                    AxpyRow(d.dh, v, sv.att_src + (rel * d.heads + h) * d.dh, bt.data() + i * d.f + h * d.dh);
                  }
                }
              }
              Gemm<T>(Trans::kYes, Trans::kNo, d.k, d.f, rows, T(1), xt.data(), d.k, bt.data(), d.f, T(1), p, d.f);
              if (dx != nullptr) {
                Gemm<T>(Trans::kNo, Trans::kYes, rows, d.k, d.f, T(1), bt.data(), d.f, w_r, d.f, T(0), gx.data(), d.k);
                for (int64_t i = 0; i < rows; ++i) {
                  AddRow(d.k, gx.data() + i * d.k, dx + static_cast<int64_t>(sl.pair_src[u0 + i]) * d.k);
                }
              }
              if (d.reorder) {
                for (int64_t i = 0; i < rows; ++i) {
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T v = ds[i * d.heads + h];
                    if (dx != nullptr) {
                      AxpyRow(d.k, v, wa_src + (rel * d.heads + h) * d.k,
                              dx + static_cast<int64_t>(sl.pair_src[u0 + i]) * d.k);
                    }
                    AxpyRow(d.k, v, xt.data() + i * d.k, p + kf + h * d.k);
                  }
                }
              }
            }
          }
        }
      }
    });
    args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
      std::vector<T> dwa(static_cast<size_t>(hk));
      for (int64_t rel = r0; rel < r1; ++rel) {
        T* dw_r = out.dw + rel * kf;
        T* datt_r = out.datt_src + rel * hd;
        part.AddTo(rel, 0, kf, dw_r);
        Zero(hd, datt_r);
        if (!d.reorder) {
          part.AddTo(rel, kf, hd, datt_r);
          continue;
        }
        Zero(hk, dwa.data());
        part.AddTo(rel, kf, hk, dwa.data());
        for (int64_t j = 0; j < d.k; ++j) {
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = dwa[static_cast<size_t>(h * d.k + j)];
            AxpyRow(d.dh, v, w + rel * kf + j * d.f + h * d.dh, datt_r + h * d.dh);
            AxpyRow(d.dh, v, sv.att_src + (rel * d.heads + h) * d.dh, dw_r + j * d.f + h * d.dh);
          }
        }
      }
    });
  }
}

// The one-hot backward: z(v, r) is row (r, row_id[v]) of the table, so dz lands on that row of dW. dW is
// zeroed, then B1 writes the destination rows' share (through s_dst), B2 the source rows' (messages and
// s_src); datt from per-group partials.
template <typename T>
void BackwardEmbed(const KernelArgs& args, const Dims& d, const Layout& l, const T* dout, const T* table,
                   const int64_t* row_id, const Saved<T>& sv, const WeightGrads<T>& out) {
  const HeadGrad<T> dg(dout, d);
  const Softmax<T> sm{sv.s_src, sv.s_dst, sv.row_max, sv.row_sum, d.heads, static_cast<T>(d.slope)};
  const int64_t hd = d.heads * d.dh;
  Workspace<T> c(args, d.n * d.heads);
  HeadDots(args, d, dg, sv.heads, c.get());
  args.ParallelFor(d.r * d.k, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.f)),
                   [&](int64_t i0, int64_t i1) { Zero((i1 - i0) * d.f, out.dw + i0 * d.f); });
  const bool distinct = RowIdsDistinct(args, row_id, d.m, d.k);
  auto dz = [&](int64_t pair, int64_t seg, int64_t row, int64_t h, T dalpha) {
    const T raw = sm.Raw(pair, seg, h);
    return sm.Alpha(sm.Score(raw), row, h) * (dalpha - c.get()[row * d.heads + h]) * sm.Slope(raw);
  };
  // Writes datt from the partials of one phase.
  auto finish = [&](const Partials<T>& part, T* datt) {
    args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t rel = r0; rel < r1; ++rel) {
        Zero(hd, datt + rel * hd);
        part.AddTo(rel, 0, hd, datt + rel * hd);
      }
    });
  };
  {  // B1
    const DstLayout& dl = l.d;
    Partials<T> part(args, distinct ? Groups<T>(dl.num_blocks, d.r, hd) : 1, d.r, hd);
    ForGroups(args, part.groups(), dl.num_blocks, [&](int64_t g, int64_t b) {
      std::vector<T> ds(static_cast<size_t>(d.heads));
      for (int64_t q = dl.blk_run[b]; q < dl.blk_run[b + 1]; ++q) {
        const int64_t rel = dl.run_rel[q];
        const T* table_r = table + rel * d.k * d.f;
        T* p = part.Slice(g, rel);
        for (int64_t s = dl.run_seg[q]; s < dl.run_seg[q + 1]; ++s) {
          const int64_t row = dl.seg_dst[s];
          std::fill(ds.begin(), ds.end(), T(0));
          for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
            if (e + kPrefetchAhead < dl.num_edges)
              PrefetchRow(table_r + row_id[dl.edge_src[e + kPrefetchAhead]] * d.f, d.f);
            const T* z = table_r + row_id[dl.edge_src[e]] * d.f;
            for (int64_t h = 0; h < d.heads; ++h) {
              const T dalpha = dg.scale * DotRow(d.dh, dg.Row(row, h), z + h * d.dh);
              ds[static_cast<size_t>(h)] += dz(l.edge_pair[e], s, row, h, dalpha);
            }
          }
          const T* zd = table_r + row_id[row] * d.f;
          T* dw_row = out.dw + (rel * d.k + row_id[row]) * d.f;
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = ds[static_cast<size_t>(h)];
            AxpyRow(d.dh, v, zd + h * d.dh, p + h * d.dh);
            AxpyRow(d.dh, v, sv.att_dst + (rel * d.heads + h) * d.dh, dw_row + h * d.dh);
          }
        }
      }
    });
    finish(part, out.datt_dst);
  }
  {  // B2
    const SrcLayout& sl = l.s;
    Partials<T> part(args, distinct ? Groups<T>(sl.num_blocks, d.r, hd) : 1, d.r, hd);
    ForGroups(args, part.groups(), sl.num_blocks, [&](int64_t g, int64_t cb) {
      std::vector<T> ds(static_cast<size_t>(d.heads));
      for (int64_t pr = sl.blk_run[cb]; pr < sl.blk_run[cb + 1]; ++pr) {
        const int64_t rel = sl.run_rel[pr];
        T* p = part.Slice(g, rel);
        for (int64_t u = sl.run_pair[pr]; u < sl.run_pair[pr + 1]; ++u) {
          const int64_t id = row_id[sl.pair_src[u]];
          const T* z = table + (rel * d.k + id) * d.f;
          T* dw_row = out.dw + (rel * d.k + id) * d.f;
          std::fill(ds.begin(), ds.end(), T(0));
          for (int64_t e = sl.pair_edge[u]; e < sl.pair_edge[u + 1]; ++e) {
            if (e + kPrefetchAhead < sl.num_edges)
              PrefetchRow(dg.Row(l.d.seg_dst[sl.edge_seg[e + kPrefetchAhead]], 0), d.o);
            const int64_t seg = sl.edge_seg[e], row = l.d.seg_dst[seg];
            for (int64_t h = 0; h < d.heads; ++h) {
              const T* gh = dg.Row(row, h);
              const T alpha = sm.Alpha(sm.Score(sm.Raw(u, seg, h)), row, h);
              AxpyRow(d.dh, alpha * dg.scale, gh, dw_row + h * d.dh);
              ds[static_cast<size_t>(h)] += dz(u, seg, row, h, dg.scale * DotRow(d.dh, gh, z + h * d.dh));
            }
          }
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = ds[static_cast<size_t>(h)];
            AxpyRow(d.dh, v, z + h * d.dh, p + h * d.dh);
            AxpyRow(d.dh, v, sv.att_src + (rel * d.heads + h) * d.dh, dw_row + h * d.dh);
          }
        }
      }
    });
    finish(part, out.datt_src);
  }
}

// ---------------------------------------------------------------------------------------------------
// The kernel classes.

struct RgatFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Dims d;
    int64_t att_h = kUnbound, att_dh = kUnbound, s = kUnbound, u = kUnbound;
    d.m = d.k = d.r = d.f = kUnbound;
    const T* x = args.In<T>(0, "X", {&d.m, &d.k});
    const T* w = args.In<T>(1, "W", {&d.r, &d.k, &d.f});
    const T* att_src = args.In<T>(2, "att_src", {&d.r, &att_h, &att_dh});
    const T* att_dst = args.In<T>(3, "att_dst", {&d.r, &att_h, &att_dh});
    d.heads = att_h;
    const Outputs<T> o = ReadOutputs<T>(args, &d, &s, &u);
    CheckParams("rgnn.rgat.fwd", args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
    if (d.mean && o.heads == nullptr && d.n > 0) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "rgnn.rgat.fwd: merge = mean needs the output 'heads' [N, F]");
    }
    const Layout l = ReadLayout(args, 4, d);
    CheckRows("output 's_dst'", s, l.d.num_segs);
    CheckRows("output 's_src'", u, l.s.num_pairs);
    ForwardFeatures(args, d, l, x, w, att_src, att_dst, o);
  }
};

struct RgatBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Dims d;
    int64_t att_h = kUnbound, att_dh = kUnbound, dx_rows = kUnbound, dx_k = kUnbound;
    d.n = d.o = d.m = d.k = d.r = d.f = kUnbound;
    const T* dout = args.In<T>(0, "dOut", {&d.n, &d.o});
    const T* x = args.In<T>(1, "X", {&d.m, &d.k});
    const T* w = args.In<T>(2, "W", {&d.r, &d.k, &d.f});
    const Saved<T> sv = ReadSaved<T>(args, 3, &d, &att_h, &att_dh);
    T* dx = args.Out<T>(0, "dX", {&dx_rows, &dx_k});
    if (dx_rows != 0 && (dx_rows != d.m || dx_k != d.k)) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT,
           "output 'dX' must have 0 rows (skip) or the shape of X [" + to_string(d.m) + ", " + to_string(d.k) + "]");
    }
    WeightGrads<T> g{};
    g.dw = args.Out<T>(1, "dW", {&d.r, &d.k, &d.f});
    g.datt_src = args.Out<T>(2, "datt_src", {&d.r, &att_h, &att_dh});
    g.datt_dst = args.Out<T>(3, "datt_dst", {&d.r, &att_h, &att_dh});
    CheckParams("rgnn.rgat.bwd", args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
    const Layout l = ReadLayout(args, 10, d);
    CheckSavedRows(l, sv.s, sv.u);
    BackwardFeatures(args, d, l, dout, x, w, sv, dx_rows > 0 ? dx : nullptr, g);
  }
};

struct RgatEmbedFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_embed_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Dims d;
    int64_t att_h = kUnbound, att_dh = kUnbound, s = kUnbound, u = kUnbound;
    d.m = d.k = d.r = d.f = kUnbound;
    const T* table = args.In<T>(0, "W", {&d.r, &d.k, &d.f});
    const int64_t* row_id = args.In<int64_t>(1, "row_id", {&d.m});
    const T* att_src = args.In<T>(2, "att_src", {&d.r, &att_h, &att_dh});
    const T* att_dst = args.In<T>(3, "att_dst", {&d.r, &att_h, &att_dh});
    d.heads = att_h;
    const Outputs<T> o = ReadOutputs<T>(args, &d, &s, &u);
    CheckParams("rgnn.rgat_embed.fwd", args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
    if (d.mean && o.heads == nullptr && d.n > 0) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "rgnn.rgat_embed.fwd: merge = mean needs the output 'heads' [N, F]");
    }
    CheckRowIds(row_id, d.m, d.k);
    const Layout l = ReadLayout(args, 4, d);
    CheckRows("output 's_dst'", s, l.d.num_segs);
    CheckRows("output 's_src'", u, l.s.num_pairs);
    ForwardEmbed(args, d, l, table, row_id, att_src, att_dst, o);
  }
};

struct RgatEmbedBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_embed_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    Dims d;
    int64_t att_h = kUnbound, att_dh = kUnbound;
    d.n = d.o = d.m = d.k = d.r = d.f = kUnbound;
    const T* dout = args.In<T>(0, "dOut", {&d.n, &d.o});
    const T* table = args.In<T>(1, "W", {&d.r, &d.k, &d.f});
    const int64_t* row_id = args.In<int64_t>(2, "row_id", {&d.m});
    const Saved<T> sv = ReadSaved<T>(args, 3, &d, &att_h, &att_dh);
    WeightGrads<T> g{};
    g.dw = args.Out<T>(0, "dW", {&d.r, &d.k, &d.f});
    g.datt_src = args.Out<T>(1, "datt_src", {&d.r, &att_h, &att_dh});
    g.datt_dst = args.Out<T>(2, "datt_dst", {&d.r, &att_h, &att_dh});
    CheckParams("rgnn.rgat_embed.bwd", args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
    CheckRowIds(row_id, d.m, d.k);
    const Layout l = ReadLayout(args, 10, d);
    CheckSavedRows(l, sv.s, sv.u);
    BackwardEmbed(args, d, l, dout, table, row_id, sv, g);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(RgatFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(RgatBwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(RgatEmbedFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(RgatEmbedBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn
