#include "kernel_test_util.h"

#include <algorithm>
#include <cstring>

#include "core/allocator.h"

#if TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel::kernel_test {

const workers::KernelRegistry& BuiltinRegistry() {
  static const workers::KernelRegistry registry = [] {
    workers::KernelRegistry r(Logger("test", LogLevel::kWarn));
    for (const char* name : {"libtessel_nn.so", "libtessel_rgnn.so", "libtessel_gather.so", "libtessel_llm.so"}) {
      const std::string path = std::string(TESSEL_BINARY_DIR) + "/plugins/" + name;
      const Status st = r.LoadPlugin(path);
      if (!st.ok()) ADD_FAILURE() << "cannot load " << path << ": " << st.ToString();
    }
    return r;
  }();
  return registry;
}

Status TryCallCpu(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                  ThreadPool* pool, const void* params, size_t params_size) {
  TESSEL_ASSIGN_OR_RETURN(const workers::Kernel* kernel, BuiltinRegistry().Find(op, Device::kCpu));
  return kernel->Call(inputs, outputs, workers::CallOptions{pool, nullptr, 0, nullptr}, params, params_size);
}

void CallCpu(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
             ThreadPool* pool, const void* params, size_t params_size) {
  const Status st = TryCallCpu(op, inputs, outputs, pool, params, params_size);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

std::vector<double> NumericGrad(std::vector<double>& x, const std::function<double()>& objective) {
  constexpr double kStep = 1e-6;
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double up = objective();
    x[i] = saved - kStep;
    const double down = objective();
    x[i] = saved;
    grad[i] = (up - down) / (2 * kStep);
  }
  return grad;
}

double Dot(const Tensor& t, const std::vector<double>& g) {
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) sum += t.data<double>()[i] * g[static_cast<size_t>(i)];
  return sum;
}

int64_t PoolChunks(int64_t n, int64_t grain, int threads) {
  // Mirrors core/thread_pool.cc: inline below the grain, else at most 4 chunks per thread.
  grain = std::max<int64_t>(1, grain);
  if (threads <= 1 || n <= grain) return n > 0 ? 1 : 0;
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t{threads} * 4);
  const int64_t chunk = (n + chunks - 1) / chunks;
  return (n + chunk - 1) / chunk;
}

void RequireCudaKernels(const std::vector<std::string>& ops) {
#if !TESSEL_HAVE_CUDA
  (void)ops;
  GTEST_SKIP() << "Tessel was built without CUDA: there are no CUDA kernels to compare";
#else
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device is visible: the cross-device comparison needs a GPU";
  const Status st = BuiltinRegistry().RequireOps(ops, Device::kCuda);
  ASSERT_TRUE(st.ok()) << "the plugins were built with CUDA but lack CUDA kernels: " << st.ToString();
#endif
}

namespace {

[[maybe_unused]] Tensor Clone(const Tensor& t) {
  Tensor copy = Tensor::Empty(t.dtype(), t.shape()).value();
  if (t.nbytes() > 0) std::memcpy(copy.raw(), t.raw(), t.nbytes());
  return copy;
}

void ExpectSame(const Tensor& cpu, const Tensor& cuda, double tol, const std::string& what) {
  ASSERT_EQ(cpu.dtype(), cuda.dtype()) << what;
  switch (cpu.dtype()) {
    case DType::kF32:
      ExpectNear(ToVector<float>(cuda), ToVector<float>(cpu), tol, what);
      break;
    case DType::kF64:
      ExpectNear(ToVector<double>(cuda), ToVector<double>(cpu), tol, what);
      break;
    case DType::kI64:
      EXPECT_EQ(ToVector<int64_t>(cuda), ToVector<int64_t>(cpu)) << what;
      break;
    case DType::kI32:
      EXPECT_EQ(ToVector<int32_t>(cuda), ToVector<int32_t>(cpu)) << what;
      break;
    case DType::kU8:
      EXPECT_EQ(ToVector<uint8_t>(cuda), ToVector<uint8_t>(cpu)) << what;
      break;
    case DType::kBF16:
      ExpectNear(Widen(cuda), Widen(cpu), tol, what);
      break;
    case DType::kF16:
      ADD_FAILURE() << what << ": f16 comparisons are not implemented";
      break;
  }
}

#if TESSEL_HAVE_CUDA
// Device copies of host tensors, freed with the object.
class DeviceTensors {
 public:
  ~DeviceTensors() {
    for (void* p : owned_) cudaFree(p);
  }
  Tensor Upload(const Tensor& host) {
    void* ptr = nullptr;
    EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(1, host.nbytes())), cudaSuccess);
    owned_.push_back(ptr);
    EXPECT_EQ(cudaMemcpy(ptr, host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    return Tensor::Borrow(ptr, host.dtype(), host.shape(), Device::kCuda);
  }
  static Tensor Download(const Tensor& device) {
    Tensor host = Tensor::Empty(device.dtype(), device.shape()).value();
    EXPECT_EQ(cudaMemcpy(host.raw(), device.raw(), device.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  std::vector<void*> owned_;
};
#endif

}  // namespace

#if TESSEL_HAVE_CUDA
namespace {

// Runs `op`'s CUDA kernel on device copies of `inputs` and `outputs`; with `back`, copies both back over them.
Status CallCudaOnCopies(const std::string& op, std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                        ThreadPool* pool, const void* params, size_t params_size, bool back) {
  DeviceTensors device;
  std::vector<Tensor> dev_in, dev_out;
  for (const Tensor& t : inputs) dev_in.push_back(device.Upload(t));
  for (const Tensor& t : outputs) dev_out.push_back(device.Upload(t));
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (const Tensor& t : dev_in) in.push_back(&t);
  for (Tensor& t : dev_out) out.push_back(&t);
  TESSEL_ASSIGN_OR_RETURN(const workers::Kernel* kernel, BuiltinRegistry().Find(op, Device::kCuda));
  const Status st = kernel->Call(in, out, workers::CallOptions{pool, nullptr, 0, nullptr}, params, params_size);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << op;
  if (!st.ok() || !back) return st;
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i] = DeviceTensors::Download(dev_out[i]);
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = DeviceTensors::Download(dev_in[i]);
  return st;
}

}  // namespace
#endif

Status TryCallCuda(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                   const void* params, size_t params_size) {
#if TESSEL_HAVE_CUDA
  std::vector<Tensor> in = inputs, out = outputs;
  return CallCudaOnCopies(op, in, out, nullptr, params, params_size, /*back=*/false);
#else
  (void)inputs, (void)outputs, (void)params, (void)params_size;
  return Status(Code::kPlugin, op + ": Tessel was built without CUDA");
#endif
}

void CompareWithCpu(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    double tol, const void* params, size_t params_size, const KernelRun& other) {
  std::vector<Tensor> cpu_in, cpu_out, other_in, other_out;
  for (const Tensor& t : inputs) {
    cpu_in.push_back(Clone(t));
    other_in.push_back(Clone(t));
  }
  for (const Tensor& t : outputs) {
    cpu_out.push_back(Clone(t));
    other_out.push_back(Clone(t));
  }
  std::vector<const Tensor*> ci;
  std::vector<Tensor*> co;
  for (Tensor& t : cpu_in) ci.push_back(&t);
  for (Tensor& t : cpu_out) co.push_back(&t);
  ThreadPool pool(2);
  CallCpu(op, ci, co, &pool, params, params_size);
  other(other_in, other_out);
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < outputs.size(); ++i)
    ExpectSame(cpu_out[i], other_out[i], tol, op + " output " + std::to_string(i));
  for (size_t i = 0; i < inputs.size(); ++i)
    ExpectSame(cpu_in[i], other_in[i], tol, op + " input " + std::to_string(i));
}

void CompareDevices(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    double tol, const void* params, size_t params_size) {
#if TESSEL_HAVE_CUDA
  CompareWithCpu(op, inputs, outputs, tol, params, params_size, [&](std::vector<Tensor>& in, std::vector<Tensor>& out) {
    ThreadPool pool(2);
    const Status st = CallCudaOnCopies(op, in, out, &pool, params, params_size, /*back=*/true);
    ASSERT_TRUE(st.ok()) << st.ToString();
  });
#else
  (void)op, (void)inputs, (void)outputs, (void)tol, (void)params, (void)params_size;
  GTEST_SKIP() << "Tessel was built without CUDA";
#endif
}

std::vector<float> Bf16Representable(int64_t n, uint64_t seed, double lo, double hi) {
  std::vector<float> v = RandomValues<float>(n, seed, lo, hi);
  for (float& x : v) x = RoundToBf16(x);
  return v;
}

Tensor Bf16Tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t = Tensor::Empty(DType::kBF16, std::move(shape)).value();
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (size_t i = 0; i < values.size(); ++i) t.data<Bf16>()[i] = ToBf16(values[i]);
  return t;
}

std::vector<float> Widen(const Tensor& bf16) {
  std::vector<float> out(static_cast<size_t>(bf16.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = ToFloat(bf16.data<Bf16>()[i]);
  return out;
}

std::vector<float> Rounded(const std::vector<float>& values) {
  std::vector<float> out(values);
  for (float& x : out) x = RoundToBf16(x);
  return out;
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", expected " << want[i];
    }
  }
}

}  // namespace tessel::kernel_test
