// The keys a model declares for itself (core/model_keys.h) as the job schema takes them: two keys of a
// model "toy" registered by this file alone, before main, as a model's file registers them. They parse,
// take `--set`, are range-checked, default from their row, reach the record the workers read, travel
// through job.toml and the resume check, and are refused for another model; a key registered twice, or
// after the schema was read, stops the process.
#include "core/model_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

using ::testing::HasSubstr;

constexpr std::array<std::string_view, 2> kToyNorms = {"sum", "mean"};
constexpr ModelKey kToyDepth = ModelKey::Integer("model.toy_depth", 3, 1, 8, "toy: a depth.");
constexpr ModelKey kToyNorm = ModelKey::String("model.toy_norm", "sum", kToyNorms, "toy: a normalisation.");
constexpr std::array<const ModelKey*, 2> kToyKeys = {&kToyDepth, &kToyNorm};
[[maybe_unused]] const bool kRegistered = (RegisterModelKeys("toy", kToyKeys), true);

std::string Job(const std::string& model) {
  return "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n[model]\nname = \"" +
         model + "\"\n";
}

TEST(ModelKeys, AreRowsOfTheSchemaWithTheirDefaults) {
  std::map<std::string, FieldInfo> rows;
  for (const FieldInfo& f : DescribeFields()) rows[f.key] = f;
  ASSERT_TRUE(rows.contains("model.toy_depth"));
  EXPECT_EQ(rows.at("model.toy_depth").type, "integer");
  EXPECT_EQ(rows.at("model.toy_depth").default_value, "3");
  EXPECT_EQ(rows.at("model.toy_depth").allowed, "1 .. 8");
  EXPECT_EQ(rows.at("model.toy_norm").allowed, "\"sum\", \"mean\"");
  EXPECT_EQ(rows.at("model.toy_norm").doc, "toy: a normalisation.");
}

TEST(ModelKeys, ReachTheRecordTheWorkersRead) {
  Result<JobSpec> spec = ParseJob(Job("toy") + "toy_depth = 5\n", "t.toml", {"model.toy_norm=mean"});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const Record options = ModelOptionsOf(*spec);
  EXPECT_EQ(kToyDepth.Of<int32_t>(options), 5);
  EXPECT_EQ(kToyNorm.Of<std::string>(options), "mean");
  // Left out: the default, in the record too.
  Result<JobSpec> plain = ParseJob(Job("toy"), "t.toml", {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(FindNumber(ModelOptionsOf(*plain), "model.toy_depth"), 3);
  EXPECT_EQ(kToyDepth.Of<int32_t>(Record{}), 3) << "a record without the key gives the default";
  // Another model's job carries none of them.
  Result<JobSpec> rgcn = ParseJob(Job("rgcn"), "t.toml", {});
  ASSERT_TRUE(rgcn.ok());
  EXPECT_EQ(Find(ModelOptionsOf(*rgcn), "model.toy_depth"), nullptr);
}

TEST(ModelKeys, AreCheckedAsAnyKey) {
  Result<JobSpec> high = ParseJob(Job("toy") + "toy_depth = 9\n", "t.toml", {});
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().code(), Code::kUsage);
  EXPECT_THAT(high.status().message(), HasSubstr("t.toml:9:1: model.toy_depth: must be 1 .. 8, got 9"));
  Result<JobSpec> typed = ParseJob(Job("toy") + "toy_depth = \"deep\"\n", "t.toml", {});
  ASSERT_FALSE(typed.ok());
  EXPECT_THAT(typed.status().message(), HasSubstr("model.toy_depth"));
  Result<JobSpec> choice = ParseJob(Job("toy"), "t.toml", {"model.toy_norm=max"});
  ASSERT_FALSE(choice.ok());
  EXPECT_THAT(choice.status().message(), HasSubstr("model.toy_norm"));
  Result<JobSpec> typo = ParseJob(Job("toy") + "toy_dept = 2\n", "t.toml", {});
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("did you mean 'model.toy_depth'"));
}

TEST(ModelKeys, AreRefusedForAnotherModelUnlessAtTheirDefault) {
  Result<JobSpec> other = ParseJob(Job("rgcn") + "toy_depth = 2\n", "t.toml", {});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "t.toml:9:1: model.toy_depth = 2 is a key of model.name = \"toy\", and this job trains \"rgcn\"; leave it "
            "out or set it to its default, 3");
  EXPECT_TRUE(ParseJob(Job("rgcn") + "toy_depth = 3\n", "t.toml", {}).ok());
}

TEST(ModelKeys, TravelThroughJobTomlAndTheResumeCheck) {
  Result<JobSpec> spec = ParseJob(Job("toy") + "toy_depth = 6\n", "t.toml", {});
  ASSERT_TRUE(spec.ok());
  const std::string toml = FormatJobToml(*spec);
  EXPECT_THAT(toml, HasSubstr("\ntoy_depth = 6\n"));
  EXPECT_THAT(toml, HasSubstr("\ntoy_norm = \"sum\"\n"));
  Result<JobSpec> again = ParseJob(toml, "job.toml", {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ModelOptionsOf(*again), ModelOptionsOf(*spec));
  const auto settings = TrajectorySettings(*spec);
  const std::map<std::string, std::string> by_key(settings.begin(), settings.end());
  EXPECT_EQ(by_key.at("model.toy_depth"), "6") << "a resume with another value would train another model";
}

TEST(ModelKeysDeathTest, ATakenKeyOrALateOneIsAProgrammingError) {
  constexpr ModelKey again = ModelKey::Integer("model.toy_depth", 1, {}, {}, "again.");
  const std::array<const ModelKey*, 1> keys = {&again};
  EXPECT_DEATH(RegisterModelKeys("other", keys), "registering key 'model.toy_depth': model \"toy\" has it");
  constexpr ModelKey late = ModelKey::Boolean("model.toy_late", true, "late.");
  const std::array<const ModelKey*, 1> late_keys = {&late};
  (void)DescribeFields();  // the schema has been read
  EXPECT_DEATH(RegisterModelKeys("toy", late_keys), "the job schema has been read already");
  constexpr ModelKey outside = ModelKey::Boolean("train.toy", true, "outside.");
  const std::array<const ModelKey*, 1> outside_keys = {&outside};
  EXPECT_DEATH(RegisterModelKeys("toy", outside_keys), "a key of the \\[model\\] section");
}

}  // namespace
}  // namespace tessel::jobs
