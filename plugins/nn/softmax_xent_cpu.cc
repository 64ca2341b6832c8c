// nn.softmax_xent.fwd_bwd on CPU: per-row log-sum-exp in double, then a sum over rows in row order,
// so the loss does not depend on how the pool split the rows (arguments: softmax_xent_args.h). bf16 logits
// are read exactly (as f32) and each gradient is rounded once; dlogits may be the logits (in place).
#include <algorithm>
#include <cmath>
#include <vector>

#include "softmax_xent_args.h"

namespace tessel::kernels::nn {
namespace {

struct SoftmaxXentCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const SoftmaxXentArgs<T>& a) {
    const int64_t n = a.n, c = a.c;
    const T* logits = a.logits;
    const int64_t* labels = a.labels;
    const uint8_t* mask = a.mask;
    const double scale = a.scale;
    T* dlogits = a.dlogits;
    std::vector<double> row_loss(static_cast<size_t>(n), 0.0);
    std::vector<uint8_t> row_correct(static_cast<size_t>(n), 0);
    args.ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, c)), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T* z = logits + i * c;
        T* dz = dlogits + i * c;
        const int64_t label = labels[i];
        if (mask[i] == 0 || label < 0) {
          std::fill_n(dz, c, FromAccumulate<T>(0));
          continue;
        }
        int64_t argmax = 0;
        const auto at = [&](int64_t j) { return static_cast<double>(ToAccumulate(z[j])); };
        for (int64_t j = 1; j < c; ++j) {
          if (at(j) > at(argmax)) argmax = j;
        }
        const double zmax = at(argmax);
        double sum = 0.0;
        for (int64_t j = 0; j < c; ++j) sum += std::exp(at(j) - zmax);
        const double lse = zmax + std::log(sum);
        row_loss[i] = lse - at(label);
        row_correct[i] = argmax == label ? 1 : 0;
        for (int64_t j = 0; j < c; ++j) {
          const double p = std::exp(at(j) - lse);  // z[j] is read before dz[j] (maybe the same) is written
          dz[j] = FromAccumulate<T>(static_cast<Accumulate<T>>((p - (j == label ? 1.0 : 0.0)) * scale));
        }
      }
    });
    double total = 0.0;
    int64_t hits = 0;
    for (int64_t i = 0; i < n; ++i) {
      total += row_loss[i];
      hits += row_correct[i];
    }
    *a.loss_sum = total;
    *a.correct = hits;
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(SoftmaxXentCpu, SoftmaxXentArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
