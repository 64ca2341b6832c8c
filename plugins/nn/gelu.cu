// nn.gelu.fwd/.bwd on CUDA: the exact (erf) GELU; nn.gelu_tanh.fwd/.bwd: GPT-2's tanh approximation, the
// same expressions as gelu_cpu.cc (llm.c's). Elementwise grid-stride loops.
#include "cuda_support.h"
#include "kernels.h"

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

template <typename T>
__global__ void GeluTanhFwdKernel(const T* x, int64_t n, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i], cube = T(kGeluCubic) * v * v * v;
    y[i] = T(0.5) * v * (T(1) + tanh(T(kSqrt2OverPi) * (v + cube)));
  }
}

template <typename T>
__global__ void GeluTanhBwdKernel(const T* dy, const T* x, int64_t n, T* dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i], cube = T(kGeluCubic) * v * v * v;
    const T u = T(kSqrt2OverPi) * (v + cube);
    const T cosh_u = cosh(u);
    const T sech2 = T(1) / (cosh_u * cosh_u);
    const T local =
        T(0.5) * (T(1) + tanh(u)) + v * T(0.5) * sech2 * T(kSqrt2OverPi) * (T(1) + T(3) * T(kGeluCubic) * v * v);
    dx[i] = local * dy[i];
  }
}

struct GeluFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    if (n * d == 0) return;
    GeluFwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(x, n * d, y);
    CheckLaunch("GeluFwdKernel");
  }
};

struct GeluBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* x = args.In<T>(1, "X", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    if (n * d == 0) return;
    GeluBwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(dy, x, n * d, dx);
    CheckLaunch("GeluBwdKernel");
  }
};

struct GeluTanhFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &d});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    if (n * d == 0) return;
    GeluTanhFwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(x, n * d, y);
    CheckLaunch("GeluTanhFwdKernel");
  }
};

struct GeluTanhBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_nn_gelu_tanh_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* x = args.In<T>(1, "X", {&n, &d});
    T* dx = args.Out<T>(0, "dX", {&n, &d});
    if (n * d == 0) return;
    GeluTanhBwdKernel<T><<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(dy, x, n * d, dx);
    CheckLaunch("GeluTanhBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GeluFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(GeluBwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(GeluTanhFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(GeluTanhBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn
