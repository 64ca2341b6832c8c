// nn.gelu.fwd/.bwd on CPU: the exact (erf) GELU; nn.gelu_tanh.fwd/.bwd: GPT-2's tanh approximation, as
// llm.c's gelu_forward/gelu_backward compute it. Elementwise, in chunks on the host's pool.
#include <cmath>

#include "kernels.h"
#include "row_ops.h"

namespace tessel::kernels::nn {
namespace {

constexpr int64_t kElementGrain = 1 << 14;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

struct GeluFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * T(0.5) * (T(1) + std::erf(x[i] * T(kInvSqrt2)));
    });
  }
};

struct GeluBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* x = args.In<T>(1, "X", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
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
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) { GeluTanhRow(i1 - i0, x + i0, y + i0); });
  }
};

// dX = dY (s + 2 x s (1 - s) du/dx), s = sigmoid(2u): 0.5 (1 + tanh(u)) and 0.5 sech^2(u) = 2 s (1 - s).
struct GeluTanhBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* x = args.In<T>(1, "X", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    args.ParallelFor(n * d, kElementGrain,
                     [&](int64_t i0, int64_t i1) { GeluTanhBwdRow(i1 - i0, dy + i0, x + i0, dx + i0); });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GeluFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluBwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluTanhFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluTanhBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
