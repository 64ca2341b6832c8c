#include "monitoring/run_csv.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessel::monitoring {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()))).string();
}

TEST(RunCsv, WritesTheHeaderOnceAndOneRowPerStep) {
  const std::string path = TempPath("run_csv_test.csv");
  std::filesystem::remove(path);
  {
    auto csv = RunCsv::Open(path);
    ASSERT_TRUE(csv.ok()) << csv.status().message();
    Record figures;
    Set(figures, "step_seconds", 0.25);
    Set(figures, "loss", 1.5);
    Set(figures, "samples", int64_t{4096});
    Set(figures, "not_a_column", 7.0);  // ignored
    ASSERT_TRUE(csv->Append(2, 3, figures).ok());
  }
  {
    auto again = RunCsv::Open(path);  // --resume appends, without a second header
    ASSERT_TRUE(again.ok());
    Record figures;
    Set(figures, "val_loss", 2.0);
    ASSERT_TRUE(again->Append(1, 4, figures).ok());
  }
  std::string header = "rank,step";
  for (std::string_view c : kStepColumns) header += "," + std::string(c);
  std::istringstream lines(ReadFile(path));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, header);
  const size_t columns = std::size(kStepColumns) + 2;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(static_cast<size_t>(std::count(line.begin(), line.end(), ',')), columns - 1) << line;
  EXPECT_EQ(line.rfind("2,3,,0.25,", 0), 0u) << line;  // unix_seconds empty, step_seconds 0.25
  EXPECT_NE(line.find(",1.5,"), std::string::npos) << line;
  EXPECT_NE(line.find(",4096,"), std::string::npos) << line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind("1,4,", 0), 0u) << line;
  EXPECT_NE(line.find(",2,"), std::string::npos) << line;
  EXPECT_FALSE(std::getline(lines, line)) << "one header, two rows";
  std::filesystem::remove(path);
}

TEST(RunCsv, AnUnwritableDirectoryIsAStorageErrorNamingTheFile) {
  auto csv = RunCsv::Open("/proc/no-such-dir/metrics.csv");
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), Code::kStorage);
  EXPECT_NE(csv.status().message().find("/proc/no-such-dir/metrics.csv"), std::string::npos);
}

}  // namespace
}  // namespace tessel::monitoring
