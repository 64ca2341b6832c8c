#include "llm_test_util.h"

#include <algorithm>

#include "core/allocator.h"

#if TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel::kernel_test {

const workers::KernelRegistry& LlmRegistry() {
  static const workers::KernelRegistry registry = [] {
    workers::KernelRegistry r(Logger("test", LogLevel::kWarn));
    const std::string path = std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_llm.so";
    const Status st = r.LoadPlugin(path);
    if (!st.ok()) ADD_FAILURE() << "cannot load " << path << ": " << st.ToString();
    return r;
  }();
  return registry;
}

Status TryCallLlm(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                  ThreadPool* pool, const void* params, size_t params_size) {
  TESSEL_ASSIGN_OR_RETURN(const workers::Kernel* kernel, LlmRegistry().Find(op, Device::kCpu));
  return kernel->Call(inputs, outputs, workers::CallOptions{pool, nullptr, 0, nullptr}, params, params_size);
}

void CallLlm(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
             ThreadPool* pool, const void* params, size_t params_size) {
  const Status st = TryCallLlm(op, inputs, outputs, pool, params, params_size);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

std::vector<int32_t> RandomTokens(int64_t n, int32_t v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(v));
  return out;
}

void RequireLlmCudaKernels(const std::vector<std::string>& ops) {
#if !TESSEL_HAVE_CUDA
  (void)ops;
  GTEST_SKIP() << "Tessel was built without CUDA: there are no CUDA kernels to compare";
#else
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device is visible: the cross-device comparison needs a GPU";
  const Status st = LlmRegistry().RequireOps(ops, Device::kCuda);
  ASSERT_TRUE(st.ok()) << "libtessel_llm.so was built with CUDA but lacks CUDA kernels: " << st.ToString();
#endif
}

namespace {

[[maybe_unused]] Tensor Clone(const Tensor& t) {
  Tensor copy = Tensor::Empty(t.dtype(), t.shape()).value();
  if (t.nbytes() > 0) std::memcpy(copy.raw(), t.raw(), t.nbytes());
  return copy;
}

[[maybe_unused]] void ExpectSame(const Tensor& cpu, const Tensor& cuda, double tol, const std::string& what) {
  ASSERT_EQ(cpu.dtype(), cuda.dtype()) << what;
  switch (cpu.dtype()) {
    case DType::kF32:
      ExpectNear(ToVector<float>(cuda), ToVector<float>(cpu), tol, what);
      break;
    case DType::kF64:
      ExpectNear(ToVector<double>(cuda), ToVector<double>(cpu), tol, what);
      break;
    case DType::kI32:
      EXPECT_EQ(ToVector<int32_t>(cuda), ToVector<int32_t>(cpu)) << what;
      break;
    default:
      ADD_FAILURE() << what << ": the llm ops take only f32, f64 and i32 tensors";
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

void CompareLlmDevices(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                       double tol, const void* params, size_t params_size) {
#if TESSEL_HAVE_CUDA
  std::vector<Tensor> cpu_in, cpu_out, dev_in, dev_out;
  DeviceTensors device;
  for (const Tensor& t : inputs) {
    cpu_in.push_back(Clone(t));
    dev_in.push_back(device.Upload(t));
  }
  for (const Tensor& t : outputs) {
    cpu_out.push_back(Clone(t));
    dev_out.push_back(device.Upload(t));
  }
  auto pointers = [](std::vector<Tensor>& v) {
    std::vector<Tensor*> out;
    for (Tensor& t : v) out.push_back(&t);
    return out;
  };
  std::vector<Tensor*> ci = pointers(cpu_in), co = pointers(cpu_out), di = pointers(dev_in), dout = pointers(dev_out);
  ThreadPool pool(2);
  CallLlm(op, std::vector<const Tensor*>(ci.begin(), ci.end()), co, &pool, params, params_size);
  const workers::Kernel* cuda = LlmRegistry().Find(op, Device::kCuda).value();
  const Status st = cuda->Call(std::vector<const Tensor*>(di.begin(), di.end()), dout,
                               workers::CallOptions{&pool, nullptr, 0, nullptr}, params, params_size);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << op;
  for (size_t i = 0; i < outputs.size(); ++i) {
    ExpectSame(cpu_out[i], DeviceTensors::Download(dev_out[i]), tol, op + " output " + std::to_string(i));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    ExpectSame(cpu_in[i], DeviceTensors::Download(dev_in[i]), tol, op + " input " + std::to_string(i));
  }
#else
  (void)op, (void)inputs, (void)outputs, (void)tol, (void)params, (void)params_size;
  GTEST_SKIP() << "Tessel was built without CUDA";
#endif
}

}  // namespace tessel::kernel_test
