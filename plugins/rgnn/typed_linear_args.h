// The arguments of rgnn.typed_linear.fwd/.bwd (<tessel/ops/rgnn.h>), bound and checked here once for
// their CPU and CUDA kernels (typed_linear*) and every dtype: forward X [M, K], W [R, K, D],
// uniq_ptr [R+1], uniq_src [U] -> Y [U, D]; backward dY [U, D], X, W, uniq_ptr, uniq_src -> dX [M, K]
// (optional: 0 rows skips it), dW [R, K, D].
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match; bad-data
// for uniq_ptr or uniq_src out of range (checked where they are host memory: on the CPU; the CUDA kernels
// trust them).
#pragma once

#include <cstdint>

#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::rgnn {

// The compact rows: uniq_ptr [R+1] splits U rows by relation, uniq_src [U] names each row's input row.
inline void CheckCompactRows(const KernelArgs& args, const int64_t* uniq_ptr, int64_t r, const int64_t* uniq_src,
                             int64_t u, int64_t m) {
  if (args.data_check() != DataCheck::kFull) return;
  CheckOffsets(uniq_ptr, r, u, "uniq_ptr");
  CheckIndices(uniq_src, u, m, "uniq_src");
}

template <typename T>
struct TypedLinearFwdArgs {
  int64_t m = kUnbound, k = kUnbound, r = kUnbound, d = kUnbound, u = kUnbound;
  const T* x = nullptr;
  const T* w = nullptr;
  const int64_t* uniq_ptr = nullptr;
  const int64_t* uniq_src = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_linear_fwd; }

  static TypedLinearFwdArgs Bind(const KernelArgs& args) {
    TypedLinearFwdArgs a;
    a.x = args.In<T>(0, "X", {&a.m, &a.k});
    a.w = args.In<T>(1, "W", {&a.r, &a.k, &a.d});
    int64_t r1 = a.r + 1;
    a.uniq_ptr = args.In<int64_t>(2, "uniq_ptr", {&r1});
    a.uniq_src = args.In<int64_t>(3, "uniq_src", {&a.u});
    a.y = args.Out<T>(0, "Y", {&a.u, &a.d});
    CheckCompactRows(args, a.uniq_ptr, a.r, a.uniq_src, a.u, a.m);
    return a;
  }
};

template <typename T>
struct TypedLinearBwdArgs {
  int64_t u = kUnbound, d = kUnbound, m = kUnbound, k = kUnbound, r = kUnbound;
  const T* dy = nullptr;
  const T* x = nullptr;
  const T* w = nullptr;
  const int64_t* uniq_ptr = nullptr;
  const int64_t* uniq_src = nullptr;
  T* dx = nullptr;  // null when the caller skips it
  T* dw = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_linear_bwd; }

  static TypedLinearBwdArgs Bind(const KernelArgs& args) {
    TypedLinearBwdArgs a;
    a.dy = args.In<T>(0, "dY", {&a.u, &a.d});
    a.x = args.In<T>(1, "X", {&a.m, &a.k});
    a.w = args.In<T>(2, "W", {&a.r, &a.k, &a.d});
    int64_t r1 = a.r + 1, dx_rows = kUnbound;
    a.uniq_ptr = args.In<int64_t>(3, "uniq_ptr", {&r1});
    a.uniq_src = args.In<int64_t>(4, "uniq_src", {&a.u});
    T* dx = args.Out<T>(0, "dX", {&dx_rows, &a.k});
    a.dx = OptionalDx(dx, dx_rows, a.m);
    a.dw = args.Out<T>(1, "dW", {&a.r, &a.k, &a.d});
    CheckCompactRows(args, a.uniq_ptr, a.r, a.uniq_src, a.u, a.m);
    return a;
  }
};

}  // namespace tessel::kernels::rgnn
