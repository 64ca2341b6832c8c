// The arguments of nn's elementwise activations (<tessel/ops/nn.h>): nn.relu, nn.gelu and nn.gelu_tanh,
// bound and checked here once for their CPU and CUDA kernels (relu*, gelu*) and every dtype. Forward
// X -> Y; backward (dY, S) -> dX, where S is what the backward reads: the output Y (relu) or the input X
// (gelu, gelu_tanh). Every tensor is [N, D]; the kernels see N * D elements.
// Failure: Bind throws KernelError (invalid-argument) for a dtype, rank or shape that does not match.
#pragma once

#include <cstdint>

#include "kernels.h"

namespace tessel::kernels::nn {

template <typename T>
struct ActivationFwdArgs {
  int64_t count = 0;  // N * D
  const T* x = nullptr;
  T* y = nullptr;

  static ActivationFwdArgs Bind(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    ActivationFwdArgs a;
    a.x = args.In<T>(0, "X", {&n, &d});
    a.y = args.Out<T>(0, "Y", {&n, &d});
    a.count = n * d;
    return a;
  }
};

template <typename T>
struct ActivationBwdArgs {
  int64_t count = 0;  // N * D
  const T* dy = nullptr;
  const T* saved = nullptr;  // Y (relu) or X (gelu, gelu_tanh)
  T* dx = nullptr;

  // `saved_name`: input 1's name in the op's schema.
  static ActivationBwdArgs BindSaved(const KernelArgs& args, const char* saved_name) {
    int64_t n = kUnbound, d = kUnbound;
    ActivationBwdArgs a;
    a.dy = args.In<T>(0, "dY", {&n, &d});
    a.saved = args.In<T>(1, saved_name, {&n, &d});
    a.dx = args.Out<T>(0, "dX", {&n, &d});
    a.count = n * d;
    return a;
  }
};

template <typename T>
struct ReluFwdArgs : ActivationFwdArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_nn_relu_fwd; }
};

template <typename T>
struct ReluBwdArgs : ActivationBwdArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_nn_relu_bwd; }
  static ActivationBwdArgs<T> Bind(const KernelArgs& args) { return ActivationBwdArgs<T>::BindSaved(args, "Y"); }
};

template <typename T>
struct GeluFwdArgs : ActivationFwdArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_fwd; }
};

template <typename T>
struct GeluBwdArgs : ActivationBwdArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_bwd; }
  static ActivationBwdArgs<T> Bind(const KernelArgs& args) { return ActivationBwdArgs<T>::BindSaved(args, "X"); }
};

template <typename T>
struct GeluTanhFwdArgs : ActivationFwdArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_fwd; }
};

template <typename T>
struct GeluTanhBwdArgs : ActivationBwdArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_bwd; }
  static ActivationBwdArgs<T> Bind(const KernelArgs& args) { return ActivationBwdArgs<T>::BindSaved(args, "X"); }
};

}  // namespace tessel::kernels::nn
