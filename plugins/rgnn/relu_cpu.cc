// nn.relu.fwd/.bwd on CPU: elementwise, in chunks on the host's pool.
#include "cpu_kernels.h"
#include "kernel_support.h"

namespace tessel::rgnn {
namespace {

constexpr int64_t kElementGrain = 1 << 15;

template <typename T>
void ReluFwd(const KernelArgs& args) {
  int64_t n = kUnbound, d = kUnbound;
  const T* x = args.In<T>(0, "X", {&n, &d});
  T* y = args.Out<T>(0, "Y", {&n, &d});
  args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  });
}

template <typename T>
void ReluBwd(const KernelArgs& args) {
  int64_t n = kUnbound, d = kUnbound;
  const T* dy = args.In<T>(0, "dY", {&n, &d});
  const T* y = args.In<T>(1, "Y", {&n, &d});
  T* dx = args.Out<T>(0, "dX", {&n, &d});
  args.ParallelFor(n * d, kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
  });
}

}  // namespace

tessel_status* ReluFwdCpu(void*, const tessel_kernel_call* call) {
  return RunGuarded(call, [&] {
    KernelArgs args(call, TESSEL_DEVICE_CPU, 1, 1);
    DispatchFloating(args.in(0).dtype, [&](auto zero) { ReluFwd<decltype(zero)>(args); });
  });
}

tessel_status* ReluBwdCpu(void*, const tessel_kernel_call* call) {
  return RunGuarded(call, [&] {
    KernelArgs args(call, TESSEL_DEVICE_CPU, 2, 1);
    DispatchFloating(args.in(0).dtype, [&](auto zero) { ReluBwd<decltype(zero)>(args); });
  });
}

}  // namespace tessel::rgnn
