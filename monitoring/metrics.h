// The per-rank Metrics object that owns a prometheus-cpp Registry, over the rows of
// monitoring/metric_catalog.h (the one declaration of each metric; monitoring/METRICS.md documents it and a
// unit test checks that the two agree).
//
// No globals: each rank (normally each process; tests may run several ranks in one process) creates its own
// Metrics and passes it explicitly to whoever updates it and to the Exporter that serves it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "monitoring/metric_catalog.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace tessel::monitoring {

// The role label values.
inline constexpr std::string_view kRoleCoordinator = "coordinator";
inline constexpr std::string_view kRoleWorker = "worker";
inline constexpr std::string_view kRoleEmbedded = "embedded";  // one process plays both roles

// Constant labels carried by every metric of one rank.
struct RankLabels {
  std::string job;   // the job name from the job file
  int32_t rank = 0;  // MPI rank
  std::string role;  // kRoleCoordinator | kRoleWorker | kRoleEmbedded
};

// Every metric Tessel exports: kMetricCatalog.
std::span<const MetricSpec> Catalog();

// "counter" | "gauge" | "histogram": the Prometheus TYPE names, as METRICS.md writes them.
std::string_view MetricKindName(MetricKind kind);

// True when a rank with this role registers metrics of `exported_by` at construction. An unknown role exports only
// kEveryRank metrics up front.
bool RoleExports(std::string_view role, ExportedBy exported_by);

// Upper bounds (seconds) of the duration histograms' buckets (step, forward, backward): 1 ms to 100 s, 1-2.5-5
// steps.
std::span<const double> StepDurationBuckets();

// A rank's running totals, read back for RUN_DIR/metrics.csv (the differences of two snapshots make a step's row).
struct MetricTotals {
  double halo_sent_bytes = 0, halo_received_bytes = 0;
  double gather_local_bytes = 0, gather_remote_bytes = 0;
  double spill_written_bytes = 0, spill_read_bytes = 0, spill_wait_seconds = 0;
  double peer_wait_seconds = 0;
  double pipeline_sent_bytes = 0, pipeline_received_bytes = 0;
  double activation_resident_bytes = 0;
};

// Label values in the order of the row's variable_labels.
using LabelValues = std::initializer_list<std::string_view>;

// Owns a prometheus::Registry holding every Tessel metric family of one rank, each with the constant labels
// job, rank and role.
//
// The metrics a rank's role exports (see ExportedBy) are registered at zero by the constructor, with each of
// their label_values, so rate() sees their first increment. Any other metric still works: its series is
// registered on first use (the coordinator of a test run may observe steps, for instance).
//
// Thread safety: every method may be called from any thread, concurrently.
// Failure: nothing fails. Values that would corrupt a metric are dropped (MetricSpec::drops_unknown), as is a
// label value not among a row's label_values, or a call with the wrong number of label values.
class Metrics {
 public:
  // `version` becomes the version label of tessel_build_info.
  explicit Metrics(RankLabels labels, std::string_view version);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A counter grows by `amount` (non-positive and NaN amounts are dropped; the series is registered still).
  void Add(CounterName metric, double amount, LabelValues labels = {});
  // A gauge is set to `value`.
  void Set(GaugeName metric, double value, LabelValues labels = {});
  // A histogram observes `value` (negative and NaN values are dropped).
  void Observe(HistogramName metric, double value);
  // A series' value now (0 for one never set).
  double CounterValue(CounterName metric, LabelValues labels = {});
  double GaugeValue(GaugeName metric, LabelValues labels = {});

  // tessel_step_duration_seconds, and tessel_last_step_timestamp_seconds set to now (the Unix time).
  void ObserveStep(double seconds);
  // tessel_job_state{state}: 1 for `state` (one of kJobStates), 0 for the others. Unknown states are dropped.
  void SetJobState(std::string_view state);
  // The running totals of this rank's counters and byte gauges.
  MetricTotals Totals();

  // The registry to serve or collect. Shared: it stays valid for as long as any holder keeps it.
  std::shared_ptr<prometheus::Registry> registry();
  const RankLabels& labels() const { return labels_; }

 private:
  struct Series;
  RankLabels labels_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Series> series_;
};

}  // namespace tessel::monitoring
