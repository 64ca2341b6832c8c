// The coordinator's checkpoint bookkeeping (orchestrator/checkpoints.*): manifests, `latest`, pruning to
// checkpoint.keep, and the choice of the checkpoint to resume when some are damaged.
#include "orchestrator/checkpoints.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tessel::orchestrator {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(TESSEL_BINARY_DIR) / "test-scratch" /
            (std::string("Checkpoints.") + info->name() + "-" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `workers` shard files of step `step` (contents differ per step and worker) and commits them
  // as `owner`'s.
  Status Write(int64_t step, int32_t workers, int32_t keep) { return WriteAs(owner_, step, workers, keep); }
  Status WriteAs(const CheckpointOwner& owner, int64_t step, int32_t workers, int32_t keep) {
    const std::string step_dir = storage::CheckpointStepDir(dir_, step);
    fs::create_directories(step_dir);
    std::vector<storage::FileDigest> digests;
    for (int32_t w = 0; w < workers; ++w) {
      const std::string path = storage::CheckpointShardPath(step_dir, w);
      std::ofstream(path) << "shard of step " << step << " worker " << w;
      digests.push_back(storage::DigestFile(path).value());
    }
    return CommitCheckpoint(dir_, owner, step, digests, keep, log_);
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

  Result<ResumePoint> Find(int32_t workers, const CheckpointOwner& owner,
                           SettingsCheck check = SettingsCheck::kRefuseMismatch) {
    return FindResumePoint(dir_, owner, workers, check, log_);
  }
  Result<ResumePoint> Find(int32_t workers) { return Find(workers, owner_); }
  // Every path under dir_, for checking that something changed nothing.
  std::vector<std::string> Tree() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
  Logger log_{"test", LogLevel::kError};
  CheckpointOwner owner_{"job", {{"model.heads", "4"}, {"train.batch_size", "8"}}};
};

TEST_F(CheckpointsTest, CommitWritesTheManifestAndLatestAndKeepsTheNewest) {
  for (int64_t step : {2, 4, 6, 8}) ASSERT_TRUE(Write(step, 2, 2).ok());
  EXPECT_EQ(Latest(), "step-8");
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-6", "step-8"}));
  EXPECT_TRUE(fs::exists(dir_ + "/step-8/manifest.json"));
  auto point = Find(2);
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
  auto point = Find(2);
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(point->step, 3);
  // Same size, other bytes: the CRC catches it.
  ASSERT_TRUE(Write(9, 2, 3).ok());
  const std::string shard = storage::CheckpointShardPath(dir_ + "/step-9", 0);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.write("S", 1);
  }
  point = Find(2);
  ASSERT_TRUE(point.ok());
  EXPECT_EQ(point->step, 3);
}

TEST_F(CheckpointsTest, AMissingManifestOrDamagedLatestIsSkipped) {
  ASSERT_TRUE(Write(5, 1, 3).ok());
  ASSERT_TRUE(Write(10, 1, 3).ok());
  fs::remove(dir_ + "/step-10/manifest.json");
  auto point = Find(1);
  ASSERT_TRUE(point.ok());
  EXPECT_EQ(point->step, 5);
  std::ofstream(dir_ + "/latest") << "garbage";
  point = Find(1);
  ASSERT_TRUE(point.ok());
  EXPECT_EQ(point->step, 5);
}

TEST_F(CheckpointsTest, AnotherWorkerCountOrNoCheckpointIsAUsageError) {
  auto none = Find(2);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kUsage);
  EXPECT_THAT(none.status().message(), HasSubstr(dir_));
  ASSERT_TRUE(Write(4, 2, 2).ok());
  auto other = Find(3);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kUsage);
  EXPECT_THAT(other.status().message(), HasSubstr("written by 2 workers; this run has 3"));
  // Every candidate damaged: the error lists why.
  std::ofstream(storage::CheckpointShardPath(dir_ + "/step-4", 0), std::ios::app) << "x";
  auto damaged = Find(2);
  ASSERT_FALSE(damaged.ok());
  EXPECT_THAT(damaged.status().message(), HasSubstr("step-4"));
  EXPECT_THAT(damaged.status().message(), HasSubstr("bytes"));
}

// Issue 32 row 4: alpha's pruning removed beta's checkpoints, and beta's resume took alpha's step 20
// (a directory shared before claims existed, or written behind ClaimCheckpointDir's back).
TEST_F(CheckpointsTest, PruningAndResumeTouchOnlyTheirOwnJobsCheckpoints) {
  const CheckpointOwner alpha{"alpha", owner_.settings}, beta{"beta", owner_.settings};
  ASSERT_TRUE(WriteAs(beta, 12, 1, 1).ok());
  for (int64_t step : {5, 10, 15, 20}) ASSERT_TRUE(WriteAs(alpha, step, 1, 1).ok());
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-12", "step-20"}));
  EXPECT_EQ(Latest(), "step-20");
  auto point = Find(1, beta);
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(point->step, 12);
  // And beta's later checkpoints prune beta's, never alpha's.
  ASSERT_TRUE(WriteAs(beta, 18, 1, 1).ok());
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-18", "step-20"}));
}

TEST_F(CheckpointsTest, ADirectoryBelongsToTheFirstJobThatClaimsIt) {
  std::string claimed;
  ASSERT_TRUE(ClaimCheckpointDir(dir_, "alpha", &claimed, log_).ok());
  EXPECT_EQ(claimed, dir_ + "/job");
  ASSERT_TRUE(ClaimCheckpointDir(dir_, "alpha", &claimed, log_).ok());
  EXPECT_EQ(claimed, "");  // already alpha's
  const Status other = ClaimCheckpointDir(dir_, "beta", &claimed, log_);
  EXPECT_EQ(other.code(), Code::kUsage) << other.ToString();
  EXPECT_THAT(other.message(), HasSubstr("job 'alpha'"));
  // A directory from before claims: its manifests say whose it is.
  const std::string old = dir_ + "/old";
  fs::create_directories(old + "/step-3");
  std::ofstream(old + "/step-3/manifest.json") << R"({"format": "tessel-checkpoint", "job": "alpha", "step": 3})";
  EXPECT_EQ(ClaimCheckpointDir(old, "beta", &claimed, log_).code(), Code::kUsage);
  EXPECT_FALSE(fs::exists(old + "/job"));
}

TEST_F(CheckpointsTest, APlantedClaimLinkIsAStorageError) {
  const std::string victim = dir_ + "-victim";
  std::ofstream(victim) << "alpha\n";
  fs::create_symlink(victim, dir_ + "/job");
  std::string claimed;
  const Status st = ClaimCheckpointDir(dir_, "alpha", &claimed, log_);
  EXPECT_EQ(st.exit_code(), 6) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(dir_ + "/job"));
  fs::remove(victim);
}

// Issue 32 row 6: a resume with other settings trained on with changed losses, then pruned the originals.
TEST_F(CheckpointsTest, AResumeWithOtherSettingsIsRefusedNamingTheKeyUnlessForced) {
  ASSERT_TRUE(Write(4, 1, 2).ok());
  CheckpointOwner other = owner_;
  other.settings[1].second = "16";
  const std::vector<std::string> before = Tree();
  auto refused = Find(1, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().exit_code(), 2);
  EXPECT_THAT(refused.status().message(), HasSubstr("train.batch_size = 8, this job has train.batch_size = 16"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--resume-force"));
  EXPECT_EQ(Tree(), before);
  auto forced = Find(1, other, SettingsCheck::kWarnOnMismatch);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(forced->step, 4);
}

TEST_F(CheckpointsTest, ACheckpointWithoutRecordedSettingsIsResumedWithAWarning) {
  ASSERT_TRUE(Write(4, 1, 2).ok());
  const std::string manifest = dir_ + "/step-4/manifest.json";
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t at = text.find("\"settings\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"settings_old\"");  // as a manifest written before settings were recorded
  std::ofstream(manifest) << text;
  auto point = Find(1, CheckpointOwner{"job", {{"train.batch_size", "16"}}});
  ASSERT_TRUE(point.ok()) << point.status().ToString();
}

// Issue 32 row 13: step-K.refused directories were never pruned.
TEST_F(CheckpointsTest, SetAsideCheckpointsArePrunedOnceSuperseded) {
  for (int64_t step : {2, 4, 6}) ASSERT_TRUE(Write(step, 1, 3).ok());
  std::ofstream(dir_ + "/step-6/worker-0.h5.tmp-77") << "half a shard";
  SetAsideNewerCheckpoints(dir_, "job", 2, log_);
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-2", "step-4.refused", "step-6.refused"}));
  ASSERT_TRUE(Write(4, 1, 3).ok());
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-2", "step-4", "step-6.refused"}));
  ASSERT_TRUE(Write(6, 1, 3).ok());
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-2", "step-4", "step-6"}));
}

TEST_F(CheckpointsTest, AnOldCheckpointHoldingAFileTesselDidNotWriteIsKept) {
  ASSERT_TRUE(Write(2, 1, 1).ok());
  std::ofstream(dir_ + "/step-2/notes.txt") << "why step 2 matters";
  ASSERT_TRUE(Write(4, 1, 1).ok());
  EXPECT_EQ(Steps(), (std::vector<std::string>{"step-2", "step-4"}));
  EXPECT_TRUE(fs::exists(dir_ + "/step-2/notes.txt"));
}

TEST_F(CheckpointsTest, ALinkAtTheStepDirectoryOrLatestIsAStorageError) {
  const std::string elsewhere = dir_ + "-elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(elsewhere, dir_ + "/step-3");
  Status st = CommitCheckpoint(dir_, owner_, 3, {}, 1, log_);
  EXPECT_EQ(st.exit_code(), 6) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(dir_ + "/step-3"));
  EXPECT_TRUE(fs::is_empty(elsewhere));
  fs::remove_all(elsewhere);
}

}  // namespace
}  // namespace tessel::orchestrator
