// nn.softmax_xent.fwd_bwd on CPU: per-row log-sum-exp in double, then a sum over rows in row order,
// so the loss does not depend on how the pool split the rows.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

struct SoftmaxXentCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_softmax_xent; }
  template <typename T>
  static void Run(const KernelArgs& args);
};

template <typename T>
void SoftmaxXentCpu::Run(const KernelArgs& args) {
  int64_t n = kUnbound, c = kUnbound, one = 1;
  const T* logits = args.In<T>(0, "logits", {&n, &c});
  const int64_t* labels = args.In<int64_t>(1, "labels", {&n});
  const uint8_t* mask = args.In<uint8_t>(2, "mask", {&n});
  const double scale = args.Params<tessel_softmax_xent_params>().scale;
  double* loss_sum = args.Out<double>(0, "loss_sum", {&one});
  int64_t* correct = args.Out<int64_t>(1, "correct", {&one});
  T* dlogits = args.Out<T>(2, "dlogits", {&n, &c});
  for (int64_t i = 0; i < n; ++i) {
    if (mask[i] != 0 && labels[i] >= c) {
      Fail(TESSEL_STATUS_BAD_DATA, "labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) +
                                       " is not a class (there are " + std::to_string(c) + ")");
    }
  }

  std::vector<double> row_loss(static_cast<size_t>(n), 0.0);
  std::vector<uint8_t> row_correct(static_cast<size_t>(n), 0);
  args.ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, c)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const T* z = logits + i * c;
      T* dz = dlogits + i * c;
      const int64_t label = labels[i];
      if (mask[i] == 0 || label < 0) {
        std::fill_n(dz, c, T(0));
        continue;
      }
      int64_t argmax = 0;
      for (int64_t j = 1; j < c; ++j) {
        if (z[j] > z[argmax]) argmax = j;
      }
      const double zmax = static_cast<double>(z[argmax]);
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(z[j]) - zmax);
      const double lse = zmax + std::log(sum);
      row_loss[i] = lse - static_cast<double>(z[label]);
      row_correct[i] = argmax == label ? 1 : 0;
      for (int64_t j = 0; j < c; ++j) {
        const double p = std::exp(static_cast<double>(z[j]) - lse);
        dz[j] = static_cast<T>((p - (j == label ? 1.0 : 0.0)) * scale);
      }
    }
  });
  double total = 0.0;
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    total += row_loss[i];
    hits += row_correct[i];
  }
  *loss_sum = total;
  *correct = hits;
}

}  // namespace

TESSEL_DEFINE_KERNEL(SoftmaxXentCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
