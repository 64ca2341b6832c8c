// Drives `tessel partition` in-process through the CLI11 app, as main() does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "orchestrator/cli.h"
#include "storage/graph.h"
#include "storage/partition.h"

namespace tessel::cli {
namespace {

namespace fs = std::filesystem;

storage::HeteroGraph SmallGraph() {
  std::mt19937_64 rng(5);
  storage::HeteroGraph g;
  g.name = "small";
  g.num_classes = 2;
  storage::NodeType t;
  t.name = "node";
  t.count = 300;
  t.feature_dim = 2;
  t.features.resize(600, 0.5f);
  t.labels.resize(300);
  t.train_mask.assign(300, 0);
  t.val_mask.assign(300, 0);
  t.test_mask.assign(300, 0);
  for (int i = 0; i < 300; ++i) {
    t.labels[i] = i % 2;
    t.train_mask[i] = i % 4 == 0;
    t.test_mask[i] = i % 4 == 1;
  }
  g.node_types.push_back(t);
  storage::Relation r;
  r.name = "link";
  for (int i = 0; i < 1500; ++i) {
    const int64_t a = static_cast<int64_t>(rng() % 300);
    // Mostly within blocks of 100 so that METIS has structure to find.
    const int64_t b =
        (rng() % 10 == 0) ? static_cast<int64_t>(rng() % 300) : (a / 100) * 100 + static_cast<int64_t>(rng() % 100);
    r.src.push_back(a);
    r.dst.push_back(b);
  }
  g.relations.push_back(r);
  return g;
}

class CliPartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-cli-partition-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    graph_ = (dir_ / "g.h5").string();
    ASSERT_TRUE(storage::WriteGraph(SmallGraph(), graph_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  Status Run(std::vector<std::string> args) {
    CLI::App app;
    Status result;
    RegisterPartitionCommands(app, &result);
    args.insert(args.begin(), "partition");
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
    app.parse(args);
    return result;
  }

  fs::path dir_;
  std::string graph_;
};

TEST_F(CliPartitionTest, WritesEveryPartAndAReport) {
  const fs::path out = dir_ / "parts";
  testing::internal::CaptureStdout();
  const Status st = Run({graph_, "--parts", "3", "--out", out.string(), "--seed", "7"});
  const std::string printed = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(printed.find("edge cut"), std::string::npos) << printed;
  EXPECT_NE(printed.find("random partition"), std::string::npos) << printed;
  EXPECT_NE(printed.find("imbalance"), std::string::npos) << printed;

  int64_t owned = 0, edges = 0;
  for (int k = 0; k < 3; ++k) {
    auto p = storage::ReadPartitionFile((out / ("part-" + std::to_string(k) + ".h5")).string());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->part, k);
    EXPECT_EQ(p->num_parts, 3);
    EXPECT_EQ(p->feature_dim, 2);
    owned += p->num_owned;
    edges += static_cast<int64_t>(p->src.size());
  }
  EXPECT_EQ(owned, 300);
  EXPECT_EQ(edges, 1500);
  EXPECT_FALSE(fs::exists(out / "part-3.h5"));

  std::ifstream f(out / "partition.json");
  std::stringstream json;
  json << f.rdbuf();
  for (const char* key :
       {"\"method\": \"metis\"", "\"parts\": 3", "\"edge_cut\"", "\"random_edge_cut\"", "\"cut_ratio\"",
        "\"constraints\"", "\"imbalance\"", "\"seconds\"", "\"per_part\"", "\"halo\"", "\"owned\""}) {
    EXPECT_NE(json.str().find(key), std::string::npos) << key << " missing from\n" << json.str();
  }
  // Nothing temporary is left beside the output.
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(CliPartitionTest, ReplacesAnEarlierOutput) {
  const fs::path out = dir_ / "parts";
  testing::internal::CaptureStdout();
  ASSERT_TRUE(Run({graph_, "--parts", "4", "--out", out.string()}).ok());
  ASSERT_TRUE(Run({graph_, "--parts", "2", "--out", out.string(), "--method", "range"}).ok());
  testing::internal::GetCapturedStdout();
  EXPECT_TRUE(fs::exists(out / "part-1.h5"));
  EXPECT_FALSE(fs::exists(out / "part-2.h5")) << "stale parts of the earlier run must go";
}

TEST_F(CliPartitionTest, BadGraphIsBadDataAndLeavesNothing) {
  const std::string bad = (dir_ / "bad.h5").string();
  std::ofstream(bad) << "definitely not hdf5";
  const fs::path out = dir_ / "parts";
  const Status st = Run({bad, "--parts", "2", "--out", out.string()});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_EQ(st.exit_code(), 3);
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(CliPartitionTest, RefusesToReplaceADirectoryItDidNotWrite) {
  const fs::path out = dir_ / "precious";
  fs::create_directories(out);
  std::ofstream(out / "thesis.tex") << "...";
  const Status st = Run({graph_, "--parts", "2", "--out", out.string()});
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_TRUE(fs::exists(out / "thesis.tex"));
}

// Issue 32 row 3: any file named partition.json made a directory replaceable, and all of it went.
TEST_F(CliPartitionTest, APartitionJsonItDidNotWriteDoesNotMakeADirectoryReplaceable) {
  const fs::path out = dir_ / "P";
  fs::create_directories(out / "src");
  std::ofstream(out / "src" / "thesis.tex") << "x";
  std::ofstream(out / "partition.json") << "{}";
  const Status st = Run({graph_, "--parts", "2", "--out", out.string()});
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_NE(st.message().find("src/"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::exists(out / "src" / "thesis.tex"));
}

TEST_F(CliPartitionTest, AnEarlierOutputWithAFileAddedIsNotReplaced) {
  const fs::path out = dir_ / "parts";
  testing::internal::CaptureStdout();
  ASSERT_TRUE(Run({graph_, "--parts", "2", "--out", out.string()}).ok());
  testing::internal::GetCapturedStdout();
  std::ofstream(out / "analysis.ipynb") << "{}";
  const Status st = Run({graph_, "--parts", "3", "--out", out.string()});
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_NE(st.message().find("analysis.ipynb"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::exists(out / "analysis.ipynb"));
  EXPECT_TRUE(fs::exists(out / "part-1.h5"));
  EXPECT_FALSE(fs::exists(out / "part-2.h5"));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(CliPartitionTest, ALinkPlantedInTheOutputIsNeverFollowed) {
  const fs::path out = dir_ / "parts";
  testing::internal::CaptureStdout();
  ASSERT_TRUE(Run({graph_, "--parts", "2", "--out", out.string()}).ok());
  testing::internal::GetCapturedStdout();
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "keep me";
  fs::remove(out / "part-1.h5");
  fs::create_symlink(victim, out / "part-1.h5");  // listed, but a link: not Tessel's
  const Status st = Run({graph_, "--parts", "2", "--out", out.string()});
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  std::ifstream in(victim);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
  EXPECT_TRUE(fs::is_symlink(out / "part-1.h5"));
}

TEST_F(CliPartitionTest, TooManyPartsIsUsage) {
  const Status st = Run({graph_, "--parts", "301", "--out", (dir_ / "p").string()});
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
}

}  // namespace
}  // namespace tessel::cli
