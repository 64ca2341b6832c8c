// The arguments of rgnn.hgt.fwd/.bwd (<tessel/ops/rgnn.h>), the attention core of HGT over the segment
// layout, bound and checked here once for their CPU and CUDA kernels (hgt*) and every dtype: Kx, Vx
// [M, F], Qx [N, F], att and msg [R, H, Dh, Dh], prior [R, H], the DST layout, dedge_pair and the SRC
// layout; forward -> Agg [N, F], row_max, row_sum [N, H]; backward dAgg and the forward's outputs -> dK,
// dQ, dV, datt, dmsg, dprior. F = H * Dh.
// Failure: Bind throws KernelError: invalid-argument for a shape, dtype or parameter that does not match;
// bad-data for a layout out of range (its indices are checked where they are host memory: on the CPU;
// the CUDA kernels trust them, and the binder checks only the layout's sizes and that items have runs).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels.h"
#include "segment_layout.h"

namespace tessel::kernels::rgnn {

// The arguments both ops share: features, relation weights, the layout and the params.
template <typename T>
struct HgtInputs {
  int64_t m = kUnbound, n = kUnbound, r = kUnbound, h = kUnbound, dh = kUnbound, f = kUnbound;
  const T* k = nullptr;      // [M, F]
  const T* q = nullptr;      // [N, F]
  const T* v = nullptr;      // [M, F]
  const T* att = nullptr;    // [R, H, Dh, Dh]
  const T* msg = nullptr;    // [R, H, Dh, Dh]
  const T* prior = nullptr;  // [R, H]
  T scale = T(1);            // 1 / sqrt(Dh)
  bool reorder = true;
  DstLayout dl;
  SrcLayout sl;
  // [E]: the pair of each dst-major edge (the CUDA kernels reach it through the SRC layout instead).
  const int32_t* edge_pair = nullptr;

  const T* Att(int64_t rel, int64_t head) const { return att + (rel * h + head) * dh * dh; }
  const T* Msg(int64_t rel, int64_t head) const { return msg + (rel * h + head) * dh * dh; }
  // prior[r, h] / sqrt(Dh) of every head of relation `rel` (host memory: CPU kernels).
  void Scales(int64_t rel, T* ps) const {
    for (int64_t c = 0; c < h; ++c) ps[c] = prior[rel * h + c] * scale;
  }

  // Reads and checks Kx, Qx, Vx, att, msg, prior (from input `first`), the DST layout, dedge_pair and
  // the SRC layout (from input `layout`) and the params. `n` and `f` may already be bound by the caller.
  static HgtInputs BindFrom(const KernelArgs& args, int first, int layout, int64_t n, int64_t f) {
    const auto& params = args.Params<tessel_hgt_params>();
    const std::string op = args.op().name;
    if (params.heads < 1) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": heads must be at least 1, is " + std::to_string(params.heads));
    }
    if (params.reorder != 0 && params.reorder != 1) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": reorder must be 0 or 1, is " + std::to_string(params.reorder));
    }
    HgtInputs in;
    in.n = n;
    in.f = f;
    in.h = params.heads;
    in.reorder = params.reorder == 1;
    in.k = args.In<T>(first, "Kx", {&in.m, &in.f});
    in.q = args.In<T>(first + 1, "Qx", {&in.n, &in.f});
    in.v = args.In<T>(first + 2, "Vx", {&in.m, &in.f});
    in.att = args.In<T>(first + 3, "att", {&in.r, &in.h, &in.dh, &in.dh});
    in.msg = args.In<T>(first + 4, "msg", {&in.r, &in.h, &in.dh, &in.dh});
    in.prior = args.In<T>(first + 5, "prior", {&in.r, &in.h});
    if (in.dh < 1 || in.f != in.h * in.dh) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": the feature width F = " + std::to_string(in.f) + " must be heads (" +
                                               std::to_string(in.h) + ") x the head width of att (" +
                                               std::to_string(in.dh) + "), with a head width of at least 1");
    }
    in.scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(in.dh)));
    in.dl = ReadDstLayout(args, layout, in.n, in.m, in.r);
    in.sl = ReadSrcLayout(args, layout + 8, in.m, in.r, in.dl.num_segs);
    if (in.sl.num_edges != in.dl.num_edges) {
      Fail(TESSEL_STATUS_BAD_DATA, "segment layout: sedge_seg has " + std::to_string(in.sl.num_edges) +
                                       " edges, dedge_src " + std::to_string(in.dl.num_edges));
    }
    in.edge_pair = ReadEdgePair(args, layout + 7, in.dl.num_edges, in.sl.num_pairs);
    // The CUDA kernels find an item's run by binary search (the full check implies this).
    if ((in.dl.num_segs > 0 && in.dl.num_runs == 0) || (in.sl.num_pairs > 0 && in.sl.num_runs == 0)) {
      Fail(TESSEL_STATUS_BAD_DATA, "segment layout: items but no runs");
    }
    return in;
  }
};

template <typename T>
struct HgtFwdArgs {
  HgtInputs<T> in;
  T* agg = nullptr;      // [N, F]
  T* row_max = nullptr;  // [N, H]
  T* row_sum = nullptr;  // [N, H]

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_hgt_fwd; }

  static HgtFwdArgs Bind(const KernelArgs& args) {
    HgtFwdArgs a;
    a.in = HgtInputs<T>::BindFrom(args, 0, 6, kUnbound, kUnbound);
    int64_t n = a.in.n, f = a.in.f, h = a.in.h;
    a.agg = args.Out<T>(0, "Agg", {&n, &f});
    a.row_max = args.Out<T>(1, "row_max", {&n, &h});
    a.row_sum = args.Out<T>(2, "row_sum", {&n, &h});
    return a;
  }
};

template <typename T>
struct HgtBwdArgs {
  const T* dagg = nullptr;  // [N, F]
  HgtInputs<T> in;
  const T* agg = nullptr;      // [N, F]
  const T* row_max = nullptr;  // [N, H]
  const T* row_sum = nullptr;  // [N, H]
  T* dk = nullptr;             // [M, F]
  T* dq = nullptr;             // [N, F]
  T* dv = nullptr;             // [M, F]
  T* datt = nullptr;           // [R, H, Dh, Dh]
  T* dmsg = nullptr;           // [R, H, Dh, Dh]
  T* dprior = nullptr;         // [R, H]

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_hgt_bwd; }

  static HgtBwdArgs Bind(const KernelArgs& args) {
    HgtBwdArgs a;
    int64_t n = kUnbound, f = kUnbound;
    a.dagg = args.In<T>(0, "dAgg", {&n, &f});
    a.in = HgtInputs<T>::BindFrom(args, 1, 10, n, f);
    int64_t m = a.in.m, r = a.in.r, h = a.in.h, dh = a.in.dh;
    a.agg = args.In<T>(7, "Agg", {&n, &f});
    a.row_max = args.In<T>(8, "row_max", {&n, &h});
    a.row_sum = args.In<T>(9, "row_sum", {&n, &h});
    a.dk = args.Out<T>(0, "dK", {&m, &f});
    a.dq = args.Out<T>(1, "dQ", {&n, &f});
    a.dv = args.Out<T>(2, "dV", {&m, &f});
    a.datt = args.Out<T>(3, "datt", {&r, &h, &dh, &dh});
    a.dmsg = args.Out<T>(4, "dmsg", {&r, &h, &dh, &dh});
    a.dprior = args.Out<T>(5, "dprior", {&r, &h});
    return a;
  }
};

}  // namespace tessel::kernels::rgnn
