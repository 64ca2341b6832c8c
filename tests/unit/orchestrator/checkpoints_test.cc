// The coordinator's checkpoint bookkeeping (orchestrator/checkpoints.*): manifests, `latest`, pruning to
// checkpoint.keep, and the choice of the checkpoint to resume when some are damaged.
#include "orchestrator/checkpoints.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace tessel::orchestrator {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(TESSEL_BINARY_DIR) / "test-scratch" / (std::string("Checkpoints.") + info->name() + "-" +
                                                             std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `workers` shard files of step `step` (contents differ per step and worker) and commits them.
  Status Write(int64_t step, int32_t workers, int32_t keep) {
    const std::string step_dir = storage::CheckpointStepDir(dir_, step);
    fs::create_directories(step_dir);
    std::vector<storage::FileDigest> digests;
    for (int32_t w = 0; w < workers; ++w) {
      const std::string path = storage::CheckpointShardPath(step_dir, w);
      std::ofstream(path) << "shard of step " << step << " worker " << w;
      digests.push_back(storage::DigestFile(path).value());
    }
    return CommitCheckpoint(dir_, "job", step, digests, keep, log_);
  }
  std::vector<std::string> Steps() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.is_directory()) out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string Latest() const {
    std::ifstream in(dir_ + "/latest");
    std::string s;
    std::getline(in, s);
    return s;
  }

  std::string dir_;
  Logger log_{"test", LogLevel::kError};
};

TEST_F(CheckpointsTest, CommitWritesTheManifestAndLatestAndKeepsTheNewest) {
  for (int64_t step : {2, 4, 6, 8}) ASSERT_TRUE(Write(step, 2, 2).ok());
  EXPECT_EQ(Latest(), "step-8");
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-6", "step-8"}));
  EXPECT_TRUE(fs::exists(dir_ + "/step-8/manifest.json"));
  auto point = FindResumePoint(dir_, 2, log_);
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(point->step, 8);
  EXPECT_EQ(point->step_dir, dir_ + "/step-8");
}

TEST_F(CheckpointsTest, AnIncompleteNewerCheckpointIsPrunedOnlyOnceOlder) {
  ASSERT_TRUE(Write(2, 1, 1).ok());
  fs::create_directories(dir_ + "/step-3");  // shards of a step whose manifest never came
  ASSERT_TRUE(Write(4, 1, 1).ok());
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-4"}));
}

TEST_F(CheckpointsTest, ADamagedShardFallsBackToTheNewestGoodCheckpoint) {
  for (int64_t step : {3, 6}) ASSERT_TRUE(Write(step, 2, 3).ok());
  std::ofstream(storage::CheckpointShardPath(dir_ + "/step-6", 1), std::ios::app) << "x";
  auto point = FindResumePoint(dir_, 2, log_);
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(point->step, 3);
  // Same size, other bytes: the CRC catches it.
  ASSERT_TRUE(Write(9, 2, 3).ok());
  const std::string shard = storage::CheckpointShardPath(dir_ + "/step-9", 0);
  { std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary); f.seekp(0); f.write("S", 1); }
  point = FindResumePoint(dir_, 2, log_);
  ASSERT_TRUE(point.ok());
  EXPECT_EQ(point->step, 3);
}

TEST_F(CheckpointsTest, AMissingManifestOrDamagedLatestIsSkipped) {
  ASSERT_TRUE(Write(5, 1, 3).ok());
  ASSERT_TRUE(Write(10, 1, 3).ok());
  fs::remove(dir_ + "/step-10/manifest.json");
  auto point = FindResumePoint(dir_, 1, log_);
  ASSERT_TRUE(point.ok());
  EXPECT_EQ(point->step, 5);
  std::ofstream(dir_ + "/latest") << "garbage";
  point = FindResumePoint(dir_, 1, log_);
  ASSERT_TRUE(point.ok());
  EXPECT_EQ(point->step, 5);
}

TEST_F(CheckpointsTest, AnotherWorkerCountOrNoCheckpointIsAUsageError) {
  auto none = FindResumePoint(dir_, 2, log_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kUsage);
  EXPECT_THAT(none.status().message(), HasSubstr(dir_));
  ASSERT_TRUE(Write(4, 2, 2).ok());
  auto other = FindResumePoint(dir_, 3, log_);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kUsage);
  EXPECT_THAT(other.status().message(), HasSubstr("written by 2 workers; this run has 3"));
  // Every candidate damaged: the error lists why.
  std::ofstream(storage::CheckpointShardPath(dir_ + "/step-4", 0), std::ios::app) << "x";
  auto damaged = FindResumePoint(dir_, 2, log_);
  ASSERT_FALSE(damaged.ok());
  EXPECT_THAT(damaged.status().message(), HasSubstr("step-4"));
  EXPECT_THAT(damaged.status().message(), HasSubstr("bytes"));
}

}  // namespace
}  // namespace tessel::orchestrator
