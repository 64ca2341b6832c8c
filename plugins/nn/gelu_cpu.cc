// nn.gelu.fwd/.bwd on CPU: the exact (erf) GELU; nn.gelu_tanh.fwd/.bwd: GPT-2's tanh approximation, as
// llm.c's gelu_forward/gelu_backward compute it. Elementwise, in chunks on the host's pool (arguments:
// activation_args.h). The tanh GELU also runs on bf16: in f32 over chunks widened from bf16, each result
// rounded once (widen.h).
#include <algorithm>
#include <cmath>

#include "activation_args.h"
#include "linear_gelu.h"
#include "row_ops.h"
#include "widen.h"

namespace tessel::kernels::nn {

namespace {

constexpr int64_t kElementGrain = 1 << 14;
// Elements per widened chunk under bf16 (and per call of the row functions otherwise: the same results,
// since the row functions are elementwise).
constexpr int64_t kWideChunk = 1 << 12;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

struct GeluFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationFwdArgs<T>& a) {
    const T* x = a.x;
    T* y = a.y;
    args.ParallelFor(a.count, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * T(0.5) * (T(1) + std::erf(x[i] * T(kInvSqrt2)));
    });
  }
};

struct GeluBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationBwdArgs<T>& a) {
    const T* dy = a.dy;
    const T* x = a.saved;
    T* dx = a.dx;
    args.ParallelFor(a.count, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T cdf = T(0.5) * (T(1) + std::erf(x[i] * T(kInvSqrt2)));
        const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x[i] * x[i]);
        dx[i] = dy[i] * (cdf + x[i] * pdf);
      }
    });
  }
};

// GPT-2's tanh GELU, row_ops.h: x sigmoid(2u) with a vectorised exponential (tanh(u) = 2 sigmoid(2u) - 1).
struct GeluTanhFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationFwdArgs<T>& a) {
    GeluTanhForwardCpu(args, a.x, a.count, a.y);
  }
};

// dX = dY (s + 2 x s (1 - s) du/dx), s = sigmoid(2u): 0.5 (1 + tanh(u)) and 0.5 sech^2(u) = 2 s (1 - s).
struct GeluTanhBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationBwdArgs<T>& a) {
    const T* dy = a.dy;
    const T* x = a.saved;
    T* dx = a.dx;
    args.ParallelFor(a.count, kElementGrain, [&](int64_t i0, int64_t i1) {
      std::vector<Accumulate<T>> rows = ScratchRow<T>(3 * kWideChunk);
      for (int64_t j0 = i0; j0 < i1; j0 += kWideChunk) {
        const int64_t m = std::min(kWideChunk, i1 - j0);
        Accumulate<T>* out = ComputeInto(dx + j0, rows.data() + (kWidened<T> ? 2 * kWideChunk : 0));
        GeluTanhBwdRow(m, Widened(dy + j0, m, rows.data()),
                       Widened(x + j0, m, rows.data() + (kWidened<T> ? kWideChunk : 0)), out);
        Store<T>(out, m, dx + j0);
      }
    });
  }
};

}  // namespace

template <typename T>
void GeluTanhForwardCpu(const KernelArgs& args, const T* x, int64_t count, T* y) {
  args.ParallelFor(count, kElementGrain, [&](int64_t i0, int64_t i1) {
    std::vector<Accumulate<T>> rows = ScratchRow<T>(2 * kWideChunk);
    for (int64_t j0 = i0; j0 < i1; j0 += kWideChunk) {
      const int64_t m = std::min(kWideChunk, i1 - j0);
      Accumulate<T>* out = ComputeInto(y + j0, rows.data() + (kWidened<T> ? kWideChunk : 0));
      GeluTanhRow(m, Widened(x + j0, m, rows.data()), out);
      Store<T>(out, m, y + j0);
    }
  });
}
template void GeluTanhForwardCpu<float>(const KernelArgs&, const float*, int64_t, float*);
template void GeluTanhForwardCpu<double>(const KernelArgs&, const double*, int64_t, double*);
template void GeluTanhForwardCpu<Bf16>(const KernelArgs&, const Bf16*, int64_t, Bf16*);

TESSEL_DEFINE_KERNEL(GeluFwdCpu, GeluFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluBwdCpu, GeluBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(GeluTanhFwdCpu, GeluTanhFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(GeluTanhBwdCpu, GeluTanhBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
