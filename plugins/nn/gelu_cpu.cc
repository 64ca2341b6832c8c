// nn.gelu.fwd/.bwd on CPU: the exact (erf) GELU; nn.gelu_tanh.fwd/.bwd: GPT-2's tanh approximation, as
// llm.c's gelu_forward/gelu_backward compute it. Elementwise, in chunks on the host's pool.
#include <cmath>

#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

constexpr int64_t kElementGrain = 1 << 14;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

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

struct GeluTanhFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T v = x[i], cube = T(kGeluCubic) * v * v * v;
        y[i] = T(0.5) * v * (T(1) + std::tanh(T(kSqrt2OverPi) * (v + cube)));
      }
    });
  }
};

// dX = dY * (0.5 (1 + tanh(u)) + 0.5 x sech^2(u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)), u = sqrt(2/pi)(x +
// 0.044715 x^3), with sech^2 as 1 / cosh^2 (llm.c's form: cosh overflows to inf far out, giving 0).
struct GeluTanhBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* x = args.In<T>(1, "X", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T v = x[i], cube = T(kGeluCubic) * v * v * v;
        const T u = T(kSqrt2OverPi) * (v + cube);
        const T cosh_u = std::cosh(u);
        const T sech2 = T(1) / (cosh_u * cosh_u);
        const T local = T(0.5) * (T(1) + std::tanh(u)) +
                        v * T(0.5) * sech2 * T(kSqrt2OverPi) * (T(1) + T(3) * T(kGeluCubic) * v * v);
        dx[i] = local * dy[i];
      }
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GeluFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluBwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluTanhFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluTanhBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
