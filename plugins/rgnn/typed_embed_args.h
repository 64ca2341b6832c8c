// The arguments of rgnn.typed_embed.fwd/.bwd (<tessel/ops/rgnn.h>), the typed linear of a one-hot
// (featureless) input, bound and checked here once for their CPU and CUDA kernels (typed_embed*) and
// every dtype: forward W [R, V, D], uniq_ptr [R+1], uniq_src [U], row_id [M] -> Y [U, D]; backward
// dY [U, D], uniq_ptr, uniq_src, row_id -> dW [R, V, D].
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match; bad-data
// for uniq_ptr, uniq_src or row_id out of range (checked where they are host memory: on the CPU; the
// CUDA kernels trust them).
#pragma once

#include <cstdint>

#include "kernels.h"
#include "typed_linear_args.h"

namespace tessel::kernels::rgnn {

template <typename T>
struct TypedEmbedFwdArgs {
  int64_t r = kUnbound, v = kUnbound, d = kUnbound, u = kUnbound, m = kUnbound;
  const T* w = nullptr;
  const int64_t* uniq_ptr = nullptr;
  const int64_t* uniq_src = nullptr;
  const int64_t* row_id = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_embed_fwd; }

  static TypedEmbedFwdArgs Bind(const KernelArgs& args) {
    TypedEmbedFwdArgs a;
    a.w = args.In<T>(0, "W", {&a.r, &a.v, &a.d});
    int64_t r1 = a.r + 1;
    a.uniq_ptr = args.In<int64_t>(1, "uniq_ptr", {&r1});
    a.uniq_src = args.In<int64_t>(2, "uniq_src", {&a.u});
    a.row_id = args.In<int64_t>(3, "row_id", {&a.m});
    a.y = args.Out<T>(0, "Y", {&a.u, &a.d});
    CheckCompactRows(args, a.uniq_ptr, a.r, a.uniq_src, a.u, a.m);
    CheckRowIds(args, a.row_id, a.m, a.v);
    return a;
  }
};

template <typename T>
struct TypedEmbedBwdArgs {
  int64_t u = kUnbound, d = kUnbound, r = kUnbound, m = kUnbound, v = kUnbound;
  const T* dy = nullptr;
  const int64_t* uniq_ptr = nullptr;
  const int64_t* uniq_src = nullptr;
  const int64_t* row_id = nullptr;
  T* dw = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_embed_bwd; }

  static TypedEmbedBwdArgs Bind(const KernelArgs& args) {
    TypedEmbedBwdArgs a;
    a.dy = args.In<T>(0, "dY", {&a.u, &a.d});
    int64_t r1 = kUnbound;
    a.uniq_ptr = args.In<int64_t>(1, "uniq_ptr", {&r1});
    a.r = r1 - 1;
    if (a.r < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'uniq_ptr' must have at least one element");
    a.uniq_src = args.In<int64_t>(2, "uniq_src", {&a.u});
    a.row_id = args.In<int64_t>(3, "row_id", {&a.m});
    a.dw = args.Out<T>(0, "dW", {&a.r, &a.v, &a.d});
    CheckCompactRows(args, a.uniq_ptr, a.r, a.uniq_src, a.u, a.m);
    CheckRowIds(args, a.row_id, a.m, a.v);
    return a;
  }
};

}  // namespace tessel::kernels::rgnn
