// The conformance run of `tessel plugin check` (workers/plugin_host/conformance.h), through CheckPlugin
// as the CLI calls it: every built-in plugin passes and every op the host knows is run on the CPU; the
// example plugin passes against the built-ins; each deliberately broken build of the example
// (broken_example.cc) fails exactly the broken op, naming the failure; a CUDA kernel without a GPU is a
// SKIP row that says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "core/allocator.h"
#include "test_dirs.h"
#include "workers/plugin_host/op_table.h"
#include "workers/plugin_host/plugin_report.h"

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;

ConformanceOptions AgainstBuiltins() {
  ConformanceOptions options;
  options.reference_dirs = {std::string(TESSEL_BINARY_DIR) + "/plugins"};
  options.timing_runs = 0;  // correctness only: timing is for the CLI's table
  return options;
}

// The report's table: "op device dtype" -> verdict, and the line under a row that says why.
struct Table {
  std::map<std::string, std::string> verdict, why, vs_ref;
};
Table Parse(const std::string& report) {
  Table t;
  std::istringstream in(report);
  std::string line, last;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string op, device, dtype, verdict;
    words >> op >> device >> dtype >> verdict;
    if ((device == "cpu" || device == "cuda") && (verdict == "PASS" || verdict == "FAIL" || verdict == "SKIP")) {
      last = StrCat(op, " ", device, " ", dtype);
      std::string shapes, vs_ref;
      words >> shapes >> vs_ref;
      t.vs_ref[last] = vs_ref;
      t.verdict[last] = verdict;
    } else if (line.rfind("      ", 0) == 0 && !last.empty()) {
      t.why[last] = line;
    }
  }
  return t;
}

struct Checked {
  Status status;
  std::string report;
  Table table;
};
Checked Check(const std::string& plugin) {
  std::ostringstream out;
  Checked c{CheckPlugin(plugin, {}, Device::kCpu, out, AgainstBuiltins()), "", {}};
  c.report = out.str();
  c.table = Parse(c.report);
  return c;
}

TEST(Conformance, EveryBuiltInPluginPassesAndEveryKnownOpRunsOnTheCpu) {
  std::set<std::string> run_on_cpu;
  for (const std::string& plugin :
       {testing::NnPlugin(), testing::RgnnPlugin(), testing::LlmPlugin(), testing::GatherPlugin()}) {
    const Checked c = Check(plugin);
    ASSERT_TRUE(c.status.ok()) << c.status.ToString() << "\n" << c.report;
    EXPECT_THAT(c.report, HasSubstr("0 failed")) << c.report;
    for (const auto& [row, verdict] : c.table.verdict) {
      std::istringstream words(row);
      std::string op, device, dtype;
      words >> op >> device >> dtype;
      if (device == "cpu") {
        EXPECT_EQ(verdict, "PASS") << row << ": " << (c.table.why.count(row) ? c.table.why.at(row) : "") << "\n"
                                   << c.report;
        if (verdict == "PASS") run_on_cpu.insert(op);
        // Values compared: an f32 or bf16 kernel against the op's f64 kernel (the f64 one is held to
        // finite differences instead, its "grad" column).
        if (dtype != "f64" && dtype != "-") {
          EXPECT_NE(c.table.vs_ref.at(row), "none") << row << "\n" << c.report;
        }
      } else if (!CudaAvailable()) {
        EXPECT_EQ(verdict, "SKIP") << row;
        EXPECT_THAT(c.table.why.at(row), HasSubstr("no GPU visible")) << row;
      } else {
        EXPECT_NE(verdict, "FAIL") << row << ": " << c.table.why.at(row);
      }
    }
  }
  // A new op without a recipe for its index inputs would be a SKIP row "not covered": every op counts.
  std::set<std::string> known;
  for (const tessel_op_decl* op : HostOps()) known.insert(op->name);
  EXPECT_EQ(run_on_cpu, known);
}

TEST(Conformance, BackwardOpsAreCheckedByFiniteDifferences) {
  const Checked c = Check(testing::NnPlugin());
  ASSERT_TRUE(c.status.ok()) << c.report;
  // The f64 row of a backward op shows the gradient check's verdict in its "grad" column.
  for (const char* op : {"nn.relu.bwd", "nn.gelu.bwd", "nn.linear.bwd", "nn.embedding.bwd"}) {
    bool found = false;
    std::istringstream in(c.report);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string name, device, dtype, verdict, shapes, vs_ref, grad;
      words >> name >> device >> dtype >> verdict >> shapes >> vs_ref >> grad;
      if (name == op && device == "cpu" && dtype == "f64") {
        found = true;
        EXPECT_EQ(grad, "ok") << line;
      }
    }
    EXPECT_TRUE(found) << op << "\n" << c.report;
  }
}

TEST(Conformance, TheExamplePassesAgainstTheBuiltInsAndIsCompared) {
  const Checked c = Check(testing::ExamplePlugin());
  ASSERT_TRUE(c.status.ok()) << c.status.ToString() << "\n" << c.report;
  for (const char* row : {"nn.relu.fwd cpu f32", "nn.relu.fwd cpu f64", "nn.relu.bwd cpu f32", "nn.relu.bwd cpu f64"}) {
    EXPECT_EQ(c.table.verdict.count(row) ? c.table.verdict.at(row) : "missing", "PASS") << row << "\n" << c.report;
  }
  // Compared with the nn plugin's kernels, not with itself; the op of its own is not run.
  EXPECT_THAT(c.report, ::testing::ContainsRegex("nn\\.relu\\.fwd +cpu +f32 +PASS +3/3 +0\\.0e\\+00"));
  EXPECT_EQ(c.table.verdict.count("example.scale.fwd cpu f32"), 0u) << c.report;
  EXPECT_THAT(c.report, HasSubstr("op example.scale.fwd (cpu) is not in the host's table"));
}

struct BrokenCase {
  const char* kind;
  const char* row;      // a row that must fail ("op device dtype")
  const char* op;       // every row of this op may fail; no other
  const char* failure;  // what the row's failure line says
};

class BrokenExample : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenExample, FailsExactlyTheBrokenOpNamingTheFailure) {
  const BrokenCase& b = GetParam();
  const Checked c = Check(StrCat(TEST_PLUGIN_DIR, "/libbroken_example_", b.kind, ".so"));
  EXPECT_EQ(c.status.code(), Code::kPlugin) << c.status.ToString() << "\n" << c.report;
  EXPECT_THAT(c.status.message(), HasSubstr("failed the conformance run"));
  ASSERT_EQ(c.table.verdict.count(b.row), 1u) << c.report;
  EXPECT_EQ(c.table.verdict.at(b.row), "FAIL") << c.report;
  ASSERT_EQ(c.table.why.count(b.row), 1u) << c.report;
  EXPECT_THAT(c.table.why.at(b.row), HasSubstr(b.failure));
  int failed = 0;
  for (const auto& [row, verdict] : c.table.verdict) {
    if (verdict != "FAIL") continue;
    ++failed;
    EXPECT_EQ(row.rfind(StrCat(b.op, " "), 0), 0u) << row << " is not broken\n" << c.report;
  }
  EXPECT_GE(failed, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BrokenExample,
    ::testing::Values(BrokenCase{"wrong_value", "nn.relu.fwd cpu f32", "nn.relu.fwd", "FAIL: wrong value: output 'Y'["},
                      BrokenCase{"write_past", "nn.relu.fwd cpu f64", "nn.relu.fwd",
                                 "FAIL: wrote outside its output 'Y' [1,1]: the guard bytes after it changed"},
                      BrokenCase{"wrong_gradient", "nn.relu.bwd cpu f64", "nn.relu.bwd", "wrong gradient: dX["},
                      BrokenCase{"nondeterministic", "nn.relu.fwd cpu f32", "nn.relu.fwd",
                                 "FAIL: nondeterministic: output 'Y'[0] differs between two calls"}),
    [](const ::testing::TestParamInfo<BrokenCase>& info) { return std::string(info.param.kind); });

}  // namespace
}  // namespace tessel::workers
