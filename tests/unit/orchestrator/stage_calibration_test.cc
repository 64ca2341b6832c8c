// The stage planner's calibration (orchestrator/planners/stage_calibration.h), with the built-in plugins at
// a small GPT's shape: every cost is measured and the shapes recorded; a CPU job is timed on the CPU with
// no note; a GPU job where this process sees no GPU is timed on the CPU with a note that says so (its
// predictions are the CPU's); where it sees one, on the GPU (skipped without one).
#include "orchestrator/planners/stage_calibration.h"

#include <gtest/gtest.h>

#include "core/cuda_device.h"

namespace tessel::orchestrator {
namespace {

struct Shape {
  jobs::JobSpec spec;
  workers::GptConfig model{};
  workers::LlmTrainSettings train{};
};

Shape SmallGpt(jobs::DeviceChoice device) {
  Shape s;
  s.spec.job.device = device;
  s.spec.resources.threads_per_worker = 1;
  s.spec.plugins.search_dirs = {std::string(TESSEL_BINARY_DIR) + "/plugins"};
  s.model.layers = 2, s.model.width = 64, s.model.heads = 4, s.model.context = 32;
  s.model.vocab = 256, s.model.padded_vocab = 256;
  s.train.microbatch = 2, s.train.seq_len = 32, s.train.microbatches = 1, s.train.data_parallel = 1;
  s.train.precision = Precision::kFp32;
  return s;
}

void ExpectMeasured(const StageCosts& k) {
  EXPECT_GT(k.block_seconds, 0);
  EXPECT_GT(k.block_forward_seconds, 0);
  EXPECT_LT(k.block_forward_seconds, k.block_seconds) << "the forward is part of the block's forward + backward";
  EXPECT_GT(k.head_seconds, 0);
  EXPECT_GT(k.embed_seconds, 0);
  EXPECT_GE(k.calibration_seconds, k.block_seconds);
  EXPECT_EQ(k.tokens, 64);
  EXPECT_EQ(k.width, 64);
  EXPECT_EQ(k.heads, 4);
  EXPECT_EQ(k.vocab, 256);
}

TEST(Calibrate, ACpuJobIsTimedOnTheCpu) {
  Shape s = SmallGpt(jobs::DeviceChoice::kCpu);
  auto costs = Calibrate(s.spec, s.model, s.train);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ExpectMeasured(*costs);
  EXPECT_EQ(costs->device, Device::kCpu);
  EXPECT_EQ(costs->note, "");
  EXPECT_GT(costs->process_bytes, 0) << "a CPU worker's own memory is measured";
}

TEST(Calibrate, AGpuJobWithoutAGpuIsTimedOnTheCpuAndSaysSo) {
  if (ProbeCuda().usable()) GTEST_SKIP() << "this machine has a GPU";
  Shape s = SmallGpt(jobs::DeviceChoice::kCuda);
  auto costs = Calibrate(s.spec, s.model, s.train);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ExpectMeasured(*costs);
  EXPECT_EQ(costs->device, Device::kCpu);
  EXPECT_NE(costs->note.find("sees no usable GPU"), std::string::npos) << costs->note;
  EXPECT_NE(costs->note.find("the CPU's"), std::string::npos) << costs->note;
}

TEST(Calibrate, AGpuJobIsTimedOnTheGpu) {
  if (!ProbeCuda().usable()) GTEST_SKIP() << "no usable GPU: " << ProbeCuda().problem;
  for (jobs::DeviceChoice device : {jobs::DeviceChoice::kCuda, jobs::DeviceChoice::kAuto}) {
    Shape s = SmallGpt(device);
    auto costs = Calibrate(s.spec, s.model, s.train);
    ASSERT_TRUE(costs.ok()) << costs.status().message();
    ExpectMeasured(*costs);
    EXPECT_EQ(costs->device, Device::kCuda);
    EXPECT_EQ(costs->note, "");
    EXPECT_EQ(costs->process_bytes, 0) << "a GPU worker's tensors are not in host memory";
  }
}

}  // namespace
}  // namespace tessel::orchestrator
