// The settings a checkpoint records (jobs/trajectory.cc TrajectorySettings), derived from the field
// table's marking of each key: what changes the trajectory is in, what only changes the run is out, and
// an input file counts with its size and modification time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::Not;

const char* kLlmJob =
    "version = 1\n[job]\nname = \"g\"\nkind = \"llm\"\n[data]\nformat = \"generated_text\"\n"
    "[model]\nname = \"gpt2\"\nlayers = 2\nhidden = 64\nheads = 2\ncontext = 64\nvocab_size = 256\n"
    "[train]\noptimizer = \"adamw\"\nbatch_size = 8\n[pipeline]\nstages = 1\nmicrobatches = 2\n";

std::map<std::string, std::string> Settings(const std::vector<std::string>& overrides) {
  Result<JobSpec> spec = ParseJob(kLlmJob, "t.toml", overrides);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (!spec.ok()) return {};
  const auto pairs = TrajectorySettings(*spec);
  return {pairs.begin(), pairs.end()};
}

std::vector<std::string> Keys(const std::map<std::string, std::string>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

// Issue 32 row 6: the keys of the reproduction change the settings; the run-only ones do not.
TEST(TrajectorySettings, HoldsWhatChangesTheTrajectoryAndNothingElse) {
  const auto base = Settings({});
  for (const std::string set : {"model.heads=4", "data.synthetic.seed=9", "train.batch_size=16", "job.seed=3",
                                "train.precision=\"bf16\"", "train.lr=0.5", "train.beta2=0.9"}) {
    EXPECT_NE(Settings({set}), base) << set;
  }
  for (const std::string set : {"train.steps=7", "checkpoint.keep=5", "checkpoint.every_steps=2", "metrics.port_base=0",
                                "timeouts.step_seconds=5", "job.output_dir=elsewhere", "job.time_limit_seconds=9",
                                "resources.threads_per_worker=3", "train.val_every=3", "job.name=other"}) {
    EXPECT_EQ(Settings({set}), base) << set;
  }
  EXPECT_THAT(Keys(base), Contains("model.heads"));
  EXPECT_THAT(Keys(base), Not(Contains("train.steps")));
  EXPECT_THAT(RunOnlyKeys(), Contains("checkpoint.dir"));
  EXPECT_THAT(RunOnlyKeys(), Not(Contains("model.hidden")));
}

TEST(TrajectorySettings, AnInputFileCountsWithItsSizeAndModificationTime) {
  const std::string path = (fs::temp_directory_path() / ("tessel-trajectory-" + std::to_string(::getpid()))).string();
  std::ofstream(path) << "some text";
  const std::vector<std::string> text = {"data.format=\"text\"", "data.text=" + path};
  const auto first = Settings(text);
  ASSERT_EQ(first.count("data.text file " + path), 1u);
  EXPECT_THAT(first.at("data.text file " + path), ::testing::StartsWith("9 bytes, modified "));
  std::ofstream(path, std::ios::app) << " and more";
  EXPECT_NE(Settings(text), first);
  fs::remove(path);
}

// jobs/README.md "[checkpoint]" lists the keys a resume does not compare: each by name or by its section.
TEST(TrajectorySettings, TheReadmeNamesEveryKeyLeftOut) {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/jobs/README.md");
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = readme.find("**A resume continues the same training.**");
  ASSERT_NE(at, std::string::npos);
  const std::string note = readme.substr(at, readme.find("\n- ", at) - at);
  for (const std::string& key : RunOnlyKeys()) {
    const std::string section = key.substr(0, key.rfind('.'));
    EXPECT_TRUE(note.find("`" + key + "`") != std::string::npos ||
                note.find("`[" + section + "]`") != std::string::npos)
        << "jobs/README.md's [checkpoint] note does not name " << key << ", which a resume does not compare";
  }
}

}  // namespace
}  // namespace tessel::jobs
