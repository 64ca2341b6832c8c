// KernelTimer: which steps are sampled, what a sampled step's calls add up to (through Kernel::Call, as a
// worker's executors call kernels), and that failed calls and unsampled steps add nothing.
#include "workers/plugin_host/kernel_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/allocator.h"
#include "core/cuda_device.h"
#include "test_dirs.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {
namespace {

TEST(KernelTimer, SamplesStepOneAndEveryNthAfter) {
  KernelTimer every3(3);
  std::vector<int64_t> sampled;
  for (int64_t step = 1; step <= 10; ++step) {
    every3.BeginStep(step);
    if (every3.active()) sampled.push_back(step);
    ASSERT_TRUE(every3.EndStep().ok());
  }
  EXPECT_EQ(sampled, (std::vector<int64_t>{1, 4, 7, 10}));
  KernelTimer never(0);
  for (int64_t step = 1; step <= 5; ++step) {
    never.BeginStep(step);
    EXPECT_FALSE(never.active());
  }
}

TEST(KernelTimer, SumsASampledStepsCpuCallsByOp) {
  KernelTimer timer(2);
  auto sleep_ms = [](int ms) {
    return [ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return Status();
    };
  };
  timer.BeginStep(1);
  ASSERT_TRUE(timer.Time("a.fwd", Device::kCpu, nullptr, sleep_ms(3)).ok());
  ASSERT_TRUE(timer.Time("a.fwd", Device::kCpu, nullptr, sleep_ms(3)).ok());
  ASSERT_TRUE(timer.Time("b.fwd", Device::kCpu, nullptr, sleep_ms(1)).ok());
  const Status failed = timer.Time("b.fwd", Device::kCpu, nullptr, [] { return InternalError("no"); });
  EXPECT_EQ(failed.code(), Code::kInternal) << "the call's own status comes back";
  auto sums = timer.EndStep();
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_EQ(sums->size(), 2u);
  EXPECT_EQ((*sums)[0].op, "a.fwd");
  EXPECT_EQ((*sums)[0].device, Device::kCpu);
  EXPECT_EQ((*sums)[0].calls, 2);
  EXPECT_GE((*sums)[0].seconds, 0.006);
  EXPECT_LT((*sums)[0].seconds, 1.0);
  EXPECT_EQ((*sums)[1].op, "b.fwd");
  EXPECT_EQ((*sums)[1].calls, 1) << "a failed call is not counted";
  EXPECT_GE((*sums)[1].seconds, 0.001);

  // Step 2 is not sampled: the calls run, nothing is added.
  timer.BeginStep(2);
  int ran = 0;
  ASSERT_TRUE(timer
                  .Time("a.fwd", Device::kCpu, nullptr,
                        [&] {
                          ++ran;
                          return Status();
                        })
                  .ok());
  EXPECT_EQ(ran, 1);
  auto none = timer.EndStep();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(KernelTimer, TimesPluginKernelsThroughTheirCallOptions) {
  KernelRegistry registry(Logger("test", LogLevel::kError));
  ASSERT_TRUE(registry.LoadPlugin(testing::TestPlugin("throwing")).ok());
  const Kernel* copy = registry.Find("test.workspace.fwd", Device::kCpu).value();
  const Kernel* throws = registry.Find("test.throw.fwd", Device::kCpu).value();
  std::vector<double> x(1000, 1.0), y(1000);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {1000}), ty = Tensor::Borrow(y.data(), DType::kF64, {1000});
  KernelTimer timer(1);
  CallOptions options;
  options.timer = &timer;
  timer.BeginStep(1);
  ASSERT_TRUE(copy->Call({&tx}, {&ty}, options).ok());
  ASSERT_TRUE(copy->Call({&tx}, {&ty}, options).ok());
  EXPECT_FALSE(throws->Call({&tx}, {&ty}, options).ok());
  EXPECT_EQ(y[999], 2.0) << "the timed kernel still computed";
  auto sums = timer.EndStep();
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_EQ(sums->size(), 1u);
  EXPECT_EQ((*sums)[0].op, "test.workspace.fwd");
  EXPECT_EQ((*sums)[0].calls, 2);
  EXPECT_GT((*sums)[0].seconds, 0.0);
}

TEST(KernelTimer, CudaCallsAreTimedByEventsOnTheirStream) {
  if (!ProbeCuda().usable()) GTEST_SKIP() << "no usable GPU: " << ProbeCuda().problem;
  ASSERT_TRUE(SelectCudaDevice(0).ok());
  auto stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  std::vector<float> host(1 << 20, 1.0f);
  void* device = nullptr;
  auto alloc = CudaAllocator().Allocate(host.size() * sizeof(float));
  ASSERT_TRUE(alloc.ok()) << alloc.status().message();
  device = *alloc;
  KernelTimer timer(1);
  timer.BeginStep(1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        timer
            .Time("copy", Device::kCuda, stream->get(),
                  [&] { return CopyMemoryAsync(device, host.data(), host.size() * sizeof(float), stream->get()); })
            .ok());
  }
  auto sums = timer.EndStep();
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  ASSERT_EQ(sums->size(), 1u);
  EXPECT_EQ((*sums)[0].device, Device::kCuda);
  EXPECT_EQ((*sums)[0].calls, 3);
  EXPECT_GT((*sums)[0].seconds, 0.0);
  CudaAllocator().Free(device);
}

}  // namespace
}  // namespace tessel::workers
