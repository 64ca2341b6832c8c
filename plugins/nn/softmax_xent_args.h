// The arguments of nn.softmax_xent.fwd_bwd (<tessel/ops/nn.h>), bound and checked here once for its CPU
// and CUDA kernels (softmax_xent*) and every dtype: logits [N, C], labels [N], mask [N], the scale
// parameter, loss_sum [1] (f64), correct [1] (i64), dlogits [N, C].
// Failure: Bind throws KernelError: invalid-argument for a shape, dtype or parameter struct that does not
// match; bad-data for a contributing label >= C (checked where the labels are host memory: on the CPU;
// the CUDA kernel treats such a row as unlabelled).
#pragma once

#include <cstdint>
#include <string>

#include "kernels.h"

namespace tessel::kernels::nn {

template <typename T>
struct SoftmaxXentArgs {
  int64_t n = kUnbound, c = kUnbound;
  const T* logits = nullptr;
  const int64_t* labels = nullptr;
  const uint8_t* mask = nullptr;
  double scale = 0;
  double* loss_sum = nullptr;
  int64_t* correct = nullptr;
  T* dlogits = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_nn_softmax_xent; }

  static SoftmaxXentArgs Bind(const KernelArgs& args) {
    int64_t one = 1;
    SoftmaxXentArgs a;
    a.logits = args.In<T>(0, "logits", {&a.n, &a.c});
    a.labels = args.In<int64_t>(1, "labels", {&a.n});
    a.mask = args.In<uint8_t>(2, "mask", {&a.n});
    a.scale = args.Params<tessel_softmax_xent_params>().scale;
    a.loss_sum = args.Out<double>(0, "loss_sum", {&one});
    a.correct = args.Out<int64_t>(1, "correct", {&one});
    a.dlogits = args.Out<T>(2, "dlogits", {&a.n, &a.c});
    if (args.data_check() == DataCheck::kFull) {
      for (int64_t i = 0; i < a.n; ++i) {
        if (a.mask[i] != 0 && a.labels[i] >= a.c) {
          Fail(TESSEL_STATUS_BAD_DATA, "labels[" + std::to_string(i) + "] = " + std::to_string(a.labels[i]) +
                                           " is not a class (there are " + std::to_string(a.c) + ")");
        }
      }
    }
    return a;
  }
};

}  // namespace tessel::kernels::nn
