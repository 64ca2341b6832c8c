// optim.adam.step on CPU: torch.optim.Adam's update (coupled L2 weight decay, bias correction),
// elementwise and in place on param, m and v; optim.adamw.step: torch.optim.AdamW's (decoupled weight
// decay), with the gradient scaled first.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels.h"
#include "row_ops.h"

namespace tessel::kernels::nn {
namespace {

struct AdamStepCpu {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step; }
  template <typename T>
  static void Run(const KernelArgs& args);
};

// The update's per-step constants, from the checked hyperparameters.
template <typename T>
AdamConstants<T> Constants(const tessel_adam_params& h) {
  const double step = static_cast<double>(h.step);
  return AdamConstants<T>{static_cast<T>(h.lr / (1 - std::pow(h.beta1, step))),
                          static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step))),
                          static_cast<T>(1 - h.beta1),
                          static_cast<T>(h.beta2),
                          static_cast<T>(1 - h.beta2),
                          static_cast<T>(h.weight_decay),
                          static_cast<T>(h.eps)};
}

template <typename T>
void AdamStepCpu::Run(const KernelArgs& args) {
  int64_t p = kUnbound;
  T* param = args.InMutable<T>(0, "param", {&p});
  const T* grad = args.In<T>(1, "grad", {&p});
  T* m = args.InMutable<T>(2, "m", {&p});
  T* v = args.InMutable<T>(3, "v", {&p});
  const AdamConstants<T> c = Constants<T>(CheckedAdamParams(args));
  args.ParallelFor(p, 1 << 14,
                   [&](int64_t i0, int64_t i1) { AdamSpan(i1 - i0, param + i0, grad + i0, m + i0, v + i0, c); });
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
    const AdamConstants<T> c = Constants<T>(CheckedAdamParams(args));
    args.ParallelFor(p, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, d)), [&](int64_t r0, int64_t r1) {
      // Rows with a gradient one at a time; each run of rows without one in one call.
      for (int64_t row = r0; row < r1;) {
        int64_t end = row + 1;
        const T* g_row = nullptr;
        if (row_of[row] >= 0) {
          g_row = grad_rows + static_cast<int64_t>(row_of[row]) * d;
        } else {
          while (end < r1 && row_of[end] < 0) ++end;
        }
        AdamSpan((end - row) * d, param + row * d, g_row, m + row * d, v + row * d, c);
        row = end;
      }
    });
  }
};

// AdamW over n elements (kernels.h, AdamwConstants). Built with -fno-math-errno (CMakeLists.txt), so
// that the sqrt, and with it the loop, vectorises.
template <typename T>
void AdamwSpan(int64_t n, T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v,
               const AdamwConstants<T>& c) {
  // The constants in registers (through `c` the compiler would reload them: T* may alias them).
  const T grad_scale = c.grad_scale, decay = c.decay, beta1 = c.beta1, b1c = c.one_minus_beta1;
  const T beta2 = c.beta2, b2c = c.one_minus_beta2, step_size = c.step_size, bias2_sqrt = c.bias2_sqrt;
  const T eps = c.eps;
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad_scale * grad[i];
    const T mi = beta1 * m[i] + b1c * g;
    const T vi = beta2 * v[i] + b2c * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) / bias2_sqrt + eps);
  }
}

struct AdamwStepCpu {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adamw_step; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t p = kUnbound;
    T* param = args.InMutable<T>(0, "param", {&p});
    const T* grad = args.In<T>(1, "grad", {&p});
    T* m = args.InMutable<T>(2, "m", {&p});
    T* v = args.InMutable<T>(3, "v", {&p});
    const AdamwConstants<T> c = CheckedAdamwConstants<T>(args);
    args.ParallelFor(p, 1 << 14,
                     [&](int64_t i0, int64_t i1) { AdamwSpan(i1 - i0, param + i0, grad + i0, m + i0, v + i0, c); });
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

const tessel_adamw_params& CheckedAdamwParams(const KernelArgs& args) {
  const tessel_adamw_params& h = args.Params<tessel_adamw_params>();
  if (h.step < 1) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adamw step must be >= 1, is " + std::to_string(h.step));
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1) || !(h.eps >= 0) || !(h.lr >= 0) ||
      !(h.weight_decay >= 0)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adamw needs 0 <= beta1, beta2 < 1, eps >= 0, lr >= 0 and weight_decay >= 0");
  }
  if (!(h.grad_scale >= 0) || !std::isfinite(h.grad_scale)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "adamw grad_scale must be finite and >= 0, is " + std::to_string(h.grad_scale));
  }
  return h;
}

TESSEL_DEFINE_KERNEL(AdamStepCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AdamStepRowsCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AdamwStepCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
