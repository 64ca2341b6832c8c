// The arguments of nn.linear.fwd/.bwd (<tessel/ops/nn.h>), bound and checked here once for their CPU and
// CUDA kernels (linear*) and every dtype. W is [O, K], out-major: forward X [N, K], W, b [O] -> Y [N, O];
// backward dY [N, O], X, W -> dX [N, K] (optional: 0 rows skips it), dW [O, K] and db [O] (optional), both
// Accumulate<T>; nn.linear_gelu_tanh.fwd: the forward's inputs -> Y = gelu_tanh(Pre) and Pre [N, O].
// Failure: Bind throws KernelError (invalid-argument) for a shape or dtype that does not match.
#pragma once

#include <cstdint>
#include <string>

#include "kernels.h"

namespace tessel::kernels::nn {

template <typename T>
struct LinearFwdArgs {
  int64_t n = kUnbound, k = kUnbound, o = kUnbound;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* b = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_fwd; }

  static LinearFwdArgs Bind(const KernelArgs& args) {
    LinearFwdArgs a;
    a.x = args.In<T>(0, "X", {&a.n, &a.k});
    a.w = args.In<T>(1, "W", {&a.o, &a.k});
    a.b = args.In<T>(2, "b", {&a.o});
    a.y = args.Out<T>(0, "Y", {&a.n, &a.o});
    return a;
  }
};

// nn.linear_gelu_tanh.fwd: the linear forward's arguments, Y its GELU and Pre the linear's output.
template <typename T>
struct LinearGeluTanhFwdArgs {
  LinearFwdArgs<T> linear;  // linear.y is Pre
  T* y = nullptr;           // gelu_tanh(Pre)

  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_gelu_tanh_fwd; }

  static LinearGeluTanhFwdArgs Bind(const KernelArgs& args) {
    LinearGeluTanhFwdArgs a;
    LinearFwdArgs<T>& l = a.linear;
    l.x = args.In<T>(0, "X", {&l.n, &l.k});
    l.w = args.In<T>(1, "W", {&l.o, &l.k});
    l.b = args.In<T>(2, "b", {&l.o});
    a.y = args.Out<T>(0, "Y", {&l.n, &l.o});
    l.y = args.Out<T>(1, "Pre", {&l.n, &l.o});
    return a;
  }
};

template <typename T>
struct LinearBwdArgs {
  int64_t n = kUnbound, k = kUnbound, o = kUnbound;
  const T* dy = nullptr;
  const T* x = nullptr;
  const T* w = nullptr;
  T* dx = nullptr;
  bool want_dx = false;  // dX has N rows (else 0: the caller skips it)
  Accumulate<T>* dw = nullptr;
  Accumulate<T>* db = nullptr;  // null when the caller skips it (0 rows)

  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_bwd; }

  static LinearBwdArgs Bind(const KernelArgs& args) {
    LinearBwdArgs a;
    int64_t dx_rows = kUnbound;
    a.dy = args.In<T>(0, "dY", {&a.n, &a.o});
    a.x = args.In<T>(1, "X", {&a.n, &a.k});
    a.w = args.In<T>(2, "W", {&a.o, &a.k});
    a.dx = args.Out<T>(0, "dX", {&dx_rows, &a.k});
    a.dw = args.Out<Accumulate<T>>(1, "dW", {&a.o, &a.k});
    int64_t db_rows = kUnbound;
    a.db = args.Out<Accumulate<T>>(2, "db", {&db_rows});
    if (db_rows != 0 && db_rows != a.o) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT,
           "output 'db' must have 0 rows (skip) or O = " + std::to_string(a.o) + ", has " + std::to_string(db_rows));
    }
    if (db_rows == 0) a.db = nullptr;
    if (dx_rows != 0 && dx_rows != a.n) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'dX' must have 0 rows (skip) or as many as dY (" +
                                               std::to_string(a.n) + "), has " + std::to_string(dx_rows));
    }
    a.want_dx = dx_rows > 0;
    return a;
  }
};

}  // namespace tessel::kernels::nn
