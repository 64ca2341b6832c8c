// nn.gelu.fwd/.bwd on CUDA: the exact (erf) GELU; nn.gelu_tanh.fwd/.bwd: GPT-2's tanh approximation, the
// same expressions as gelu_cpu.cc (llm.c's), in f32 under bf16. Elementwise grid-stride loops (arguments:
// activation_args.h).
#include "activation_args.h"
#include "cuda_support.h"
#include "linear_gelu.h"

namespace tessel::kernels::nn {
namespace {

template <typename T>
__global__ void GeluFwdKernel(const T* x, int64_t n, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = x[i] * T(0.5) * (T(1) + erf(x[i] * T(0.70710678118654752440)));
  }
}

template <typename T>
__global__ void GeluBwdKernel(const T* dy, const T* x, int64_t n, T* dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T cdf = T(0.5) * (T(1) + erf(x[i] * T(0.70710678118654752440)));
    const T pdf = T(0.39894228040143267794) * exp(T(-0.5) * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

// In Accumulate<T> = A: under bf16 each value is widened to f32 and each result rounded once.
template <typename T>
__global__ void GeluTanhFwdKernel(const T* x, int64_t n, T* y) {
  using A = Accumulate<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const A v = ToAccumulate(x[i]), cube = A(kGeluCubic) * v * v * v;
    y[i] = FromAccumulate<T>(A(0.5) * v * (A(1) + tanh(A(kSqrt2OverPi) * (v + cube))));
  }
}

template <typename T>
__global__ void GeluTanhBwdKernel(const T* dy, const T* x, int64_t n, T* dx) {
  using A = Accumulate<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const A v = ToAccumulate(x[i]), cube = A(kGeluCubic) * v * v * v;
    const A u = A(kSqrt2OverPi) * (v + cube);
    const A cosh_u = cosh(u);
    const A sech2 = A(1) / (cosh_u * cosh_u);
    const A local =
        A(0.5) * (A(1) + tanh(u)) + v * A(0.5) * sech2 * A(kSqrt2OverPi) * (A(1) + A(3) * A(kGeluCubic) * v * v);
    dx[i] = FromAccumulate<T>(local * ToAccumulate(dy[i]));
  }
}

struct GeluFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationFwdArgs<T>& a) {
    if (a.count == 0) return;
    GeluFwdKernel<T><<<Blocks(a.count), kThreads, 0, StreamOf(args)>>>(a.x, a.count, a.y);
    CheckLaunch("GeluFwdKernel");
  }
};

struct GeluBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationBwdArgs<T>& a) {
    if (a.count == 0) return;
    GeluBwdKernel<T><<<Blocks(a.count), kThreads, 0, StreamOf(args)>>>(a.dy, a.saved, a.count, a.dx);
    CheckLaunch("GeluBwdKernel");
  }
};

struct GeluTanhFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationFwdArgs<T>& a) {
    GeluTanhForwardCuda(args, a.x, a.count, a.y);
  }
};

struct GeluTanhBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const ActivationBwdArgs<T>& a) {
    if (a.count == 0) return;
    GeluTanhBwdKernel<T><<<Blocks(a.count), kThreads, 0, StreamOf(args)>>>(a.dy, a.saved, a.count, a.dx);
    CheckLaunch("GeluTanhBwdKernel");
  }
};

}  // namespace

template <typename T>
void GeluTanhForwardCuda(const KernelArgs& args, const T* x, int64_t count, T* y) {
  if (count == 0) return;
  GeluTanhFwdKernel<T><<<Blocks(count), kThreads, 0, StreamOf(args)>>>(x, count, y);
  CheckLaunch("GeluTanhFwdKernel");
}
template void GeluTanhForwardCuda<float>(const KernelArgs&, const float*, int64_t, float*);
template void GeluTanhForwardCuda<double>(const KernelArgs&, const double*, int64_t, double*);
template void GeluTanhForwardCuda<Bf16>(const KernelArgs&, const Bf16*, int64_t, Bf16*);

TESSEL_DEFINE_KERNEL(GeluFwdCuda, GeluFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(GeluBwdCuda, GeluBwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(GeluTanhFwdCuda, GeluTanhFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL_BF16(GeluTanhBwdCuda, GeluTanhBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
