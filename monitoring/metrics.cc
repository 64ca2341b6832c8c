#include "monitoring/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tessel::monitoring {
namespace {

constexpr std::array kStepDurationBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
                                          0.5,   1.0,    2.5,   5.0,  10.0,  25.0, 50.0, 100.0};

// "op,device" -> {"op", "device"}.
std::vector<std::string> LabelNames(std::string_view list) {
  std::vector<std::string> names;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    names.emplace_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return names;
}

}  // namespace

std::span<const MetricSpec> Catalog() { return kMetricCatalog; }

std::string_view MetricKindName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

bool RoleExports(std::string_view role, ExportedBy exported_by) {
  switch (exported_by) {
    case ExportedBy::kEveryRank:
      return true;
    case ExportedBy::kWorkers:
      return role == kRoleWorker || role == kRoleEmbedded;
    case ExportedBy::kCoordinator:
      return role == kRoleCoordinator || role == kRoleEmbedded;
    case ExportedBy::kWhenSet:
      return false;
  }
  return false;
}

std::span<const double> StepDurationBuckets() { return kStepDurationBuckets; }

// Every series of the rank, registered on first use under one lock. Family registration goes through the
// Registry's Merge behaviour, so the series of one family (the two directions of the halo counter, say)
// share it.
struct Metrics::Series {
  Series(prometheus::Registry& registry, prometheus::Labels const_labels)
      : registry(registry), const_labels(std::move(const_labels)) {}

  // The series of row `index` with these label values; nullptr where the values do not fit the row.
  template <typename T>
  T* Get(size_t index, LabelValues values) {
    const MetricSpec& spec = kMetricCatalog[index];
    std::string key = std::to_string(index);
    for (std::string_view v : values) (key += '\x1f') += v;
    std::lock_guard<std::mutex> lock(mu);
    auto it = series.find(key);
    if (it != series.end()) return static_cast<T*>(it->second);
    const std::vector<std::string> names = LabelNames(spec.variable_labels);
    if (names.size() != values.size()) return nullptr;
    if (!spec.label_values.empty() &&
        std::find(spec.label_values.begin(), spec.label_values.end(), *values.begin()) == spec.label_values.end()) {
      return nullptr;
    }
    prometheus::Labels labels;
    size_t i = 0;
    for (std::string_view v : values) labels.emplace(names[i++], std::string(v));
    auto family = [&](auto builder) -> auto& {
      return builder.Name(std::string(spec.name)).Help(std::string(spec.help)).Labels(const_labels).Register(registry);
    };
    T* made = nullptr;
    if constexpr (std::is_same_v<T, prometheus::Histogram>) {
      made = &family(prometheus::BuildHistogram())
                  .Add(labels, prometheus::Histogram::BucketBoundaries(kStepDurationBuckets.begin(),
                                                                       kStepDurationBuckets.end()));
    } else if constexpr (std::is_same_v<T, prometheus::Counter>) {
      made = &family(prometheus::BuildCounter()).Add(labels);
    } else {
      made = &family(prometheus::BuildGauge()).Add(labels);
    }
    series.emplace(std::move(key), made);
    return made;
  }

  // Registers row `index` at zero: one series, or one per label value known up front.
  void Register(size_t index) {
    const MetricSpec& spec = kMetricCatalog[index];
    if (!spec.variable_labels.empty() && spec.label_values.empty()) return;  // its label values come later
    auto one = [&](LabelValues values) {
      switch (spec.kind) {
        case MetricKind::kCounter:
          Get<prometheus::Counter>(index, values);
          break;
        case MetricKind::kGauge:
          Get<prometheus::Gauge>(index, values);
          break;
        case MetricKind::kHistogram:
          Get<prometheus::Histogram>(index, values);
          break;
      }
    };
    if (spec.label_values.empty()) {
      one({});
    } else {
      for (std::string_view v : spec.label_values) one({v});
    }
  }

  prometheus::Registry& registry;
  const prometheus::Labels const_labels;
  std::mutex mu;
  std::map<std::string, void*, std::less<>> series;
};

Metrics::Metrics(RankLabels labels, std::string_view version)
    : labels_(std::move(labels)), registry_(std::make_shared<prometheus::Registry>()) {
  series_ = std::make_unique<Series>(
      *registry_,
      prometheus::Labels{{"job", labels_.job}, {"rank", std::to_string(labels_.rank)}, {"role", labels_.role}});
  Set("tessel_build_info", 1, {version});
  for (size_t i = 0; i < std::size(kMetricCatalog); ++i) {
    if (RoleExports(labels_.role, kMetricCatalog[i].exported_by)) series_->Register(i);
  }
}

Metrics::~Metrics() = default;

void Metrics::Add(CounterName metric, double amount, LabelValues labels) {
  prometheus::Counter* c = series_->Get<prometheus::Counter>(metric.index(), labels);
  if (c != nullptr && amount > 0) c->Increment(amount);  // false for NaN too
}

void Metrics::Set(GaugeName metric, double value, LabelValues labels) {
  if (metric.spec().drops_unknown && !(value >= 0)) return;
  prometheus::Gauge* g = series_->Get<prometheus::Gauge>(metric.index(), labels);
  if (g != nullptr) g->Set(value);
}

void Metrics::Observe(HistogramName metric, double value) {
  prometheus::Histogram* h = series_->Get<prometheus::Histogram>(metric.index(), {});
  if (h != nullptr && value >= 0) h->Observe(value);  // false for NaN too
}

double Metrics::CounterValue(CounterName metric, LabelValues labels) {
  prometheus::Counter* c = series_->Get<prometheus::Counter>(metric.index(), labels);
  return c == nullptr ? 0 : c->Value();
}

double Metrics::GaugeValue(GaugeName metric, LabelValues labels) {
  prometheus::Gauge* g = series_->Get<prometheus::Gauge>(metric.index(), labels);
  return g == nullptr ? 0 : g->Value();
}

void Metrics::ObserveStep(double seconds) {
  Observe("tessel_step_duration_seconds", seconds);
  Set("tessel_last_step_timestamp_seconds",
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}

void Metrics::SetJobState(std::string_view state) {
  if (std::find(std::begin(kJobStates), std::end(kJobStates), state) == std::end(kJobStates)) return;
  for (std::string_view s : kJobStates) Set("tessel_job_state", s == state ? 1 : 0, {s});
}

MetricTotals Metrics::Totals() {
  MetricTotals t;
  t.halo_sent_bytes = CounterValue("tessel_halo_exchange_bytes_total", {"sent"});
  t.halo_received_bytes = CounterValue("tessel_halo_exchange_bytes_total", {"received"});
  t.gather_local_bytes = CounterValue("tessel_gather_bytes_total", {"local"});
  t.gather_remote_bytes = CounterValue("tessel_gather_bytes_total", {"remote"});
  t.spill_written_bytes = CounterValue("tessel_spill_written_bytes_total");
  t.spill_read_bytes = CounterValue("tessel_spill_read_bytes_total");
  t.spill_wait_seconds = CounterValue("tessel_spill_wait_seconds_total");
  for (std::string_view kind : kPeerWaitKinds)
    t.peer_wait_seconds += CounterValue("tessel_peer_wait_seconds_total", {kind});
  t.pipeline_sent_bytes = CounterValue("tessel_pipeline_bytes_total", {"sent"});
  t.pipeline_received_bytes = CounterValue("tessel_pipeline_bytes_total", {"received"});
  t.activation_resident_bytes = GaugeValue("tessel_activation_resident_bytes");
  return t;
}

std::shared_ptr<prometheus::Registry> Metrics::registry() { return registry_; }

}  // namespace tessel::monitoring
