// The arguments of rgnn.rgcn.fwd/.bwd and rgnn.rgcn_embed.fwd/.bwd/.bwd_rows (<tessel/ops/rgnn.h>), the
// fused R-GCN layer over the segment layout, bound and checked here once for their CPU and CUDA kernels
// (rgcn_fused*) and every dtype. Feature input X [M, K] with W [R, K, D]; one-hot input row_id [M] with
// the table W [R, V, D]; seg_norm [S] and seg_dst [S] (i32) per segment; H, dH [N, D]; the DST or SRC
// layout (segment_layout.h) after them.
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match; bad-data
// for a layout, row_id or seg_dst out of range (the indices are checked where they are host memory: on
// the CPU; the CUDA kernels trust them, and the binder checks only the layout's sizes and that items
// have runs).
#pragma once

#include <cstdint>
#include <string>

#include "kernels.h"
#include "segment_layout.h"

namespace tessel::kernels::rgnn {

template <typename T>
struct RgcnFwdArgs {
  int64_t m = kUnbound, k = kUnbound, r = kUnbound, d = kUnbound, s = kUnbound, n = kUnbound;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* seg_norm = nullptr;
  T* h = nullptr;
  DstLayout l;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgcn_fwd; }

  static RgcnFwdArgs Bind(const KernelArgs& args) {
    RgcnFwdArgs a;
    a.x = args.In<T>(0, "X", {&a.m, &a.k});
    a.w = args.In<T>(1, "W", {&a.r, &a.k, &a.d});
    a.seg_norm = args.In<T>(2, "seg_norm", {&a.s});
    a.h = args.Out<T>(0, "H", {&a.n, &a.d});
    a.l = ReadDstLayout(args, 3, a.n, a.m, a.r);
    return a;
  }
};

template <typename T>
struct RgcnBwdArgs {
  int64_t n = kUnbound, d = kUnbound, m = kUnbound, k = kUnbound, r = kUnbound, s = kUnbound;
  const T* dh = nullptr;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* seg_norm = nullptr;
  const int32_t* seg_dst = nullptr;
  T* dx = nullptr;  // null when the caller skips it
  T* dw = nullptr;
  SrcLayout l;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgcn_bwd; }

  static RgcnBwdArgs Bind(const KernelArgs& args) {
    RgcnBwdArgs a;
    int64_t dx_rows = kUnbound;
    a.dh = args.In<T>(0, "dH", {&a.n, &a.d});
    a.x = args.In<T>(1, "X", {&a.m, &a.k});
    a.w = args.In<T>(2, "W", {&a.r, &a.k, &a.d});
    a.seg_norm = args.In<T>(3, "seg_norm", {&a.s});
    a.seg_dst = args.In<int32_t>(4, "seg_dst", {&a.s});
    T* dx = args.Out<T>(0, "dX", {&dx_rows, &a.k});
    a.dx = OptionalDx(dx, dx_rows, a.m);
    a.dw = args.Out<T>(1, "dW", {&a.r, &a.k, &a.d});
    CheckSegDst(args, a.seg_dst, a.s, a.n);
    a.l = ReadSrcLayout(args, 5, a.m, a.r, a.s);
    return a;
  }
};

template <typename T>
struct RgcnEmbedFwdArgs {
  int64_t r = kUnbound, v = kUnbound, d = kUnbound, m = kUnbound, s = kUnbound, n = kUnbound;
  const T* w = nullptr;
  const int64_t* row_id = nullptr;
  const T* seg_norm = nullptr;
  T* h = nullptr;
  DstLayout l;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgcn_embed_fwd; }

  static RgcnEmbedFwdArgs Bind(const KernelArgs& args) {
    RgcnEmbedFwdArgs a;
    a.w = args.In<T>(0, "W", {&a.r, &a.v, &a.d});
    a.row_id = args.In<int64_t>(1, "row_id", {&a.m});
    a.seg_norm = args.In<T>(2, "seg_norm", {&a.s});
    a.h = args.Out<T>(0, "H", {&a.n, &a.d});
    CheckRowIds(args, a.row_id, a.m, a.v);
    a.l = ReadDstLayout(args, 3, a.n, a.m, a.r);
    // The CUDA kernel finds a segment's run by binary search (the full check implies this).
    if (a.l.num_segs * a.d != 0 && a.l.num_runs == 0) {
      Fail(TESSEL_STATUS_BAD_DATA, "segment layout: segments but no dst runs");
    }
    return a;
  }
};

template <typename T>
struct RgcnEmbedBwdArgs {
  int64_t n = kUnbound, d = kUnbound, m = kUnbound, s = kUnbound, r = kUnbound, v = kUnbound;
  const T* dh = nullptr;
  const int64_t* row_id = nullptr;
  const T* seg_norm = nullptr;
  const int32_t* seg_dst = nullptr;
  T* dw = nullptr;
  SrcLayout l;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgcn_embed_bwd; }

  static RgcnEmbedBwdArgs Bind(const KernelArgs& args) {
    RgcnEmbedBwdArgs a;
    a.dh = args.In<T>(0, "dH", {&a.n, &a.d});
    a.row_id = args.In<int64_t>(1, "row_id", {&a.m});
    a.seg_norm = args.In<T>(2, "seg_norm", {&a.s});
    a.seg_dst = args.In<int32_t>(3, "seg_dst", {&a.s});
    a.dw = args.Out<T>(0, "dW", {&a.r, &a.v, &a.d});
    CheckRowIds(args, a.row_id, a.m, a.v);
    CheckSegDst(args, a.seg_dst, a.s, a.n);
    a.l = ReadSrcLayout(args, 4, a.m, a.r, a.s);
    // The CUDA kernel finds a pair's run by binary search (the full check implies this).
    if (a.l.num_pairs * a.d != 0 && a.l.num_runs == 0) {
      Fail(TESSEL_STATUS_BAD_DATA, "segment layout: pairs but no src runs");
    }
    return a;
  }
};

template <typename T>
struct RgcnEmbedBwdRowsArgs {
  int64_t n = kUnbound, d = kUnbound, s = kUnbound, u = kUnbound;
  const T* dh = nullptr;
  const T* seg_norm = nullptr;
  const int32_t* seg_dst = nullptr;
  T* rows = nullptr;
  SrcLayout l;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_rgcn_embed_bwd_rows; }

  static RgcnEmbedBwdRowsArgs Bind(const KernelArgs& args) {
    RgcnEmbedBwdRowsArgs a;
    a.dh = args.In<T>(0, "dH", {&a.n, &a.d});
    a.seg_norm = args.In<T>(1, "seg_norm", {&a.s});
    a.seg_dst = args.In<int32_t>(2, "seg_dst", {&a.s});
    a.rows = args.Out<T>(0, "dRows", {&a.u, &a.d});
    CheckSegDst(args, a.seg_dst, a.s, a.n);
    a.l = ReadSrcLayout(args, 3, kUnbound, kUnbound, a.s);
    if (a.l.num_pairs != a.u) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'dRows' must have one row per pair (" +
                                               std::to_string(a.l.num_pairs) + "), has " + std::to_string(a.u));
    }
    return a;
  }
};

}  // namespace tessel::kernels::rgnn
