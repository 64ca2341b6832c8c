// optim.adam.step on CPU: torch.optim.Adam's update (coupled L2 weight decay, bias correction),
// elementwise and in place on param, m and v; optim.adamw.step: torch.optim.AdamW's (decoupled weight
// decay), with the gradient scaled first. Arguments, hyperparameter checks and the per-step constants:
// adam_args.h.
#include <algorithm>
#include <cmath>

#include "adam_args.h"
#include "row_ops.h"

namespace tessel::kernels::nn {
namespace {

struct AdamStepCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const ElementwiseStep<T, AdamConstants<T>>& a) {
    args.ParallelFor(a.p, 1 << 14, [&](int64_t i0, int64_t i1) {
      AdamSpan(i1 - i0, a.param + i0, a.grad + i0, a.m + i0, a.v + i0, a.c);
    });
  }
};

// The same update over [P, D] rows whose gradient is grad_rows[row_of[p]], or zero when row_of[p] < 0.
struct AdamStepRowsCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AdamStepRowsArgs<T>& a) {
    const int64_t p = a.p, d = a.d;
    T* param = a.param;
    const T* grad_rows = a.grad_rows;
    const int32_t* row_of = a.row_of;
    T* m = a.m;
    T* v = a.v;
    const AdamConstants<T>& c = a.c;
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

// AdamW over n elements (adam_args.h, AdamwConstants). Built with -fno-math-errno (CMakeLists.txt), so
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
  template <typename T>
  static void Run(const KernelArgs& args, const ElementwiseStep<T, AdamwConstants<T>>& a) {
    args.ParallelFor(a.p, 1 << 14, [&](int64_t i0, int64_t i1) {
      AdamwSpan(i1 - i0, a.param + i0, a.grad + i0, a.m + i0, a.v + i0, a.c);
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(AdamStepCpu, AdamStepArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AdamStepRowsCpu, AdamStepRowsArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AdamwStepCpu, AdamwStepArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
