// optim.adam.step on CPU: torch.optim.Adam's update (coupled L2 weight decay, bias correction),
// elementwise and in place on param, m and v.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

struct AdamStepCpu {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step; }
  template <typename T>
  static void Run(const KernelArgs& args);
};

template <typename T>
void AdamStepCpu::Run(const KernelArgs& args) {
  int64_t p = kUnbound;
  T* param = args.InMutable<T>(0, "param", {&p});
  const T* grad = args.In<T>(1, "grad", {&p});
  T* m = args.InMutable<T>(2, "m", {&p});
  T* v = args.InMutable<T>(3, "v", {&p});
  const tessel_adam_params& h = CheckedAdamParams(args);
  const double step = static_cast<double>(h.step);
  const T step_size = static_cast<T>(h.lr / (1 - std::pow(h.beta1, step)));
  const T bias2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step)));
  const T b1c = static_cast<T>(1 - h.beta1), b2 = static_cast<T>(h.beta2), b2c = static_cast<T>(1 - h.beta2);
  const T wd = static_cast<T>(h.weight_decay), e = static_cast<T>(h.eps);
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

// The same update over [P, D] rows whose gradient is grad_rows[row_of[p]], or zero when row_of[p] < 0.
struct AdamStepRowsCpu {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step_rows; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t p = kUnbound, d = kUnbound, z = kUnbound;
    T* param = args.InMutable<T>(0, "param", {&p, &d});
    const T* grad_rows = args.In<T>(1, "grad_rows", {&z, &d});
    const int32_t* row_of = args.In<int32_t>(2, "row_of", {&p});
    T* m = args.InMutable<T>(3, "m", {&p, &d});
    T* v = args.InMutable<T>(4, "v", {&p, &d});
    for (int64_t i = 0; i < p; ++i) {
      if (row_of[i] >= z) {
        Fail(TESSEL_STATUS_BAD_DATA, "row_of[" + std::to_string(i) + "] = " + std::to_string(row_of[i]) +
                                         " is past the " + std::to_string(z) + " gradient rows");
      }
    }
    const tessel_adam_params& h = CheckedAdamParams(args);
    const double step = static_cast<double>(h.step);
    const T step_size = static_cast<T>(h.lr / (1 - std::pow(h.beta1, step)));
    const T bias2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step)));
    const T b1c = static_cast<T>(1 - h.beta1), b2 = static_cast<T>(h.beta2), b2c = static_cast<T>(1 - h.beta2);
    const T wd = static_cast<T>(h.weight_decay), e = static_cast<T>(h.eps);
    args.ParallelFor(p, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, d)), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const T* g_row = row_of[row] >= 0 ? grad_rows + static_cast<int64_t>(row_of[row]) * d : nullptr;
        T *pr = param + row * d, *mr = m + row * d, *vr = v + row * d;
        for (int64_t c = 0; c < d; ++c) {
          const T g = (g_row != nullptr ? g_row[c] : T(0)) + wd * pr[c];
          mr[c] += b1c * (g - mr[c]);
          vr[c] = vr[c] * b2 + b2c * g * g;
          pr[c] -= step_size * mr[c] / (std::sqrt(vr[c]) / bias2_sqrt + e);
        }
      }
    });
  }
};

}  // namespace

const tessel_adam_params& CheckedAdamParams(const KernelArgs& args) {
  const tessel_adam_params& h = args.Params<tessel_adam_params>();
  if (h.step < 1) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam step must be >= 1, is " + std::to_string(h.step));
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1) || !(h.eps >= 0) || !(h.lr >= 0)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam needs 0 <= beta1, beta2 < 1, eps >= 0 and lr >= 0");
  }
  return h;
}

TESSEL_DEFINE_KERNEL(AdamStepCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AdamStepRowsCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
