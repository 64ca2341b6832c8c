// The run report (orchestrator/report.*): the page from metrics.csv and summary.json, and how it fails
// on missing or malformed input.
#include "orchestrator/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessel::orchestrator {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHeader =
    "rank,step,unix_seconds,step_seconds,compute_seconds,peer_wait_seconds,forward_seconds,backward_seconds,loss,"
    "val_loss,lr,samples,gather_local_bytes,gather_remote_bytes,halo_sent_bytes,halo_received_bytes,"
    "spill_written_bytes,spill_read_bytes,spill_wait_seconds,resident_bytes,activation_bytes";

// One row of metrics.csv in kHeader's order. Rank 2 computes almost all of its step; rank 1 waits for it.
std::string Row(int rank, int step) {
  const double step_s = rank == 2 ? 0.152 : 0.150;
  const double compute = rank == 2 ? 0.145 : 0.080;
  const double loss = 2.0 * std::exp(-0.1 * step) + 0.3;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.6f,%s,0.001,4096,%d,%d,%d,%d,0,0,0,%lld,%lld",
                rank, step, 1.7e9 + step * 0.15, step_s, compute, step_s - compute, compute * 0.4, compute * 0.6, loss,
                step % 5 == 0 ? std::to_string(loss + 0.05).c_str() : "", 20'000'000 + rank, 8'000'000, 3'000'000,
                3'000'000, 1'500'000'000LL + step * 1'000'000LL * rank, 200'000'000LL + rank * 10'000'000LL);
  return buf;
}

// 20 steps of ranks 1 and 2, interleaved as the coordinator appends them.
std::string TwoRankCsv(int steps = 20) {
  std::string csv = std::string(kHeader) + "\n";
  for (int step = 1; step <= steps; ++step) {
    for (int rank : {step % 2 == 0 ? 1 : 2, step % 2 == 0 ? 2 : 1}) csv += Row(rank, step) + "\n";
  }
  return csv;
}

std::string Summary(const std::string& job) {
  return R"({"job": ")" + job + R"(", "kind": "llm", "workers": 2, "wall_seconds": 3.4, "outcome": "done",
    "version": "0.1.0", "stragglers": {"factor": 1.5, "window_steps": 10, "windows": 2,
    "ranks": {"1": {"median_compute_seconds": 0.08, "vs_fastest_last": 1.0, "vs_fastest_max": 1.0,
                    "straggler_windows": 0},
              "2": {"median_compute_seconds": 0.145, "vs_fastest_last": 1.81, "vs_fastest_max": 1.85,
                    "straggler_windows": 2}}}})";
}

// The <svg> of one chart, or "" when the page has none.
std::string ChartOf(const std::string& html, const std::string& id) {
  const size_t at = html.find("data-chart=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t start = html.rfind("<svg", at);
  const size_t end = html.find("</svg>", at);
  return html.substr(start, end - start);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() / (std::string("tessel-report-") + info->name() + "-" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Writes the report and returns the page ("" and a test failure when it could not).
  std::string Report() {
    Result<std::string> path = WriteRunReport(dir_, "");
    EXPECT_TRUE(path.ok()) << path.status().ToString();
    if (!path.ok()) return "";
    EXPECT_EQ(*path, dir_ + "/report.html");
    EXPECT_TRUE(fs::exists(*path));
    return Read(*path);
  }

  std::string dir_;
};

TEST_F(ReportTest, DrawsEveryChartWithUnitsAndMarksTheStraggler) {
  Write("metrics.csv", TwoRankCsv());
  Write("summary.json", Summary("llama-tiny"));
  const std::string html = Report();
  for (const char* id : {"loss", "step-time", "throughput", "bandwidth", "memory", "memory-kind"}) {
    EXPECT_NE(ChartOf(html, id), "") << "no chart " << id;
    EXPECT_NE(ChartOf(html, id).find("class=\"legend\""), std::string::npos) << id;
  }
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);

  const std::string step_time = ChartOf(html, "step-time");
  EXPECT_NE(step_time.find("step time (ms)"), std::string::npos);
  EXPECT_NE(step_time.find("rank 2 (straggler) wall"), std::string::npos);
  EXPECT_EQ(step_time.find("rank 1 (straggler)"), std::string::npos);
  EXPECT_NE(step_time.find("stroke=\"#d62728\""), std::string::npos) << "the straggler is not drawn red";
  EXPECT_NE(ChartOf(html, "throughput").find("throughput (tokens/s)"), std::string::npos);
  EXPECT_NE(ChartOf(html, "bandwidth").find("bandwidth (MB/s)"), std::string::npos);
  EXPECT_NE(ChartOf(html, "memory").find("memory (MiB)"), std::string::npos);
  EXPECT_NE(ChartOf(html, "loss").find("validation loss"), std::string::npos);

  // The bandwidth chart leaves out the spill series, which are all zero.
  const std::string bandwidth = ChartOf(html, "bandwidth");
  EXPECT_NE(bandwidth.find("gather (local + remote)"), std::string::npos);
  EXPECT_NE(bandwidth.find("halo sent"), std::string::npos);
  EXPECT_EQ(bandwidth.find("spill write"), std::string::npos);
  EXPECT_EQ(bandwidth.find("no data"), std::string::npos);

  // The table: rank 2's medians and its score from summary.json.
  EXPECT_NE(html.find("<td class=\"num\">152</td><td class=\"num\">145</td><td class=\"num\">7</td>"
                      "<td class=\"num\">1.85\u00d7</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">150</td><td class=\"num\">80</td><td class=\"num\">70</td>"),
            std::string::npos);
  EXPECT_NE(html.find("20 (1\u201320)"), std::string::npos) << "the number of steps";
}

TEST_F(ReportTest, EscapesTheJobName) {
  Write("metrics.csv", TwoRankCsv());
  Write("summary.json", Summary("<job&name>"));
  const std::string html = Report();
  EXPECT_NE(html.find("&lt;job&amp;name&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<job&name>"), std::string::npos);
}

TEST_F(ReportTest, FailedRunShowsTheErrorExitCodeAndRank) {
  Write("metrics.csv", TwoRankCsv(7));
  Write("summary.json", R"({"job": "j", "kind": "rgnn", "outcome": "failed",
      "error": "rank 2 (worker on <node3>) sent no heartbeat for 10.0 s & died; see http://node3:9000/metrics",
      "exit_code": 5, "failed_rank": 2, "wall_seconds": 7384.2, "version": "0.1.0"})");
  const std::string html = Report();
  EXPECT_NE(html.find("class=\"failure\""), std::string::npos);
  EXPECT_NE(html.find("rank 2 (worker on &lt;node3&gt;) sent no heartbeat for 10.0 s &amp; died"), std::string::npos);
  EXPECT_EQ(html.find("<node3>"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos) << "a URL in the error is still not a URL in the page";
  EXPECT_NE(html.find("<dt>exit code</dt><dd>5</dd>"), std::string::npos);
  EXPECT_NE(html.find("<dt>failed rank</dt><dd>2</dd>"), std::string::npos);
  EXPECT_NE(html.find("2 h 03 min"), std::string::npos) << "the wall time";
  // An rgnn job counts epochs and nodes.
  EXPECT_NE(ChartOf(html, "loss").find(">epoch</text>"), std::string::npos);
  EXPECT_NE(ChartOf(html, "throughput").find("throughput (nodes/s)"), std::string::npos);
}

TEST_F(ReportTest, MissingMetricsIsAUsageErrorNamingTheFile) {
  Write("summary.json", Summary("j"));
  Result<std::string> path = WriteRunReport(dir_, "");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), Code::kUsage);
  EXPECT_NE(path.status().message().find(dir_ + "/metrics.csv"), std::string::npos) << path.status().message();
  EXPECT_NE(path.status().message().find("since Tessel 0.1.0"), std::string::npos) << path.status().message();
  EXPECT_FALSE(fs::exists(dir_ + "/report.html"));
}

TEST_F(ReportTest, GarbageNumberIsBadDataNamingLineAndColumn) {
  std::string csv = std::string(kHeader) + "\n" + Row(1, 1) + "\n" + Row(1, 2) + "\n";
  csv.replace(csv.find(",0.150,", csv.find(Row(1, 2))), 7, ",0.1x5,");
  Write("metrics.csv", csv);
  Result<std::string> path = WriteRunReport(dir_, "");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), Code::kBadData);
  EXPECT_NE(path.status().message().find("metrics.csv:3: column step_seconds: '0.1x5' is not a number"),
            std::string::npos)
      << path.status().message();
}

TEST_F(ReportTest, ShortLineInTheMiddleIsBadData) {
  Write("metrics.csv", std::string(kHeader) + "\n" + Row(1, 1) + "\n1,2,17\n" + Row(1, 3) + "\n");
  Result<std::string> path = WriteRunReport(dir_, "");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), Code::kBadData);
  EXPECT_NE(path.status().message().find("metrics.csv:3: 3 cells where the header has 21"), std::string::npos)
      << path.status().message();
}

TEST_F(ReportTest, TruncatedLastLineIsSkipped) {
  const std::string cut = Row(2, 21).substr(0, 40);  // killed mid-write: no newline, fewer cells
  Write("metrics.csv", TwoRankCsv() + cut);
  Write("summary.json", Summary("j"));
  const std::string html = Report();
  EXPECT_NE(html.find("cut short"), std::string::npos);
  EXPECT_NE(html.find("20 (1\u201320)"), std::string::npos) << "step 21 was only partly written";
}

TEST_F(ReportTest, MissingSummaryIsSaidAndTheChartsAreStillDrawn) {
  Write("metrics.csv", TwoRankCsv());
  const std::string html = Report();
  EXPECT_NE(html.find("summary.json is missing"), std::string::npos);
  for (const char* id : {"loss", "step-time", "throughput", "bandwidth", "memory", "memory-kind"}) {
    EXPECT_NE(ChartOf(html, id), "") << "no chart " << id;
  }
  EXPECT_EQ(html.find("(straggler)"), std::string::npos) << "stragglers come from summary.json";
  EXPECT_NE(html.find("2 (ranks in metrics.csv)"), std::string::npos);
  EXPECT_NE(html.find(fs::path(dir_).filename().string()), std::string::npos) << "the run directory names the job";
}

TEST_F(ReportTest, MalformedSummaryIsBadData) {
  Write("metrics.csv", TwoRankCsv());
  Write("summary.json", R"({"job": "j", )");
  Result<std::string> path = WriteRunReport(dir_, "");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), Code::kBadData);
  EXPECT_NE(path.status().message().find("summary.json"), std::string::npos) << path.status().message();

  Write("summary.json", R"({"job": 7})");
  path = WriteRunReport(dir_, "");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), Code::kBadData);
  EXPECT_NE(path.status().message().find("\"job\" is not a string"), std::string::npos) << path.status().message();
}

TEST_F(ReportTest, UnwritablePageIsAStorageErrorNamingThePath) {
  Write("metrics.csv", TwoRankCsv());
  const std::string out = dir_ + "/no-such-dir/page.html";
  Result<std::string> path = WriteRunReport(dir_, out);
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), Code::kStorage);
  EXPECT_NE(path.status().message().find(out), std::string::npos) << path.status().message();
}

TEST_F(ReportTest, WritesToTheGivenPath) {
  Write("metrics.csv", TwoRankCsv());
  const std::string out = dir_ + "/elsewhere.html";
  Result<std::string> path = WriteRunReport(dir_, out);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, out);
  EXPECT_TRUE(fs::exists(out));
  EXPECT_FALSE(fs::exists(dir_ + "/report.html"));
}

TEST_F(ReportTest, FindsColumnsByNameInAnyOrder) {
  // Columns reordered, one unknown column added; the table's medians must still be rank 2's.
  Write("metrics.csv",
        "future_thing,compute_seconds,step,step_seconds,rank,peer_wait_seconds\n"
        "x,0.145,1,0.152,2,0.007\n"
        "y,0.145,2,0.152,2,0.007\n");
  const std::string html = Report();
  EXPECT_NE(html.find("<td>2</td><td class=\"num\">2</td><td class=\"num\">152</td><td class=\"num\">145</td>"
                      "<td class=\"num\">7</td>"),
            std::string::npos);
}

TEST_F(ReportTest, WaitsByKindPerRankOnlyWhereThereAreAny) {
  // Rank 1 waits in allreduce and p2p, rank 2 only in allreduce; nobody in alltoall.
  std::string csv =
      "rank,step,step_seconds,compute_seconds,peer_wait_seconds,wait_allreduce_seconds,"
      "wait_alltoall_seconds,wait_p2p_seconds\n";
  for (int step = 1; step <= 4; ++step) {
    csv += "1," + std::to_string(step) + ",0.1,0.05,0.05,0.02,0,0.03\n";
    csv += "2," + std::to_string(step) + ",0.1,0.09,0.01,0.01,0,0\n";
  }
  Write("metrics.csv", csv);
  Write("summary.json", Summary("j"));
  const std::string waits = ChartOf(Report(), "waits");
  ASSERT_NE(waits, "");
  EXPECT_NE(waits.find("wait per step (ms)"), std::string::npos);
  EXPECT_NE(waits.find("rank 1 allreduce"), std::string::npos);
  EXPECT_NE(waits.find("rank 1 p2p"), std::string::npos);
  EXPECT_NE(waits.find("rank 2 (straggler) allreduce"), std::string::npos);
  EXPECT_EQ(waits.find("rank 2 (straggler) p2p"), std::string::npos) << "rank 2 never waits in p2p";
  EXPECT_EQ(waits.find("alltoall<"), std::string::npos) << "nobody waits in alltoall";
  EXPECT_NE(waits.find("<circle"), std::string::npos) << "p2p is drawn as dots";
}

TEST_F(ReportTest, ACsvWithoutWaitColumnsHasAnEmptyWaitChart) {
  Write("metrics.csv", TwoRankCsv());
  Write("summary.json", Summary("j"));
  const std::string waits = ChartOf(Report(), "waits");
  ASSERT_NE(waits, "") << "the chart is there, saying it has no data";
  EXPECT_NE(waits.find("no data"), std::string::npos);
}

TEST_F(ReportTest, OneStepWithEmptyCellsHasNoNanOrInf) {
  Write("metrics.csv", std::string(kHeader) + "\n0,1,,0.25,,,,,,,,,,,,,,,,,\n");
  const std::string html = Report();
  for (const char* id : {"loss", "step-time", "throughput", "bandwidth", "memory", "memory-kind"}) {
    EXPECT_NE(ChartOf(html, id), "") << "no chart " << id;
  }
  EXPECT_NE(ChartOf(html, "bandwidth").find("no data"), std::string::npos);
  EXPECT_NE(ChartOf(html, "loss").find("no data"), std::string::npos);
  EXPECT_EQ(ChartOf(html, "step-time").find("no data"), std::string::npos);
  // The single step is drawn as a dot.
  EXPECT_NE(ChartOf(html, "step-time").find("<circle"), std::string::npos);
  for (const char* bad : {">nan", ">inf", ">-nan", "NaN", "e+"}) {
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  }
}

TEST_F(ReportTest, HugeAndTinyValuesGetSiTickLabels) {
  std::string csv = std::string(kHeader) + "\n";
  for (int step = 1; step <= 5; ++step) {
    // 5 TB resident (about 4.8 M MiB), a loss of a few millionths.
    csv += "0," + std::to_string(step) + ",,0.5,0.5,0,,," + std::to_string(step * 2e-6) + ",,,1e12,,,,,,,,5e12,0\n";
  }
  Write("metrics.csv", csv);
  const std::string html = Report();
  EXPECT_NE(ChartOf(html, "memory").find("M</text>"), std::string::npos);
  EXPECT_NE(ChartOf(html, "loss").find("\u00b5</text>"), std::string::npos);
  EXPECT_NE(ChartOf(html, "throughput").find("T</text>"), std::string::npos);
  EXPECT_EQ(html.find("e+"), std::string::npos);
  EXPECT_EQ(html.find("e-0"), std::string::npos);
}

TEST_F(ReportTest, TableValuesAreWrittenWithoutExponents) {
  // 1234.4 ms, 999.6 ms and 1 ns, then 999.6 million ms: "%.3g" alone would write 1.23e+03, 1e+03, 1e-06
  // and (with an SI prefix) 1e+03M.
  Write("metrics.csv",
        "rank,step,step_seconds,compute_seconds,peer_wait_seconds\n"
        "1,1,1.2344,0.9996,0.000000001\n"
        "2,1,999600,999600,0\n");
  const std::string html = Report();
  EXPECT_NE(html.find("<td class=\"num\">1234</td><td class=\"num\">1000</td><td class=\"num\">1\u00b5</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">1G</td><td class=\"num\">1G</td><td class=\"num\">0</td>"), std::string::npos);
  EXPECT_EQ(html.find("e+"), std::string::npos);
}

}  // namespace
}  // namespace tessel::orchestrator
