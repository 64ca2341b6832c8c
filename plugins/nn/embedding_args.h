// The arguments of nn.embedding.fwd/.bwd (<tessel/ops/nn.h>), bound and checked here once for their CPU
// and CUDA kernels (embedding*) and every dtype: forward W [V, D], ids [M] -> Y [M, D]; backward
// dY [M, D], ids [M] -> dW [V, D].
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match; bad-data
// for an id outside [0, V) (checked where the ids are host memory: on the CPU; the CUDA kernels trust
// them).
#pragma once

#include <cstdint>

#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::nn {

template <typename T>
struct EmbeddingFwdArgs {
  int64_t v = kUnbound, d = kUnbound, m = kUnbound;
  const T* w = nullptr;
  const int64_t* ids = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_embedding_fwd; }

  static EmbeddingFwdArgs Bind(const KernelArgs& args) {
    EmbeddingFwdArgs a;
    a.w = args.In<T>(0, "W", {&a.v, &a.d});
    a.ids = args.In<int64_t>(1, "ids", {&a.m});
    a.y = args.Out<T>(0, "Y", {&a.m, &a.d});
    if (args.data_check() == DataCheck::kFull) CheckIndices(a.ids, a.m, a.v, "ids");
    return a;
  }
};

template <typename T>
struct EmbeddingBwdArgs {
  int64_t m = kUnbound, d = kUnbound, v = kUnbound;
  const T* dy = nullptr;
  const int64_t* ids = nullptr;
  T* dw = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_embedding_bwd; }

  static EmbeddingBwdArgs Bind(const KernelArgs& args) {
    EmbeddingBwdArgs a;
    a.dy = args.In<T>(0, "dY", {&a.m, &a.d});
    a.ids = args.In<int64_t>(1, "ids", {&a.m});
    a.dw = args.Out<T>(0, "dW", {&a.v, &a.d});
    if (args.data_check() == DataCheck::kFull) CheckIndices(a.ids, a.m, a.v, "ids");
    return a;
  }
};

}  // namespace tessel::kernels::nn
