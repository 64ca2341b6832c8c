// The arguments of rgnn.rgat.fwd/.bwd and rgnn.rgat_embed.fwd/.bwd (<tessel/ops/rgnn.h>), the fused RGAT
// layer over the segment layout, bound and checked here once for their CPU and CUDA kernels
// (rgat_fwd*, rgat_bwd*) and every dtype. The input is X [M, K] with W [R, K, F] (features), or
// row_id [M] with the table W [R, V, F] (one-hot, embed; K = V); att_src, att_dst [R, H, Dh]; the DST
// layout, dedge_pair and the SRC layout. Forward -> Out [N, O], heads [N, F] (0 rows: skipped, concat
// only), s_src [U, H], s_dst [S, H], row_max, row_sum [N, H]; backward dOut and the saved att_src,
// att_dst, heads, s_src, s_dst, row_max, row_sum -> dX (features; 0 rows: skipped), dW, datt_src, datt_dst.
// Failure: Bind throws KernelError: invalid-argument for a shape, dtype or parameter that does not match;
// bad-data for a layout or row_id out of range, or two layout sides that describe different edges (the
// indices are checked where they are host memory: on the CPU; the CUDA kernels trust them, and the binder
// checks only the layout's sizes and that items have runs).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "fused_support.h"
#include "kernels.h"
#include "segment_layout.h"

namespace tessel::kernels::rgnn {

// The sizes every rgat kernel shares. `k` is the input width (features) or the table's row count V
// (embed).
struct RgatDims {
  int64_t m = 0, k = 0, r = 0, f = 0, heads = 0, dh = 0, n = 0, o = 0;
  bool mean = false, reorder = false;
  double slope = 0.2;
};

// Checks the parameter struct against the shapes: heads >= 1, merge and reorder 0 or 1, a finite slope,
// F divisible by heads, att [R, heads, F / heads], O = F (concat) or F / heads (mean).
inline void CheckRgatParams(const char* op, const tessel_rgat_params& p, RgatDims* d, int64_t att_heads,
                            int64_t att_dh) {
  using std::to_string;
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

inline void CheckRgatRows(const char* what, int64_t actual, int64_t expected) {
  if (actual != expected) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         std::string(what) + " has " + std::to_string(actual) + " rows, expected " + std::to_string(expected));
  }
}

struct RgatLayout {
  DstLayout d;
  SrcLayout s;
  const int32_t* edge_pair = nullptr;  // [E] the pair of each dst-major edge
};

// The relation of every item (segment or pair) of one side, from its runs.
inline void RgatItemRelations(int64_t runs, const int32_t* run_rel, const int64_t* run_item, int32_t* rel) {
  for (int64_t q = 0; q < runs; ++q) {
    for (int64_t i = run_item[q]; i < run_item[q + 1]; ++i) rel[i] = run_rel[q];
  }
}

// Both sides must describe the same edges: the pair of a dst-major edge has its source and relation, the
// segment of a src-major edge its relation, and every pair (segment) is named by as many edges of the
// other side as it holds. Reads the indices: DataCheck::kFull only.
inline void CheckRgatCrossReferences(const KernelArgs& args, const RgatLayout& l) {
  using std::to_string;
  auto bad_layout = [](const std::string& message) { Fail(TESSEL_STATUS_BAD_DATA, "segment layout: " + message); };
  const DstLayout& d = l.d;
  const SrcLayout& s = l.s;
  Workspace<int32_t> rel(args, d.num_segs + s.num_pairs);
  Workspace<int64_t> count(args, d.num_segs + s.num_pairs);
  int32_t* seg_rel = rel.get();
  int32_t* pair_rel = rel.get() + d.num_segs;
  int64_t* seg_count = count.get();
  int64_t* pair_count = count.get() + d.num_segs;
  RgatItemRelations(d.num_runs, d.run_rel, d.run_seg, seg_rel);
  RgatItemRelations(s.num_runs, s.run_rel, s.run_pair, pair_rel);
  Zero(d.num_segs + s.num_pairs, count.get());
  for (int64_t sg = 0; sg < d.num_segs; ++sg) {
    for (int64_t e = d.seg_edge[sg]; e < d.seg_edge[sg + 1]; ++e) {
      const int64_t u = l.edge_pair[e];
      if (s.pair_src[u] != d.edge_src[e] || pair_rel[u] != seg_rel[sg]) {
        bad_layout("dedge_pair[" + to_string(e) + "] = " + to_string(u) + " is the pair (relation " +
                   to_string(pair_rel[u]) + ", source " + to_string(s.pair_src[u]) + "), but the edge is (relation " +
                   to_string(seg_rel[sg]) + ", source " + to_string(d.edge_src[e]) + ")");
      }
      ++pair_count[u];
    }
  }
  for (int64_t u = 0; u < s.num_pairs; ++u) {
    if (pair_count[u] != s.pair_edge[u + 1] - s.pair_edge[u]) {
      bad_layout("dedge_pair names pair " + to_string(u) + " " + to_string(pair_count[u]) + " times, it has " +
                 to_string(s.pair_edge[u + 1] - s.pair_edge[u]) + " edges");
    }
    for (int64_t e = s.pair_edge[u]; e < s.pair_edge[u + 1]; ++e) {
      const int64_t sg = s.edge_seg[e];
      if (seg_rel[sg] != pair_rel[u]) {
        bad_layout("sedge_seg[" + to_string(e) + "] = " + to_string(sg) + " is a segment of relation " +
                   to_string(seg_rel[sg]) + ", the edge's pair has relation " + to_string(pair_rel[u]));
      }
      ++seg_count[sg];
    }
  }
  for (int64_t sg = 0; sg < d.num_segs; ++sg) {
    if (seg_count[sg] != d.seg_edge[sg + 1] - d.seg_edge[sg]) {
      bad_layout("sedge_seg names segment " + to_string(sg) + " " + to_string(seg_count[sg]) + " times, it has " +
                 to_string(d.seg_edge[sg + 1] - d.seg_edge[sg]) + " edges");
    }
  }
}

// The DST layout at `first`, dedge_pair at first + 7, the SRC layout at first + 8 (their indices and
// cross references checked on the CPU).
inline RgatLayout ReadRgatLayout(const KernelArgs& args, int first, const RgatDims& dims) {
  RgatLayout l;
  l.d = ReadDstLayout(args, first, dims.n, dims.m, dims.r);
  l.s = ReadSrcLayout(args, first + 8, dims.m, dims.r, l.d.num_segs);
  if (l.s.num_edges != l.d.num_edges) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "sedge_seg has " + std::to_string(l.s.num_edges) + " edges, dedge_src " + std::to_string(l.d.num_edges));
  }
  l.edge_pair = ReadEdgePair(args, first + 7, l.d.num_edges, l.s.num_pairs);
  // The CUDA kernels find an item's run by binary search (the full check implies this).
  if ((l.d.num_segs > 0 && l.d.num_runs == 0) || (l.s.num_pairs > 0 && l.s.num_runs == 0)) {
    Fail(TESSEL_STATUS_BAD_DATA, "segment layout: items but no runs");
  }
  if (args.data_check() == DataCheck::kFull) CheckRgatCrossReferences(args, l);
  return l;
}

// What the layer's input is: feature rows X with weights W (rgnn.rgat.*), or one-hot rows, row_id into
// the table W (rgnn.rgat_embed.*).
enum class RgatInput { kFeatures, kOneHot };

// The outputs of the forward; heads is null when the caller skipped it.
template <typename T>
struct RgatOutputs {
  T *out, *heads, *s_src, *s_dst, *row_max, *row_sum;
};

// The forward's outputs that the backward reads again, and the attention vectors.
template <typename T>
struct RgatSaved {
  const T *att_src, *att_dst, *heads, *s_src, *s_dst, *row_max, *row_sum;
  int64_t s = kUnbound, u = kUnbound;
};

template <typename T>
struct RgatForwardArgs {
  RgatInput input = RgatInput::kFeatures;
  RgatDims d;
  const T* x = nullptr;             // [M, K]: features only
  const T* w = nullptr;             // [R, K, F]: the weights, or the table (one-hot)
  const int64_t* row_id = nullptr;  // [M]: one-hot only
  const T* att_src = nullptr;       // [R, H, Dh]
  const T* att_dst = nullptr;       // [R, H, Dh]
  RgatOutputs<T> o{};
  RgatLayout l;

  static RgatForwardArgs BindInput(const KernelArgs& args, RgatInput input) {
    using std::to_string;
    const char* op = args.op().name;
    RgatForwardArgs a;
    a.input = input;
    RgatDims& d = a.d;
    int64_t att_h = kUnbound, att_dh = kUnbound, s = kUnbound, u = kUnbound;
    d.m = d.k = d.r = d.f = kUnbound;
    if (input == RgatInput::kOneHot) {
      a.w = args.In<T>(0, "W", {&d.r, &d.k, &d.f});
      a.row_id = args.In<int64_t>(1, "row_id", {&d.m});
    } else {
      a.x = args.In<T>(0, "X", {&d.m, &d.k});
      a.w = args.In<T>(1, "W", {&d.r, &d.k, &d.f});
    }
    a.att_src = args.In<T>(2, "att_src", {&d.r, &att_h, &att_dh});
    a.att_dst = args.In<T>(3, "att_dst", {&d.r, &att_h, &att_dh});
    d.heads = att_h;
    d.n = kUnbound;
    d.o = kUnbound;
    int64_t hn = kUnbound, hf = kUnbound;
    RgatOutputs<T>& o = a.o;
    o.out = args.Out<T>(0, "Out", {&d.n, &d.o});
    o.heads = args.Out<T>(1, "heads", {&hn, &hf});
    o.s_src = args.Out<T>(2, "s_src", {&u, &d.heads});
    o.s_dst = args.Out<T>(3, "s_dst", {&s, &d.heads});
    o.row_max = args.Out<T>(4, "row_max", {&d.n, &d.heads});
    o.row_sum = args.Out<T>(5, "row_sum", {&d.n, &d.heads});
    if (hn != 0 && (hn != d.n || hf != d.f)) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'heads' must be [" + to_string(d.n) + ", " + to_string(d.f) +
                                               "] or have 0 rows (concat only), is [" + to_string(hn) + ", " +
                                               to_string(hf) + "]");
    }
    if (hn == 0) o.heads = nullptr;
    CheckRgatParams(op, args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
    if (d.mean && o.heads == nullptr && d.n > 0) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(op) + ": merge = mean needs the output 'heads' [N, F]");
    }
    if (input == RgatInput::kOneHot) CheckRowIds(args, a.row_id, d.m, d.k);
    a.l = ReadRgatLayout(args, 4, d);
    CheckRgatRows("output 's_dst'", s, a.l.d.num_segs);
    CheckRgatRows("output 's_src'", u, a.l.s.num_pairs);
    return a;
  }
};

template <typename T>
struct RgatFwdArgs : RgatForwardArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_fwd; }
  static RgatForwardArgs<T> Bind(const KernelArgs& args) {
    return RgatForwardArgs<T>::BindInput(args, RgatInput::kFeatures);
  }
};

template <typename T>
struct RgatEmbedFwdArgs : RgatForwardArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_embed_fwd; }
  static RgatForwardArgs<T> Bind(const KernelArgs& args) {
    return RgatForwardArgs<T>::BindInput(args, RgatInput::kOneHot);
  }
};

template <typename T>
struct RgatBackwardArgs {
  RgatInput input = RgatInput::kFeatures;
  RgatDims d;
  const T* dout = nullptr;          // [N, O]
  const T* x = nullptr;             // [M, K]: features only
  const T* w = nullptr;             // [R, K, F]: the weights, or the table (one-hot)
  const int64_t* row_id = nullptr;  // [M]: one-hot only
  RgatSaved<T> sv{};
  T* dx = nullptr;  // [M, K]: features only, null when the caller skips it
  T* dw = nullptr;
  T* datt_src = nullptr;
  T* datt_dst = nullptr;
  RgatLayout l;

  static RgatBackwardArgs BindInput(const KernelArgs& args, RgatInput input) {
    using std::to_string;
    RgatBackwardArgs a;
    a.input = input;
    RgatDims& d = a.d;
    int64_t att_h = kUnbound, att_dh = kUnbound;
    d.n = d.o = d.m = d.k = d.r = d.f = kUnbound;
    a.dout = args.In<T>(0, "dOut", {&d.n, &d.o});
    if (input == RgatInput::kOneHot) {
      a.w = args.In<T>(1, "W", {&d.r, &d.k, &d.f});
      a.row_id = args.In<int64_t>(2, "row_id", {&d.m});
    } else {
      a.x = args.In<T>(1, "X", {&d.m, &d.k});
      a.w = args.In<T>(2, "W", {&d.r, &d.k, &d.f});
    }
    RgatSaved<T>& sv = a.sv;
    sv.att_src = args.In<T>(3, "att_src", {&d.r, &att_h, &att_dh});
    sv.att_dst = args.In<T>(4, "att_dst", {&d.r, &att_h, &att_dh});
    sv.heads = args.In<T>(5, "heads", {&d.n, &d.f});
    sv.s_src = args.In<T>(6, "s_src", {&sv.u, &att_h});
    sv.s_dst = args.In<T>(7, "s_dst", {&sv.s, &att_h});
    sv.row_max = args.In<T>(8, "row_max", {&d.n, &att_h});
    sv.row_sum = args.In<T>(9, "row_sum", {&d.n, &att_h});
    int first_grad = 0;
    if (input == RgatInput::kFeatures) {
      int64_t dx_rows = kUnbound, dx_k = kUnbound;
      a.dx = args.Out<T>(0, "dX", {&dx_rows, &dx_k});
      if (dx_rows != 0 && (dx_rows != d.m || dx_k != d.k)) {
        Fail(TESSEL_STATUS_INVALID_ARGUMENT,
             "output 'dX' must have 0 rows (skip) or the shape of X [" + to_string(d.m) + ", " + to_string(d.k) + "]");
      }
      if (dx_rows == 0) a.dx = nullptr;
      first_grad = 1;
    }
    a.dw = args.Out<T>(first_grad, "dW", {&d.r, &d.k, &d.f});
    a.datt_src = args.Out<T>(first_grad + 1, "datt_src", {&d.r, &att_h, &att_dh});
    a.datt_dst = args.Out<T>(first_grad + 2, "datt_dst", {&d.r, &att_h, &att_dh});
    CheckRgatParams(args.op().name, args.Params<tessel_rgat_params>(), &d, att_h, att_dh);
    if (input == RgatInput::kOneHot) CheckRowIds(args, a.row_id, d.m, d.k);
    a.l = ReadRgatLayout(args, 10, d);
    CheckRgatRows("input 's_dst'", sv.s, a.l.d.num_segs);
    CheckRgatRows("input 's_src'", sv.u, a.l.s.num_pairs);
    return a;
  }
};

template <typename T>
struct RgatBwdArgs : RgatBackwardArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_bwd; }
  static RgatBackwardArgs<T> Bind(const KernelArgs& args) {
    return RgatBackwardArgs<T>::BindInput(args, RgatInput::kFeatures);
  }
};

template <typename T>
struct RgatEmbedBwdArgs : RgatBackwardArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgat_embed_bwd; }
  static RgatBackwardArgs<T> Bind(const KernelArgs& args) {
    return RgatBackwardArgs<T>::BindInput(args, RgatInput::kOneHot);
  }
};

}  // namespace tessel::kernels::rgnn
