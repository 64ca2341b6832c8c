// nn.relu.fwd/.bwd on CPU: elementwise, in chunks on the host's pool.
#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

constexpr int64_t kElementGrain = 1 << 15;

struct ReluFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_relu_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
    });
  }
};

struct ReluBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_relu_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* y = args.In<T>(1, "Y", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(ReluFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(ReluBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
