// Every CUDA kernel against its CPU counterpart on fresh random inputs, with a tolerance per dtype
// (float: reordered sums and atomics; double: rounding only). Skipped, with the reason, when Tessel was
// built without CUDA or no GPU is visible.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "core/allocator.h"
#include "rgnn_test_util.h"
#include "workers/plugin_host/op_schemas.h"

#if TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel::rgnn_test {
namespace {

[[maybe_unused]] Tensor Clone(const Tensor& t) {
  Tensor copy = Tensor::Empty(t.dtype(), t.shape(), TestAllocator()).value();
  if (t.nbytes() > 0) std::memcpy(copy.raw(), t.raw(), t.nbytes());
  return copy;
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
    Tensor host = Tensor::Empty(device.dtype(), device.shape(), TestAllocator()).value();
    EXPECT_EQ(cudaMemcpy(host.raw(), device.raw(), device.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  std::vector<void*> owned_;
};
#endif

[[maybe_unused]] void ExpectSame(const Tensor& cpu, const Tensor& cuda, double tol, const std::string& what) {
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
  }
}

// Runs `op` on CPU and on CUDA from the same inputs and output buffers, then compares every output and
// every input (inputs must come back unchanged, except those optim.adam.step updates in place).
void CompareDevices(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    double tol) {
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
  CallCpu(op, std::vector<const Tensor*>(ci.begin(), ci.end()), co, &pool);
  const workers::Kernel* cuda = RgnnRegistry().Find(op, Device::kCuda).value();
  const Status st = cuda->Call(std::vector<const Tensor*>(di.begin(), di.end()), dout, &pool);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << op;
  for (size_t i = 0; i < outputs.size(); ++i) {
    ExpectSame(cpu_out[i], DeviceTensors::Download(dev_out[i]), tol, op + " output " + std::to_string(i));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    ExpectSame(cpu_in[i], DeviceTensors::Download(dev_in[i]), tol, op + " input " + std::to_string(i));
  }
#else
  (void)op, (void)inputs, (void)outputs, (void)tol;
#endif
}

template <typename T>
class CrossDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if !TESSEL_HAVE_CUDA
    GTEST_SKIP() << "Tessel was built without CUDA: there are no CUDA kernels to compare";
#else
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device is visible: the cross-device comparison needs a GPU";
    ASSERT_TRUE(RgnnRegistry().RequireOps(workers::RgcnOps(), Device::kCuda).ok())
        << "libtessel_rgnn.so was built with CUDA but lacks CUDA kernels";
#endif
  }
  // float sums of ~100 terms in a different order (and atomics); double differs only by rounding.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }

  const Graph graph_ = RandomGraph(
      {.num_src_rows = 300, .num_dst = 200, .num_relations = 9, .num_edges = 3000, .distinct_sources = 250}, 77);
  const int64_t k_ = 24, d_ = 16;
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CrossDeviceTest, FloatTypes);

TYPED_TEST(CrossDeviceTest, TypedLinear) {
  using T = TypeParam;
  const Graph& g = this->graph_;
  const int64_t k = this->k_, d = this->d_;
  GraphTensors gt = ToTensors<T>(g);
  Tensor x = MakeTensor<T>({g.m, k}, RandomValues<T>(g.m * k, 1)),
         w = MakeTensor<T>({g.r, k, d}, RandomValues<T>(g.r * k * d, 2));
  Tensor dy = MakeTensor<T>({g.num_uniq(), d}, RandomValues<T>(g.num_uniq() * d, 3));
  CompareDevices("rgnn.typed_linear.fwd", {x, w, gt.uniq_ptr, gt.uniq_src}, {Filled<T>({g.num_uniq(), d}, T(3))},
                 this->Tol());
  CompareDevices("rgnn.typed_linear.bwd", {dy, x, w, gt.uniq_ptr, gt.uniq_src},
                 {Filled<T>({g.m, k}, T(3)), Filled<T>({g.r, k, d}, T(3))}, this->Tol());
  CompareDevices("rgnn.typed_linear.bwd", {dy, x, w, gt.uniq_ptr, gt.uniq_src},
                 {Filled<T>({0, k}, T(0)), Filled<T>({g.r, k, d}, T(3))}, this->Tol());
}

TYPED_TEST(CrossDeviceTest, TypedEmbed) {
  using T = TypeParam;
  const Graph& g = this->graph_;
  const int64_t v = g.m + 5, d = this->d_;
  std::vector<int64_t> row_id(static_cast<size_t>(g.m));
  std::iota(row_id.begin(), row_id.end(), 5);
  GraphTensors gt = ToTensors<T>(g);
  Tensor rows = MakeTensor<int64_t>({g.m}, row_id);
  CompareDevices("rgnn.typed_embed.fwd",
                 {MakeTensor<T>({g.r, v, d}, RandomValues<T>(g.r * v * d, 1)), gt.uniq_ptr, gt.uniq_src, rows},
                 {Filled<T>({g.num_uniq(), d}, T(3))}, this->Tol());
  CompareDevices(
      "rgnn.typed_embed.bwd",
      {MakeTensor<T>({g.num_uniq(), d}, RandomValues<T>(g.num_uniq() * d, 2)), gt.uniq_ptr, gt.uniq_src, rows},
      {Filled<T>({g.r, v, d}, T(3))}, this->Tol());
}

TYPED_TEST(CrossDeviceTest, Aggregate) {
  using T = TypeParam;
  const Graph& g = this->graph_;
  const int64_t d = this->d_;
  GraphTensors gt = ToTensors<T>(g);
  CompareDevices("rgnn.aggregate.fwd",
                 {MakeTensor<T>({g.num_uniq(), d}, RandomValues<T>(g.num_uniq() * d, 1)), gt.edge_uniq, gt.norm,
                  gt.dst_ptr, gt.dst_edges},
                 {Filled<T>({g.n, d}, T(3))}, this->Tol());
  CompareDevices("rgnn.aggregate.bwd",
                 {MakeTensor<T>({g.n, d}, RandomValues<T>(g.n * d, 2)), gt.dst, gt.norm, gt.uniq_edge_ptr},
                 {Filled<T>({g.num_uniq(), d}, T(3))}, this->Tol());
}

TYPED_TEST(CrossDeviceTest, Relu) {
  using T = TypeParam;
  const int64_t n = 500, d = 33;
  Tensor x = MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1));
  CompareDevices("nn.relu.fwd", {x}, {Filled<T>({n, d}, T(3))}, this->Tol());
  CompareDevices("nn.relu.bwd", {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 2)), x}, {Filled<T>({n, d}, T(3))},
                 this->Tol());
}

TYPED_TEST(CrossDeviceTest, SoftmaxXent) {
  using T = TypeParam;
  const int64_t n = 3000, c = 5;
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = (i * 7) % (c + 1) - 1;
    mask[i] = i % 3 != 0;
  }
  CompareDevices("nn.softmax_xent.fwd_bwd",
                 {MakeTensor<T>({n, c}, RandomValues<T>(n * c, 1, -4, 4)), MakeTensor<int64_t>({n}, labels),
                  MakeTensor<uint8_t>({n}, mask), MakeTensor<double>({1}, {0.01})},
                 {Filled<double>({1}, -1.0), Filled<int64_t>({1}, -1), Filled<T>({n, c}, T(3))}, this->Tol());
}

TYPED_TEST(CrossDeviceTest, Adam) {
  using T = TypeParam;
  const int64_t p = 10000;
  CompareDevices(
      "optim.adam.step",
      {MakeTensor<T>({p}, RandomValues<T>(p, 1)), MakeTensor<T>({p}, RandomValues<T>(p, 2)),
       MakeTensor<T>({p}, RandomValues<T>(p, 3, -0.1, 0.1)), MakeTensor<T>({p}, RandomValues<T>(p, 4, 0, 0.1)),
       MakeTensor<double>({7}, {0.01, 0.9, 0.999, 1e-8, 1e-4, 3, 0})},
      {}, this->Tol());
}

}  // namespace
}  // namespace tessel::rgnn_test
