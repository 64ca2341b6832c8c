// nn.gelu.fwd/.bwd on CPU: the exact (erf) GELU, elementwise, in chunks on the host's pool.
#include <cmath>

#include "kernels.h"

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

}  // namespace

TESSEL_DEFINE_KERNEL(GeluFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(GeluBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
