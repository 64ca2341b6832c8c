// The template plugin loads, passes the checks a worker runs, and computes Y = alpha * X.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {
namespace {

const std::string kExamplePath = std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_example.so";

TEST(ExamplePlugin, LoadsAndScales) {
  KernelRegistry registry(Logger("test", LogLevel::kWarn));
  ASSERT_TRUE(registry.LoadPlugin(kExamplePath).ok());
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0].name, "example");
  ASSERT_TRUE(registry.RequireOps({"example.scale.fwd"}, Device::kCpu).ok());
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
