// The arguments of nn.add, nn.sum_squares and nn.cast (<tessel/ops/nn.h>), bound and checked here once
// for their CPU and CUDA kernels (elementwise*) and every dtype: add A, B -> C, all [N] (C may be A or
// B); sum_squares X [N] -> S [1] (f64); cast X [N] (Accumulate<T>) -> Y [N] (T).
// Failure: Bind throws KernelError (invalid-argument) for a shape or dtype that does not match.
#pragma once

#include <cstdint>

#include "kernels.h"

namespace tessel::kernels::nn {

template <typename T>
struct AddArgs {
  int64_t n = kUnbound;
  const T* a = nullptr;
  const T* b = nullptr;
  T* c = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_add; }

  static AddArgs Bind(const KernelArgs& args) {
    AddArgs t;
    t.a = args.In<T>(0, "A", {&t.n});
    t.b = args.In<T>(1, "B", {&t.n});
    t.c = args.Out<T>(0, "C", {&t.n});
    return t;
  }
};

template <typename T>
struct SumSquaresArgs {
  int64_t n = kUnbound;
  const T* x = nullptr;
  double* s = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_sum_squares; }

  static SumSquaresArgs Bind(const KernelArgs& args) {
    int64_t one = 1;
    SumSquaresArgs a;
    a.x = args.In<T>(0, "X", {&a.n});
    a.s = args.Out<double>(0, "S", {&one});
    return a;
  }
};

template <typename T>
struct CastArgs {
  int64_t n = kUnbound;
  const Accumulate<T>* x = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_cast; }

  static CastArgs Bind(const KernelArgs& args) {
    CastArgs a;
    a.x = args.In<Accumulate<T>>(0, "X", {&a.n});
    a.y = args.Out<T>(0, "Y", {&a.n});
    return a;
  }
};

}  // namespace tessel::kernels::nn
