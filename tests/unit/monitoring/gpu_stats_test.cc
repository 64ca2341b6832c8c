// GpuStats against stand-ins for NVIDIA's NVML library (fake_nvml.cc): the readings, and the clean
// refusals where there is no library, no driver, or an NVML that lacks an entry point. Where a real
// libnvidia-ml.so.1 and a GPU are present, the last test reads the first CUDA device through it.
#include "monitoring/gpu_stats.h"

#include <gtest/gtest.h>

#include "core/cuda_device.h"

namespace tessel::monitoring {
namespace {

std::string Fake(const char* variant) { return std::string(FAKE_NVML_DIR) + "/libfake_nvml_" + variant + ".so"; }

TEST(GpuStats, ReadsTheGpuAtItsBusId) {
  auto nvml = GpuStats::Open(Fake("ok"));
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  auto s = (*nvml)->Read("0000:3b:00.0");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->memory_used_bytes, 3LL << 30);
  EXPECT_EQ(s->memory_total_bytes, 80LL << 30);
  EXPECT_DOUBLE_EQ(s->utilization, 0.37);
}

TEST(GpuStats, AnUnknownBusIdIsNamed) {
  auto nvml = GpuStats::Open(Fake("ok"));
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  auto s = (*nvml)->Read("0000:af:00.0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("0000:af:00.0"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("Not Found"), std::string::npos) << s.status().message();
}

TEST(GpuStats, NoLibraryNoDriverOrAnIncompleteOneIsAReasonNotACrash) {
  auto missing = GpuStats::Open(std::string(FAKE_NVML_DIR) + "/libno_such_nvml.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("NVML is not available"), std::string::npos) << missing.status().message();

  auto no_driver = GpuStats::Open(Fake("no_driver"));
  ASSERT_FALSE(no_driver.ok());
  EXPECT_NE(no_driver.status().message().find("Driver Not Loaded"), std::string::npos) << no_driver.status().message();

  auto incomplete = GpuStats::Open(Fake("incomplete"));
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.status().message().find("nvmlDeviceGetUtilizationRates"), std::string::npos)
      << incomplete.status().message();
}

TEST(GpuStats, TheRealDriverWhereThereIsAGpu) {
  if (!ProbeCuda().usable()) GTEST_SKIP() << "no usable GPU: " << ProbeCuda().problem;
  auto bus_id = CudaPciBusId(0);
  ASSERT_TRUE(bus_id.ok()) << bus_id.status().message();
  auto nvml = GpuStats::Open();
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  auto s = (*nvml)->Read(*bus_id);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_GT(s->memory_total_bytes, 0);
  EXPECT_GT(s->memory_used_bytes, 0);
  EXPECT_LE(s->memory_used_bytes, s->memory_total_bytes);
  EXPECT_GE(s->utilization, 0.0);
  EXPECT_LE(s->utilization, 1.0);
}

}  // namespace
}  // namespace tessel::monitoring
