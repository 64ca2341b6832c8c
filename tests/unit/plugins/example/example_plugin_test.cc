// The template plugin loads and its kernels compute what they say, with expectations written out here.
// Its conformance run, and that of its broken builds, is in tests/unit/workers/plugin_host/conformance_test.cc.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {
namespace {

const std::string kExamplePath = std::string(TESSEL_BINARY_DIR) + "/example-plugin/libtessel_example.so";

TEST(ExamplePlugin, LoadsAndScales) {
  KernelRegistry registry(Logger("test", LogLevel::kWarn));
  ASSERT_TRUE(registry.LoadPlugin(kExamplePath).ok());
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0].name, "example");
  ASSERT_TRUE(registry.RequireOps({"example.scale.fwd", "nn.relu.fwd", "nn.relu.bwd"}, Device::kCpu).ok());
  const Kernel* scale = registry.Find("example.scale.fwd", Device::kCpu).value();

  std::vector<float> x(100000), y(x.size(), 0.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  double alpha = -2.0;
  Tensor tx = Tensor::Borrow(x.data(), DType::kF32, {static_cast<int64_t>(x.size())});
  Tensor ta = Tensor::Borrow(&alpha, DType::kF64, {1});
  Tensor ty = Tensor::Borrow(y.data(), DType::kF32, {static_cast<int64_t>(y.size())});
  ThreadPool pool(3);
  ASSERT_TRUE(scale->Call({&tx, &ta}, {&ty}, &pool).ok());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], -2.f * x[i]) << i;
}

TEST(ExamplePlugin, ReluForwardAndBackward) {
  KernelRegistry registry(Logger("test", LogLevel::kWarn));
  ASSERT_TRUE(registry.LoadPlugin(kExamplePath).ok());
  std::vector<double> x = {-1.5, 0.0, 2.0, -0.25, 3.0, 1e-300, -7.0}, y(7, 9.0), dy = {1, 2, 3, 4, 5, 6, 7}, dx(7, 9.0);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {7, 1}), ty = Tensor::Borrow(y.data(), DType::kF64, {7, 1});
  Tensor tdy = Tensor::Borrow(dy.data(), DType::kF64, {7, 1}), tdx = Tensor::Borrow(dx.data(), DType::kF64, {7, 1});
  ThreadPool pool(2);
  ASSERT_TRUE(registry.Find("nn.relu.fwd", Device::kCpu).value()->Call({&tx}, {&ty}, &pool).ok());
  EXPECT_EQ(y, (std::vector<double>{0, 0, 2, 0, 3, 1e-300, 0}));
  ASSERT_TRUE(registry.Find("nn.relu.bwd", Device::kCpu).value()->Call({&tdy, &ty}, {&tdx}, &pool).ok());
  EXPECT_EQ(dx, (std::vector<double>{0, 0, 3, 0, 5, 6, 0}));
}

TEST(ExamplePlugin, WrongOutputLengthIsRefusedByTheHost) {
  KernelRegistry registry(Logger("test", LogLevel::kWarn));
  ASSERT_TRUE(registry.LoadPlugin(kExamplePath).ok());
  const Kernel* scale = registry.Find("example.scale.fwd", Device::kCpu).value();
  std::vector<double> x(4), y(3);
  double alpha = 1.0;
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {4}), ta = Tensor::Borrow(&alpha, DType::kF64, {1});
  Tensor ty = Tensor::Borrow(y.data(), DType::kF64, {3});
  const Status st = scale->Call({&tx, &ta}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("'Y'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::workers
