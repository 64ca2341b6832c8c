// Helpers for the kernel tests of the built-in plugins: load libtessel_nn.so, libtessel_rgnn.so and
// libtessel_gather.so through the registry (as a worker does), tensors, tolerances, finite differences, and the
// CUDA-versus- CPU comparison. The expectations in the tests are computed by naive loops, never by the kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::kernel_test {

// A registry with every built-in plugin of build/plugins loaded, shared by the tests of one binary.
const workers::KernelRegistry& BuiltinRegistry();

// Calls (op, cpu) and asserts success. `params` is the op's parameter struct, when it has one.
void CallCpu(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
             ThreadPool* pool, const void* params = nullptr, size_t params_size = 0);
template <typename P>
void CallCpuWith(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                 const P& params, ThreadPool* pool) {
  CallCpu(op, inputs, outputs, pool, &params, sizeof(P));
}
// The same, returning the status instead of asserting.
Status TryCallCpu(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                  ThreadPool* pool, const void* params = nullptr, size_t params_size = 0);

template <typename T>
Tensor MakeTensor(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t = Tensor::Empty(DTypeOf<T>(), std::move(shape)).value();
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <typename T>
Tensor Filled(std::vector<int64_t> shape, T value) {
  Tensor t = Tensor::Empty(DTypeOf<T>(), std::move(shape)).value();
  std::fill_n(t.data<T>(), t.numel(), value);
  return t;
}

template <typename T>
std::vector<T> ToVector(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

template <typename T>
std::vector<T> RandomValues(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> out(static_cast<size_t>(n));
  for (T& v : out) v = static_cast<T>(dist(rng));
  return out;
}

template <typename T>
std::vector<T> Cast(const std::vector<double>& values) {
  return std::vector<T>(values.begin(), values.end());
}

// Relative-with-floor tolerance by dtype: float accumulations of a few dozen terms, double to 1e-11.
template <typename T>
double Tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-11;
}

// Expects |a - b| <= tol * max(|b|, rms(expected)) elementwise, reporting the first few mismatches by
// index: relative to each value, and to the expected tensor's own magnitude (its root mean square) where a
// value is near zero, never to a fixed 1. So a result that is all zeros, or that leaves part of its
// outputs unwritten, fails wherever the expected values are not themselves zero; an expected tensor that
// is all zero must be matched exactly.
template <typename T, typename U>
void ExpectNear(const std::vector<T>& actual, const std::vector<U>& expected, double tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double squares = 0;
  for (const U& v : expected) squares += static_cast<double>(v) * static_cast<double>(v);
  const double rms = expected.empty() ? 0.0 : std::sqrt(squares / static_cast<double>(expected.size()));
  int reported = 0;
  size_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), b = static_cast<double>(expected[i]);
    if (!(std::abs(a - b) <= tol * std::max(std::abs(b), rms))) {
      ++bad;
      if (reported++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << a << ", expected " << b << " (rms " << rms << ")";
    }
  }
  if (bad > 5) ADD_FAILURE() << what << ": " << bad << " of " << actual.size() << " values differ";
}

// bf16 (the CPU reference of the bf16 kernels): values already representable in bf16, so that an f32
// kernel sees exactly what a bf16 one reads; bf16 tensors from floats and back; values rounded to bf16;
// and bit equality of float vectors, reporting the first differences.
std::vector<float> Bf16Representable(int64_t n, uint64_t seed, double lo = -1, double hi = 1);
Tensor Bf16Tensor(std::vector<int64_t> shape, const std::vector<float>& values);
std::vector<float> Widen(const Tensor& bf16);
std::vector<float> Rounded(const std::vector<float>& values);
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what);

// Finite differences for the gradient checks: dL/dx[i] by central differences (step 1e-6); x is
// restored afterwards.
std::vector<double> NumericGrad(std::vector<double>& x, const std::function<double()>& objective);
// sum(t * g) over a double tensor: the scalar objective L = sum(G * output) whose gradient is G.
double Dot(const Tensor& t, const std::vector<double>& g);
inline constexpr double kGradTol = 1e-6;

// How many chunks ThreadPool::ParallelFor makes of n items at a given grain with `threads` threads:
// a test that claims to cover several chunks checks it with this.
int64_t PoolChunks(int64_t n, int64_t grain, int threads);

// Skips the current test unless the CUDA kernels of every op in `ops` can run here (built with CUDA and a
// GPU visible), saying why. Call from SetUp or the test body, then `if (IsSkipped()) return;`.
void RequireCudaKernels(const std::vector<std::string>& ops);

// Runs `op` on CPU and on CUDA from the same inputs and output buffers, then compares every output and
// every input (inputs must come back unchanged, except those an op updates in place). `tol` is relative
// to each value and to the tensor's RMS, as ExpectNear.
void CompareDevices(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    double tol, const void* params = nullptr, size_t params_size = 0);
// CompareDevices' comparison with the second run supplied: `other` gets host copies of the inputs and
// outputs and leaves in them what the kernel under test would (CompareDevices' runs the CUDA kernel on
// device copies and downloads them). A test of the comparison itself feeds it a kernel that writes zeros.
using KernelRun = std::function<void(std::vector<Tensor>& inputs, std::vector<Tensor>& outputs)>;
void CompareWithCpu(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    double tol, const void* params, size_t params_size, const KernelRun& other);
// Runs `op`'s CUDA kernel on device copies of `inputs` and `outputs` and returns its status (nothing is
// copied back): for the checks a CUDA kernel makes beyond its binder's. Call RequireCudaKernels first;
// without CUDA it returns kPlugin.
Status TryCallCuda(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                   const void* params = nullptr, size_t params_size = 0);
template <typename P>
Status TryCallCudaWith(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                       const P& params) {
  return TryCallCuda(op, inputs, outputs, &params, sizeof(P));
}

template <typename P>
void CompareDevicesWith(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                        double tol, const P& params) {
  CompareDevices(op, inputs, outputs, tol, &params, sizeof(P));
}

}  // namespace tessel::kernel_test
