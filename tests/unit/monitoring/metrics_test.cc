// The catalog contract: monitoring/METRICS.md, the code catalog and what a Metrics registry exposes agree.
#include "monitoring/metrics.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tessel::monitoring {
namespace {

struct CatalogRow {
  std::string type;
  std::set<std::string> labels;
  std::string unit;
  std::set<std::string> exported_by;
};

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

std::vector<std::string> SplitCells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {  // skip the leading '|'
    if (line[i] == '|') {
      cells.push_back(Trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

std::set<std::string> SplitList(const std::string& s) {
  std::set<std::string> items;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!Trim(item).empty()) items.insert(Trim(item));
  }
  return items;
}

// Parses the catalog table of METRICS.md: the table whose header row starts with "| name | type |".
std::map<std::string, CatalogRow> ParseCatalog(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::map<std::string, CatalogRow> rows;
  std::string line;
  bool in_table = false;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    if (!in_table) {
      if (line.rfind("| name | type |", 0) == 0) {
        in_table = true;
        header = SplitCells(line);
        EXPECT_EQ(header, (std::vector<std::string>{"name", "type", "labels", "unit", "meaning", "exported by"}));
        std::getline(in, line);  // the | --- | separator
      }
      continue;
    }
    if (line.empty() || line[0] != '|') break;
    std::vector<std::string> cells = SplitCells(line);
    EXPECT_EQ(cells.size(), header.size()) << line;
    if (cells.size() != header.size()) continue;
    std::string name = cells[0];
    EXPECT_TRUE(name.size() > 2 && name.front() == '`' && name.back() == '`') << "name not in backticks: " << line;
    name = name.substr(1, name.size() - 2);
    EXPECT_EQ(rows.count(name), 0u) << "duplicate row " << name;
    // "when set", or "when set (GPU)": no role registers it up front (ExportedBy::kWhenSet).
    rows[name] = CatalogRow{cells[1], SplitList(cells[2]), cells[3],
                            cells[5].rfind("when set", 0) == 0 ? std::set<std::string>{} : SplitList(cells[5])};
  }
  EXPECT_FALSE(rows.empty()) << "no catalog table in " << path;
  return rows;
}

std::map<std::string, CatalogRow> MarkdownCatalog() {
  return ParseCatalog(std::string(TESSEL_SOURCE_DIR) + "/monitoring/METRICS.md");
}

std::string TypeName(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    case prometheus::MetricType::Untyped:
      return "untyped";
  }
  return "?";
}

// Family name -> the collected family.
std::map<std::string, prometheus::MetricFamily> Collect(Metrics& metrics) {
  std::map<std::string, prometheus::MetricFamily> families;
  for (prometheus::MetricFamily& family : metrics.registry()->Collect()) {
    EXPECT_EQ(families.count(family.name), 0u) << "family registered twice: " << family.name;
    families[family.name] = std::move(family);
  }
  return families;
}

std::set<std::string> LabelNames(const prometheus::MetricFamily& family) {
  std::set<std::string> names;
  for (const prometheus::ClientMetric& metric : family.metric) {
    for (const prometheus::ClientMetric::Label& label : metric.label) names.insert(label.name);
  }
  return names;
}

std::string Label(const prometheus::ClientMetric& metric, const std::string& name) {
  for (const auto& label : metric.label) {
    if (label.name == name) return label.value;
  }
  return "<absent>";
}

template <typename Map>
std::set<std::string> Keys(const Map& map) {
  std::set<std::string> keys;
  for (const auto& [key, value] : map) keys.insert(key);
  return keys;
}

void Touch(Metrics& metrics, size_t row, LabelValues labels) {
  switch (Catalog()[row].kind) {
    case MetricKind::kCounter:
      metrics.Add(CounterName::At(row), 1, labels);
      break;
    case MetricKind::kGauge:
      metrics.Set(GaugeName::At(row), 1, labels);
      break;
    case MetricKind::kHistogram:
      metrics.Observe(HistogramName::At(row), 0.5);
      break;
  }
}

// Gives every row of the catalog a series: its first known label value, or "x" for each variable label.
void TouchEveryMetric(Metrics& metrics) {
  for (size_t i = 0; i < Catalog().size(); ++i) {
    const MetricSpec& spec = Catalog()[i];
    std::vector<std::string_view> v;
    for (size_t at = 0; at < spec.variable_labels.size();) {
      const size_t comma = std::min(spec.variable_labels.find(',', at), spec.variable_labels.size());
      v.push_back("x");
      at = comma + 1;
    }
    if (!spec.label_values.empty()) v.at(0) = spec.label_values[0];
    switch (v.size()) {
      case 0:
        Touch(metrics, i, {});
        break;
      case 1:
        Touch(metrics, i, {v[0]});
        break;
      case 2:
        Touch(metrics, i, {v[0], v[1]});
        break;
      case 5:
        Touch(metrics, i, {v[0], v[1], v[2], v[3], v[4]});
        break;
      default:
        FAIL() << spec.name << ": " << v.size() << " labels";
    }
  }
}

TEST(MetricsCatalog, MarkdownMatchesRegisteredFamilies) {
  const std::map<std::string, CatalogRow> catalog = MarkdownCatalog();
  Metrics metrics({"catalog", 0, std::string(kRoleEmbedded)}, "1.2.3");
  TouchEveryMetric(metrics);
  const std::map<std::string, prometheus::MetricFamily> families = Collect(metrics);

  ASSERT_EQ(Keys(families), Keys(catalog)) << "METRICS.md and the registered families differ";
  for (const auto& [name, row] : catalog) {
    const prometheus::MetricFamily& family = families.at(name);
    EXPECT_EQ(TypeName(family.type), row.type) << name;
    EXPECT_EQ(LabelNames(family), row.labels) << name;
    EXPECT_FALSE(family.help.empty()) << name;
  }
}

TEST(MetricsCatalog, MarkdownMatchesCodeCatalog) {
  const std::map<std::string, CatalogRow> catalog = MarkdownCatalog();
  std::set<std::string> code_names;
  for (const MetricSpec& spec : Catalog()) {
    const std::string name(spec.name);
    code_names.insert(name);
    ASSERT_EQ(catalog.count(name), 1u) << name << " is in metrics.cc but not in METRICS.md";
    const CatalogRow& row = catalog.at(name);
    EXPECT_EQ(row.type, MetricKindName(spec.kind)) << name;
    EXPECT_EQ(row.unit, spec.unit.empty() ? "none" : std::string(spec.unit)) << name;
    std::set<std::string> labels{"job", "rank", "role"};
    for (const std::string& label : SplitList(std::string(spec.variable_labels))) labels.insert(label);
    EXPECT_EQ(row.labels, labels) << name;
    std::set<std::string> roles;
    for (std::string_view role : {kRoleCoordinator, kRoleWorker, kRoleEmbedded}) {
      if (RoleExports(role, spec.exported_by)) roles.insert(std::string(role));
    }
    EXPECT_EQ(row.exported_by, roles) << name;
  }
  EXPECT_EQ(code_names, Keys(catalog));
}

TEST(MetricsCatalog, NamesFollowPrometheusPractice) {
  for (const MetricSpec& spec : Catalog()) {
    const std::string name(spec.name);
    EXPECT_EQ(name.rfind("tessel_", 0), 0u) << name;
    const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(total, spec.kind == MetricKind::kCounter) << name << ": _total goes on counters, and only there";
    if (!spec.unit.empty()) {
      EXPECT_NE(name.find("_" + std::string(spec.unit)), std::string::npos) << name << " lacks its unit";
    }
  }
}

TEST(Metrics, EachRoleRegistersItsMetricsAtStart) {
  const std::map<std::string, CatalogRow> catalog = MarkdownCatalog();
  int32_t rank = 0;
  for (std::string_view role : {kRoleCoordinator, kRoleWorker, kRoleEmbedded}) {
    Metrics metrics({"roles", rank++, std::string(role)}, "1.2.3");
    std::set<std::string> expected;
    for (const auto& [name, row] : catalog) {
      if (row.exported_by.count(std::string(role))) expected.insert(name);
    }
    EXPECT_EQ(Keys(Collect(metrics)), expected) << "role " << role;
  }
}

TEST(Metrics, EveryMetricCarriesRankLabels) {
  Metrics metrics({"labels", 7, std::string(kRoleWorker)}, "0.1.0");
  TouchEveryMetric(metrics);
  for (const auto& [name, family] : Collect(metrics)) {
    ASSERT_FALSE(family.metric.empty()) << name;
    for (const prometheus::ClientMetric& metric : family.metric) {
      EXPECT_EQ(Label(metric, "job"), "labels") << name;
      EXPECT_EQ(Label(metric, "rank"), "7") << name;
      EXPECT_EQ(Label(metric, "role"), "worker") << name;
    }
  }
}

TEST(Metrics, SettersUpdateValues) {
  Metrics metrics({"values", 0, std::string(kRoleEmbedded)}, "0.1.0");
  metrics.ObserveStep(0.004);
  metrics.ObserveStep(2.0);
  metrics.ObserveStep(-1.0);                                      // dropped
  metrics.ObserveStep(std::numeric_limits<double>::quiet_NaN());  // dropped
  metrics.Set("tessel_loss", 0.75);
  metrics.Set("tessel_epoch", 12);
  metrics.Add("tessel_halo_exchange_bytes_total", 1000, {"sent"});
  metrics.Add("tessel_halo_exchange_bytes_total", 3000, {"received"});
  metrics.Add("tessel_halo_exchange_bytes_total", 24, {"sent"});
  metrics.Add("tessel_halo_exchange_bytes_total", -5, {"received"});  // the negative amount is dropped
  metrics.Set("tessel_partition_edge_cut", 123456);
  metrics.Set("tessel_workers_alive", 3);

  const auto families = Collect(metrics);
  const auto& build = families.at("tessel_build_info").metric.at(0);
  EXPECT_EQ(build.gauge.value, 1.0);
  EXPECT_EQ(Label(build, "version"), "0.1.0");

  const auto& step = families.at("tessel_step_duration_seconds").metric.at(0).histogram;
  EXPECT_EQ(step.sample_count, 2u);
  EXPECT_DOUBLE_EQ(step.sample_sum, 2.004);
  ASSERT_EQ(step.bucket.size(), StepDurationBuckets().size() + 1);  // + the +Inf bucket
  EXPECT_DOUBLE_EQ(step.bucket.front().upper_bound, 0.001);
  EXPECT_DOUBLE_EQ(step.bucket[StepDurationBuckets().size() - 1].upper_bound, 100.0);
  EXPECT_EQ(step.bucket[2].cumulative_count, 1u);  // le=0.005 holds the 4 ms step

  EXPECT_EQ(families.at("tessel_loss").metric.at(0).gauge.value, 0.75);
  EXPECT_EQ(families.at("tessel_epoch").metric.at(0).gauge.value, 12.0);
  EXPECT_EQ(families.at("tessel_partition_edge_cut").metric.at(0).gauge.value, 123456.0);
  EXPECT_EQ(families.at("tessel_workers_alive").metric.at(0).gauge.value, 3.0);

  std::map<std::string, double> halo;
  for (const auto& metric : families.at("tessel_halo_exchange_bytes_total").metric) {
    halo[Label(metric, "direction")] = metric.counter.value;
  }
  EXPECT_EQ(halo, (std::map<std::string, double>{{"received", 3000.0}, {"sent", 1024.0}}));
}

TEST(Metrics, SpillSettersUpdateValues) {
  Metrics metrics({"spill", 1, std::string(kRoleWorker)}, "0.1.0");
  metrics.Add("tessel_spill_written_bytes_total", 4096);
  metrics.Add("tessel_spill_read_bytes_total", 1024);
  metrics.Add("tessel_spill_wait_seconds_total", 0.5);
  metrics.Add("tessel_spill_written_bytes_total", 4096);
  metrics.Add("tessel_spill_read_bytes_total", -1);
  metrics.Add("tessel_spill_wait_seconds_total",
              std::numeric_limits<double>::quiet_NaN());  // the bad amounts are dropped
  metrics.Add("tessel_spill_fallbacks_total", 2, {"keep"});
  metrics.Add("tessel_spill_fallbacks_total", 1, {"recompute"});
  metrics.Add("tessel_spill_fallbacks_total", -3, {"keep"});  // dropped
  metrics.Set("tessel_activation_resident_bytes", 123456);
  const auto families = Collect(metrics);
  EXPECT_EQ(families.at("tessel_spill_written_bytes_total").metric.at(0).counter.value, 8192.0);
  EXPECT_EQ(families.at("tessel_spill_read_bytes_total").metric.at(0).counter.value, 1024.0);
  EXPECT_EQ(families.at("tessel_spill_wait_seconds_total").metric.at(0).counter.value, 0.5);
  EXPECT_EQ(families.at("tessel_activation_resident_bytes").metric.at(0).gauge.value, 123456.0);
  std::map<std::string, double> fallbacks;
  for (const auto& metric : families.at("tessel_spill_fallbacks_total").metric) {
    fallbacks[Label(metric, "to")] = metric.counter.value;
  }
  EXPECT_EQ(fallbacks, (std::map<std::string, double>{{"keep", 2.0}, {"recompute", 1.0}}));
  for (const MetricSpec& spec : Catalog()) {
    if (std::string_view(spec.name).find("spill") == std::string_view::npos &&
        spec.name != std::string_view("tessel_activation_resident_bytes")) {
      continue;
    }
    const auto& family = families.at(std::string(spec.name));
    EXPECT_EQ(TypeName(family.type), MetricKindName(spec.kind)) << spec.name;
    std::set<std::string> labels{"job", "rank", "role"};
    for (const std::string& label : SplitList(std::string(spec.variable_labels))) labels.insert(label);
    EXPECT_EQ(LabelNames(family), labels) << spec.name;
  }
}

TEST(Metrics, StepTimingSamplesAndStateSettersUpdateValues) {
  Metrics metrics({"more", 0, std::string(kRoleEmbedded)}, "0.1.0");
  const double before = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  metrics.ObserveStep(0.5);
  metrics.Observe("tessel_forward_duration_seconds", 0.2);
  metrics.Observe("tessel_backward_duration_seconds", -1.0);  // the negative backward is dropped
  metrics.Add("tessel_samples_total", 2048, {"tokens"});
  metrics.Add("tessel_samples_total", 2048, {"tokens"});
  metrics.Add("tessel_samples_total", -5, {"tokens"});  // dropped
  metrics.Set("tessel_learning_rate", 6e-4);
  metrics.Add("tessel_peer_wait_seconds_total", 0.125, {"allreduce"});
  metrics.Add("tessel_peer_wait_seconds_total", 0.25, {"p2p"});
  metrics.Add("tessel_peer_wait_seconds_total", std::numeric_limits<double>::quiet_NaN(), {"alltoall"});  // dropped
  metrics.Add("tessel_peer_wait_seconds_total", 1.0, {"no-such-kind"});                                   // dropped
  metrics.Add("tessel_bad_loss_total", 1);
  metrics.SetJobState("planning");
  metrics.SetJobState("training");
  metrics.SetJobState("no-such-state");  // dropped
  metrics.Set("tessel_heartbeat_age_seconds", 0.75, {"2"});
  metrics.Set("tessel_straggler_score", 1.8, {"2", "vs_fastest"});
  metrics.Set("tessel_straggler_score", std::numeric_limits<double>::quiet_NaN(),
              {"2", "vs_own_median"});  // vs_own_median unknown yet
  metrics.Set("tessel_plugin_info", 1, {"tessel-cpu", "0.1.0", "1.1", "nn.relu.fwd", "cpu"});
  metrics.Add("tessel_halo_exchange_bytes_total", 10, {"sent"});
  metrics.Add("tessel_halo_exchange_bytes_total", 20, {"received"});
  metrics.Add("tessel_spill_written_bytes_total", 30);
  metrics.Add("tessel_spill_read_bytes_total", 40);
  metrics.Add("tessel_spill_wait_seconds_total", 0.5);
  metrics.Add("tessel_pipeline_bytes_total", 64, {"sent"});
  metrics.Add("tessel_pipeline_bytes_total", -1, {"received"});  // the negative amount is dropped
  const auto families = Collect(metrics);

  const double stamp = families.at("tessel_last_step_timestamp_seconds").metric.at(0).gauge.value;
  EXPECT_GE(stamp, before);
  EXPECT_LT(stamp, before + 60);
  EXPECT_EQ(families.at("tessel_forward_duration_seconds").metric.at(0).histogram.sample_count, 1u);
  EXPECT_EQ(families.at("tessel_backward_duration_seconds").metric.at(0).histogram.sample_count, 0u);
  const auto& samples = families.at("tessel_samples_total").metric.at(0);
  EXPECT_EQ(Label(samples, "kind"), "tokens");
  EXPECT_EQ(samples.counter.value, 4096.0);
  EXPECT_EQ(families.at("tessel_learning_rate").metric.at(0).gauge.value, 6e-4);
  std::map<std::string, double> waits;
  for (const auto& m : families.at("tessel_peer_wait_seconds_total").metric) waits[Label(m, "kind")] = m.counter.value;
  EXPECT_EQ(waits, (std::map<std::string, double>{{"allreduce", 0.125}, {"alltoall", 0}, {"p2p", 0.25}}));
  EXPECT_EQ(families.at("tessel_bad_loss_total").metric.at(0).counter.value, 1.0);
  std::map<std::string, double> states;
  for (const auto& m : families.at("tessel_job_state").metric) states[Label(m, "state")] = m.gauge.value;
  EXPECT_EQ(states, (std::map<std::string, double>{
                        {"done", 0}, {"failed", 0}, {"planning", 0}, {"stopped", 0}, {"training", 1}}));
  const auto& age = families.at("tessel_heartbeat_age_seconds").metric.at(0);
  EXPECT_EQ(Label(age, "worker_rank"), "2");
  EXPECT_EQ(age.gauge.value, 0.75);
  const auto& straggler = families.at("tessel_straggler_score").metric;
  ASSERT_EQ(straggler.size(), 1u) << "the NaN score is not exported";
  EXPECT_EQ(Label(straggler[0], "kind"), "vs_fastest");
  EXPECT_EQ(straggler[0].gauge.value, 1.8);
  const auto& plugin = families.at("tessel_plugin_info").metric.at(0);
  EXPECT_EQ(Label(plugin, "plugin"), "tessel-cpu");
  EXPECT_EQ(Label(plugin, "abi"), "1.1");
  EXPECT_EQ(Label(plugin, "op"), "nn.relu.fwd");
  EXPECT_EQ(Label(plugin, "device"), "cpu");
  EXPECT_EQ(families.count("tessel_validation_loss"), 0u) << "registered only when set";
  EXPECT_EQ(families.count("tessel_memory_bytes"), 0u) << "registered only when set";

  const MetricTotals totals = metrics.Totals();
  EXPECT_EQ(totals.halo_sent_bytes, 10.0);
  EXPECT_EQ(totals.halo_received_bytes, 20.0);
  EXPECT_EQ(totals.spill_written_bytes, 30.0);
  EXPECT_EQ(totals.spill_read_bytes, 40.0);
  EXPECT_EQ(totals.spill_wait_seconds, 0.5);
  EXPECT_EQ(totals.peer_wait_seconds, 0.375);
  EXPECT_EQ(totals.pipeline_sent_bytes, 64.0);
  EXPECT_EQ(totals.pipeline_received_bytes, 0.0);
}

TEST(Metrics, MemoryBytesByKnownKindOnly) {
  Metrics metrics({"memory", 1, std::string(kRoleWorker)}, "0.1.0");
  metrics.Set("tessel_memory_bytes", 1000, {"weights"});
  metrics.Set("tessel_memory_bytes", 2000, {"optimizer"});
  metrics.Set("tessel_memory_bytes", 1500, {"weights"});    // a gauge: the latest value
  metrics.Set("tessel_memory_bytes", 7, {"no-such-kind"});  // dropped
  const auto families = Collect(metrics);
  std::map<std::string, double> kinds;
  for (const auto& m : families.at("tessel_memory_bytes").metric) kinds[Label(m, "kind")] = m.gauge.value;
  EXPECT_EQ(kinds, (std::map<std::string, double>{{"optimizer", 2000}, {"weights", 1500}}));
}

TEST(Metrics, SeriesOfTwoLabelsAreKeptApart) {
  Metrics metrics({"kernels", 1, std::string(kRoleWorker)}, "0.1.0");
  EXPECT_EQ(Collect(metrics).count("tessel_kernel_seconds_total"), 0u) << "registered only when set";
  metrics.Add("tessel_kernel_seconds_total", 0.5, {"nn.linear.fwd", "cpu"});
  metrics.Add("tessel_kernel_seconds_total", 0.25, {"nn.linear.fwd", "cpu"});
  metrics.Add("tessel_kernel_seconds_total", 0.125, {"nn.linear.fwd", "cuda"});
  metrics.Add("tessel_kernel_seconds_total", std::numeric_limits<double>::quiet_NaN(), {"nn.add", "cpu"});  // dropped
  metrics.Add("tessel_kernel_calls_total", 6, {"nn.linear.fwd", "cpu"});
  metrics.Add("tessel_kernel_calls_total", 0, {"nn.add", "cpu"});  // registered, nothing added
  metrics.Add("tessel_kernel_calls_total", 1, {"nn.add"});         // one label of two: dropped
  const auto families = Collect(metrics);
  std::map<std::string, double> seconds, calls;
  for (const auto& m : families.at("tessel_kernel_seconds_total").metric) {
    seconds[Label(m, "op") + "/" + Label(m, "device")] = m.counter.value;
  }
  for (const auto& m : families.at("tessel_kernel_calls_total").metric) {
    calls[Label(m, "op") + "/" + Label(m, "device")] = m.counter.value;
  }
  EXPECT_EQ(seconds, (std::map<std::string, double>{
                         {"nn.add/cpu", 0}, {"nn.linear.fwd/cpu", 0.75}, {"nn.linear.fwd/cuda", 0.125}}));
  EXPECT_EQ(calls, (std::map<std::string, double>{{"nn.add/cpu", 0}, {"nn.linear.fwd/cpu", 6}}));
  EXPECT_EQ(metrics.CounterValue("tessel_kernel_calls_total", {"nn.linear.fwd", "cpu"}), 6);
}

TEST(Metrics, GpuStatsPerDevice) {
  Metrics metrics({"gpu", 1, std::string(kRoleWorker)}, "0.1.0");
  EXPECT_EQ(Collect(metrics).count("tessel_gpu_memory_used_bytes"), 0u) << "registered only when set";
  metrics.Set("tessel_gpu_memory_used_bytes", 3000, {"cuda:1"});
  metrics.Set("tessel_gpu_memory_total_bytes", 8000, {"cuda:1"});
  metrics.Set("tessel_gpu_utilization_ratio", 0.25, {"cuda:1"});
  metrics.Set("tessel_gpu_memory_used_bytes", 4000, {"cuda:1"});
  metrics.Set("tessel_gpu_memory_total_bytes", 8000, {"cuda:1"});
  metrics.Set("tessel_gpu_utilization_ratio", -1, {"cuda:1"});  // the utilisation is not known: kept at 0.25
  const auto families = Collect(metrics);
  const auto& used = families.at("tessel_gpu_memory_used_bytes").metric.at(0);
  EXPECT_EQ(Label(used, "device"), "cuda:1");
  EXPECT_EQ(used.gauge.value, 4000);
  EXPECT_EQ(families.at("tessel_gpu_memory_total_bytes").metric.at(0).gauge.value, 8000);
  EXPECT_EQ(families.at("tessel_gpu_utilization_ratio").metric.at(0).gauge.value, 0.25);
}

TEST(Metrics, GatherBytesCountLocalAndRemoteRows) {
  Metrics metrics({"gather", 1, std::string(kRoleWorker)}, "0.1.0");
  metrics.Add("tessel_gather_bytes_total", 512, {"local"});
  metrics.Add("tessel_gather_bytes_total", 0, {"remote"});
  metrics.Add("tessel_gather_bytes_total", 1024, {"local"});
  metrics.Add("tessel_gather_bytes_total", 2048, {"remote"});
  metrics.Add("tessel_gather_bytes_total", -5, {"local"});
  metrics.Add("tessel_gather_bytes_total", -7, {"remote"});  // dropped
  metrics.Add("tessel_gather_rows_total", 8, {"local"});
  metrics.Add("tessel_gather_rows_total", 0, {"remote"});
  metrics.Add("tessel_gather_seconds_total", 0.25);
  metrics.Add("tessel_gather_rows_total", 16, {"local"});
  metrics.Add("tessel_gather_rows_total", 32, {"remote"});
  metrics.Add("tessel_gather_seconds_total", 0.5);
  metrics.Add("tessel_gather_rows_total", -1, {"local"});
  metrics.Add("tessel_gather_rows_total", -1, {"remote"});
  metrics.Add("tessel_gather_seconds_total", std::numeric_limits<double>::quiet_NaN());  // dropped
  const auto families = Collect(metrics);
  std::map<std::string, double> rows;
  for (const auto& metric : families.at("tessel_gather_rows_total").metric)
    rows[Label(metric, "source")] = metric.counter.value;
  EXPECT_EQ(rows, (std::map<std::string, double>{{"local", 24.0}, {"remote", 32.0}}));
  EXPECT_EQ(families.at("tessel_gather_seconds_total").metric.at(0).counter.value, 0.75);
  std::map<std::string, double> gather;
  for (const auto& metric : families.at("tessel_gather_bytes_total").metric) {
    gather[Label(metric, "source")] = metric.counter.value;
  }
  EXPECT_EQ(gather, (std::map<std::string, double>{{"local", 1536.0}, {"remote", 2048.0}}));
}

TEST(Metrics, OtherRolesRegisterOnFirstUse) {
  Metrics worker({"lazy", 1, std::string(kRoleWorker)}, "0.1.0");
  EXPECT_EQ(Collect(worker).count("tessel_workers_alive"), 0u);
  worker.Set("tessel_workers_alive", 2);
  EXPECT_EQ(Collect(worker).at("tessel_workers_alive").metric.at(0).gauge.value, 2.0);

  Metrics coordinator({"lazy", 0, std::string(kRoleCoordinator)}, "0.1.0");
  EXPECT_EQ(Collect(coordinator).count("tessel_loss"), 0u);
  coordinator.Set("tessel_loss", std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isinf(Collect(coordinator).at("tessel_loss").metric.at(0).gauge.value));
}

TEST(Metrics, ConcurrentFirstUseRegistersOnce) {
  Metrics metrics({"threads", 0, std::string(kRoleCoordinator)}, "0.1.0");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&metrics] {
      for (int i = 0; i < 1000; ++i) {
        metrics.ObserveStep(0.01);
        metrics.Add("tessel_halo_exchange_bytes_total", 1, {"sent"});
        metrics.Add("tessel_halo_exchange_bytes_total", 2, {"received"});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const auto families = Collect(metrics);
  ASSERT_EQ(families.at("tessel_step_duration_seconds").metric.size(), 1u);
  EXPECT_EQ(families.at("tessel_step_duration_seconds").metric[0].histogram.sample_count, 8000u);
  EXPECT_EQ(families.at("tessel_halo_exchange_bytes_total").metric.size(), 2u);
}

TEST(Metrics, RanksInOneProcessAreIndependent) {
  Metrics rank0({"multi", 0, std::string(kRoleWorker)}, "0.1.0");
  Metrics rank1({"multi", 1, std::string(kRoleWorker)}, "0.1.0");
  rank0.Set("tessel_loss", 1.0);
  rank1.Set("tessel_loss", 2.0);
  EXPECT_NE(rank0.registry(), rank1.registry());
  EXPECT_EQ(Collect(rank0).at("tessel_loss").metric.at(0).gauge.value, 1.0);
  EXPECT_EQ(Collect(rank1).at("tessel_loss").metric.at(0).gauge.value, 2.0);
}

}  // namespace
}  // namespace tessel::monitoring
