// optim.adam.step on CPU: torch.optim.Adam's update (coupled L2 weight decay, bias correction),
// elementwise and in place on param, m and v.
#include <cmath>
#include <string>

#include "cpu_kernels.h"
#include "kernel_support.h"
#include "rgnn_ops.h"

namespace tessel::rgnn {
namespace {

template <typename T>
void AdamStep(const KernelArgs& args) {
  int64_t p = kUnbound, seven = kNumAdamHyper;
  T* param = args.InMutable<T>(0, "param", {&p});
  const T* grad = args.In<T>(1, "grad", {&p});
  T* m = args.InMutable<T>(2, "m", {&p});
  T* v = args.InMutable<T>(3, "v", {&p});
  const double* hyper = args.In<double>(4, "hyper", {&seven});
  const double lr = hyper[kLr], beta1 = hyper[kBeta1], beta2 = hyper[kBeta2], eps = hyper[kEps];
  const double weight_decay = hyper[kWeightDecay], step = hyper[kStep];
  if (!(step >= 1) || step != std::floor(step)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam step must be a whole number >= 1, is " + std::to_string(step));
  }
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps >= 0) || !(lr >= 0)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam needs 0 <= beta1, beta2 < 1, eps >= 0 and lr >= 0");
  }
  if (hyper[kReserved] != 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam hyper[6] is reserved and must be 0");

  const T step_size = static_cast<T>(lr / (1 - std::pow(beta1, step)));
  const T bias2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(beta2, step)));
  const T b1c = static_cast<T>(1 - beta1), b2 = static_cast<T>(beta2), b2c = static_cast<T>(1 - beta2);
  const T wd = static_cast<T>(weight_decay), e = static_cast<T>(eps);
  args.ParallelFor(p, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const T g = grad[i] + wd * param[i];
      m[i] += b1c * (g - m[i]);
      v[i] = v[i] * b2 + b2c * g * g;
      const T denom = std::sqrt(v[i]) / bias2_sqrt + e;
      param[i] -= step_size * m[i] / denom;
    }
  });
}

}  // namespace

tessel_status* AdamStepCpu(void*, const tessel_kernel_call* call) {
  return RunGuarded(call, [&] {
    KernelArgs args(call, TESSEL_DEVICE_CPU, 5, 0);
    DispatchFloating(args.in(0).dtype, [&](auto zero) { AdamStep<decltype(zero)>(args); });
  });
}

}  // namespace tessel::rgnn
