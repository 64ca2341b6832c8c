// Tests for the data subcommands of orchestrator/cli_data.cc (import, generate, inspect), driven
// in-process through CLI11 the way main() drives them. Compiled here with cli_data.cc alone, so it
// does not depend on the rest of the orchestrator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "orchestrator/cli.h"
#include "storage/graph.h"
#include "tests/unit/storage/test_util.h"

namespace tessel::cli {
namespace {

using storage::testing::ScratchDir;
using ::testing::HasSubstr;

// Parses `args` as main() would; returns the exit code main() would return.
int RunCli(std::vector<std::string> args, Status* result) {
  CLI::App app;
  app.require_subcommand(1);
  RegisterDataCommands(app, result);
  std::vector<const char*> argv = {"tessel"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  return result->exit_code();
}

TEST(DataCommands, GenerateThenInspect) {
  ScratchDir dir;
  Status result;
  EXPECT_EQ(RunCli({"generate", "graph", "--out", dir.File("g.h5"), "--nodes", "3000", "--seed", "5"}, &result), 0)
      << result.ToString();
  Result<storage::HeteroGraph> g = storage::ReadGraph(dir.File("g.h5"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_nodes(), 3000);
  EXPECT_THAT(g->source_fingerprint, HasSubstr("seed=5"));
  EXPECT_EQ(RunCli({"inspect", dir.File("g.h5")}, &result), 0);
}

TEST(DataCommands, ImportEdgesWritesTheGraph) {
  ScratchDir dir;
  storage::testing::WriteText(dir.File("e.tsv"), "a\tr\tb\n");
  Status result;
  EXPECT_EQ(
      RunCli({"import", "edges", "--input", dir.File("e.tsv"), "--out", dir.File("e.h5"), "--add-inverse"}, &result), 0)
      << result.ToString();
  Result<storage::HeteroGraph> g = storage::ReadGraph(dir.File("e.h5"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->relations.size(), 2u);
}

TEST(DataCommands, BadDataExitsThreeAndWritesNothing) {
  ScratchDir dir;
  storage::testing::WriteText(dir.File("bad.nt"), "<a> <b> .\n");
  Status result;
  EXPECT_EQ(RunCli({"import", "rdf", "--triples", dir.File("bad.nt"), "--out", dir.File("out.h5")}, &result), 3);
  EXPECT_THAT(result.message(), HasSubstr(":1: malformed triple"));
  EXPECT_EQ(dir.List(), std::vector<std::string>{"bad.nt"});
}

TEST(DataCommands, UsageErrorsExitTwo) {
  ScratchDir dir;
  Status result;
  EXPECT_EQ(RunCli({"import", "rdf", "--out", dir.File("x.h5")}, &result), 2);  // --triples missing
  EXPECT_EQ(RunCli({"generate", "graph", "--out", dir.File("x.h5"), "--nodes", "many"}, &result), 2);
  EXPECT_EQ(RunCli({"import"}, &result), 2);
  result = Status();
  EXPECT_EQ(RunCli({"generate", "graph", "--out", dir.File("x.h5"), "--classes", "0"}, &result), 2);
  EXPECT_TRUE(dir.List().empty());
}

TEST(DataCommands, InspectMissingFileExitsThree) {
  Status result;
  EXPECT_EQ(RunCli({"inspect", "/nonexistent.h5"}, &result), 3);
}

}  // namespace
}  // namespace tessel::cli
