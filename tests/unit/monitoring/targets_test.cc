#include "monitoring/targets.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.h"

namespace tessel::monitoring {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TargetsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("tessel_targets_" + std::to_string(::getpid()) + "_" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Parses the file and returns its entries, checking the file_sd shape on the way.
  std::vector<Json> ReadEntries(const std::filesystem::path& path) {
    const std::string text = ReadFile(path);
    auto root = ParseJson(text, path.string());
    EXPECT_TRUE(root.ok()) << root.status().ToString() << "\n" << text;
    if (!root.ok()) return {};
    EXPECT_TRUE(root->is_array()) << text;
    for (const Json& entry : *root) {
      EXPECT_TRUE(entry.is_object());
      EXPECT_EQ(entry.size(), 2u) << "an entry has exactly targets and labels";
      EXPECT_TRUE(entry.at("targets").is_array());
      EXPECT_TRUE(entry.at("labels").is_object());
      for (const auto& [key, label] : entry.at("labels").items()) {
        EXPECT_TRUE(label.is_string()) << "file_sd label values must be strings: " << key;
      }
    }
    return root->get<std::vector<Json>>();
  }

  std::filesystem::path dir_;
};

TEST_F(TargetsFileTest, OneEntryPerRankWithLabels) {
  const auto path = dir_ / "sub" / "targets.json";  // the parent directories are created
  const std::vector<Target> targets{
      {"10.0.0.2", 9102, 2, "worker"}, {"10.0.0.1", 9100, 0, "coordinator"}, {"10.0.0.1", 9101, 1, "worker"}};
  ASSERT_TRUE(WriteTargetsFile(path.string(), "demo-run", targets).ok());

  const std::vector<Json> entries = ReadEntries(path);
  ASSERT_EQ(entries.size(), 3u);
  const std::vector<std::string> hosts{"10.0.0.1:9100", "10.0.0.1:9101", "10.0.0.2:9102"};
  const std::vector<std::string> roles{"coordinator", "worker", "worker"};
  for (size_t i = 0; i < entries.size(); ++i) {  // sorted by rank
    const Json& entry = entries[i];
    ASSERT_EQ(entry.at("targets").size(), 1u);
    EXPECT_EQ(entry.at("targets")[0], hosts[i]);
    const Json& labels = entry.at("labels");
    EXPECT_EQ(labels.size(), 3u);
    EXPECT_EQ(labels.at("job"), "demo-run");
    EXPECT_EQ(labels.at("rank"), std::to_string(i));
    EXPECT_EQ(labels.at("role"), roles[i]);
  }
  // Nothing but the file is left behind.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path())) {
    EXPECT_EQ(entry.path().filename(), "targets.json");
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(TargetsFileTest, SingleEmbeddedRankMatchesExpectedText) {
  auto text = FormatTargets("solo", {{"127.0.0.1", 9100, 0, "embedded"}});
  ASSERT_TRUE(text.ok());
  // Compare structure-insensitively to whitespace: the writer's indentation is not part of the contract.
  std::string compact;
  bool in_string = false;
  for (char c : *text) {
    if (c == '"') in_string = !in_string;
    if (in_string || (c != ' ' && c != '\n')) compact += c;
  }
  EXPECT_EQ(compact, R"([{"targets":["127.0.0.1:9100"],"labels":{"job":"solo","rank":"0","role":"embedded"}}])");
}

TEST_F(TargetsFileTest, RewriteReplacesTheFileAndEscapesTheJobName) {
  const auto path = dir_ / "targets.json";
  ASSERT_TRUE(WriteTargetsFile(path.string(), "first",
                               {{"127.0.0.1", 9100, 0, "coordinator"}, {"127.0.0.1", 9101, 1, "worker"}})
                  .ok());
  const std::string odd_job = "odd \"job\"\\name\twith\ncontrol";
  ASSERT_TRUE(WriteTargetsFile(path.string(), odd_job, {{"::1", 9100, 0, "embedded"}}).ok());
  const std::vector<Json> entries = ReadEntries(path);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].at("labels").at("job"), odd_job);
  EXPECT_EQ(entries[0].at("targets").at(0), "[::1]:9100");
}

TEST_F(TargetsFileTest, NoTargetsIsAnEmptyList) {
  const auto path = dir_ / "targets.json";
  ASSERT_TRUE(WriteTargetsFile(path.string(), "empty", {}).ok());
  EXPECT_TRUE(ReadEntries(path).empty());
}

TEST_F(TargetsFileTest, InvalidTargetsAreUsageErrors) {
  const auto path = (dir_ / "targets.json").string();
  const Target ok{"127.0.0.1", 9100, 0, "coordinator"};
  struct Case {
    std::string job;
    std::vector<Target> targets;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"", {ok}, "job name"},
           {"j", {ok, {"127.0.0.1", 9101, 0, "worker"}}, "rank 0 appears twice"},
           {"j", {{"", 9100, 0, "worker"}}, "empty host"},
           {"j", {{"h", 9100, 0, ""}}, "empty role"},
           {"j", {{"h", 0, 0, "worker"}}, "port 0"},
           {"j", {{"h", 65536, 0, "worker"}}, "port 65536"},
       }) {
    Status status = WriteTargetsFile(path, c.job, c.targets);
    EXPECT_EQ(status.code(), Code::kUsage) << c.message;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(TargetsFileTest, UnwritableDirectoryIsAStorageErrorNamingThePath) {
  // Root ignores a directory's mode bits (CI runs as root): there, sysfs, where not even root creates a file.
  const bool root = ::geteuid() == 0;
  std::filesystem::create_directories(dir_ / "locked");
  ::chmod((dir_ / "locked").c_str(), 0500);
  const auto path = root ? std::string("/sys/kernel/targets.json") : (dir_ / "locked" / "targets.json").string();
  Status status = WriteTargetsFile(path, "j", {{"127.0.0.1", 9100, 0, "worker"}});
  ::chmod((dir_ / "locked").c_str(), 0700);
  EXPECT_EQ(status.code(), Code::kStorage);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
}

TEST_F(TargetsFileTest, ParentThatIsAFileIsAStorageErrorNamingThePath) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "plain") << "not a directory";
  const auto path = (dir_ / "plain" / "targets.json").string();
  Status status = WriteTargetsFile(path, "j", {{"127.0.0.1", 9100, 0, "worker"}});
  EXPECT_EQ(status.code(), Code::kStorage);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
}

}  // namespace
}  // namespace tessel::monitoring
