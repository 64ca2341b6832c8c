#include "monitoring/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <mutex>
#include <utility>

namespace tessel::monitoring {
namespace {

constexpr MetricSpec kBuildInfo{.name = "tessel_build_info",
                                .kind = MetricKind::kGauge,
                                .unit = "",
                                .variable_labels = "version",
                                .exported_by = ExportedBy::kEveryRank,
                                .help = "Always 1; the version label names the Tessel build this rank runs."};
constexpr MetricSpec kStepDuration{
    .name = "tessel_step_duration_seconds",
    .kind = MetricKind::kHistogram,
    .unit = "seconds",
    .variable_labels = "",
    .exported_by = ExportedBy::kWorkers,
    .help = "Wall time of one training step on this rank, from its first kernel to its last exchange."};
constexpr MetricSpec kLoss{.name = "tessel_loss",
                           .kind = MetricKind::kGauge,
                           .unit = "",
                           .variable_labels = "",
                           .exported_by = ExportedBy::kWorkers,
                           .help = "Training loss of the most recent step on this rank."};
constexpr MetricSpec kEpoch{.name = "tessel_epoch",
                            .kind = MetricKind::kGauge,
                            .unit = "",
                            .variable_labels = "",
                            .exported_by = ExportedBy::kWorkers,
                            .help = "Current epoch (rgnn jobs) or step (llm jobs) of this rank."};
constexpr MetricSpec kHaloBytes{.name = "tessel_halo_exchange_bytes_total",
                                .kind = MetricKind::kCounter,
                                .unit = "bytes",
                                .variable_labels = "direction",
                                .exported_by = ExportedBy::kWorkers,
                                .help = "Bytes of halo node features and gradients this rank sent or received."};
constexpr MetricSpec kGatherBytes{.name = "tessel_gather_bytes_total",
                                  .kind = MetricKind::kCounter,
                                  .unit = "bytes",
                                  .variable_labels = "source",
                                  .exported_by = ExportedBy::kWorkers,
                                  .help = "Bytes of input feature rows this rank's sampled batches gathered from its own "
                                          "feature store (local) or received from other ranks (remote)."};
constexpr MetricSpec kEdgeCut{
    .name = "tessel_partition_edge_cut",
    .kind = MetricKind::kGauge,
    .unit = "",
    .variable_labels = "",
    .exported_by = ExportedBy::kCoordinator,
    .help = "Edges whose endpoints lie in different partitions, in the current graph partition."};
constexpr MetricSpec kWorkersAlive{
    .name = "tessel_workers_alive",
    .kind = MetricKind::kGauge,
    .unit = "",
    .variable_labels = "",
    .exported_by = ExportedBy::kCoordinator,
    .help = "Workers whose heartbeat the coordinator has seen within the heartbeat timeout."};

constexpr MetricSpec kSpillWritten{.name = "tessel_spill_written_bytes_total",
                                   .kind = MetricKind::kCounter,
                                   .unit = "bytes",
                                   .variable_labels = "",
                                   .exported_by = ExportedBy::kWorkers,
                                   .help = "Bytes of saved activations this rank's spill store wrote to disk."};
constexpr MetricSpec kSpillRead{.name = "tessel_spill_read_bytes_total",
                                .kind = MetricKind::kCounter,
                                .unit = "bytes",
                                .variable_labels = "",
                                .exported_by = ExportedBy::kWorkers,
                                .help = "Bytes of saved activations this rank's spill store read back from disk."};
constexpr MetricSpec kSpillWait{
    .name = "tessel_spill_wait_seconds_total",
    .kind = MetricKind::kCounter,
    .unit = "seconds",
    .variable_labels = "",
    .exported_by = ExportedBy::kWorkers,
    .help = "Time the training thread spent blocked on the spill store (a prefetch or an offload that was late)."};
constexpr MetricSpec kSpillFallbacks{
    .name = "tessel_spill_fallbacks_total",
    .kind = MetricKind::kCounter,
    .unit = "",
    .variable_labels = "to",
    .exported_by = ExportedBy::kWorkers,
    .help = "Offloads that found the disk full or the spill budget spent and were kept in memory (to=keep) or "
            "recomputed (to=recompute) instead."};
constexpr MetricSpec kActivationResident{.name = "tessel_activation_resident_bytes",
                                         .kind = MetricKind::kGauge,
                                         .unit = "bytes",
                                         .variable_labels = "",
                                         .exported_by = ExportedBy::kWorkers,
                                         .help = "Bytes of saved activations this rank holds in memory now."};

constexpr std::array kCatalog{kBuildInfo,   kStepDuration, kLoss,          kEpoch,          kHaloBytes,
                              kGatherBytes, kEdgeCut,      kWorkersAlive, kSpillWritten,   kSpillRead,
                              kSpillWait,   kSpillFallbacks, kActivationResident};

constexpr std::array kStepDurationBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
                                          0.5,   1.0,    2.5,   5.0,  10.0,  25.0, 50.0, 100.0};

// A metric registered on first use. call_once makes concurrent first uses register it exactly once.
template <typename T>
class LazyMetric {
 public:
  template <typename Make>
  T& Get(Make&& make) {
    std::call_once(once_, [&] { metric_ = &make(); });
    return *metric_;
  }

 private:
  std::once_flag once_;
  T* metric_ = nullptr;
};

}  // namespace

std::span<const MetricSpec> Catalog() { return kCatalog; }

std::string_view MetricKindName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter: return "counter";
    case MetricKind::kGauge: return "gauge";
    case MetricKind::kHistogram: return "histogram";
  }
  return "untyped";
}

bool RoleExports(std::string_view role, ExportedBy exported_by) {
  switch (exported_by) {
    case ExportedBy::kEveryRank: return true;
    case ExportedBy::kWorkers: return role == kRoleWorker || role == kRoleEmbedded;
    case ExportedBy::kCoordinator: return role == kRoleCoordinator || role == kRoleEmbedded;
  }
  return false;
}

std::span<const double> StepDurationBuckets() { return kStepDurationBuckets; }

// The registered metrics. Family registration goes through the Registry's Merge behaviour, so the two
// directions of the halo counter share one family.
struct Metrics::Families {
  Families(prometheus::Registry& registry, prometheus::Labels const_labels)
      : registry(registry), const_labels(std::move(const_labels)) {}

  prometheus::Gauge& AddGauge(const MetricSpec& spec, const prometheus::Labels& labels = {}) {
    return prometheus::BuildGauge()
        .Name(std::string(spec.name))
        .Help(std::string(spec.help))
        .Labels(const_labels)
        .Register(registry)
        .Add(labels);
  }
  prometheus::Counter& AddCounter(const MetricSpec& spec, const prometheus::Labels& labels = {}) {
    return prometheus::BuildCounter()
        .Name(std::string(spec.name))
        .Help(std::string(spec.help))
        .Labels(const_labels)
        .Register(registry)
        .Add(labels);
  }

  prometheus::Histogram& StepDuration() {
    return step_duration.Get([this]() -> prometheus::Histogram& {
      return prometheus::BuildHistogram()
          .Name(std::string(kStepDuration.name))
          .Help(std::string(kStepDuration.help))
          .Labels(const_labels)
          .Register(registry)
          .Add({}, prometheus::Histogram::BucketBoundaries(kStepDurationBuckets.begin(), kStepDurationBuckets.end()));
    });
  }
  prometheus::Gauge& Loss() {
    return loss.Get([this]() -> prometheus::Gauge& { return AddGauge(kLoss); });
  }
  prometheus::Gauge& Epoch() {
    return epoch.Get([this]() -> prometheus::Gauge& { return AddGauge(kEpoch); });
  }
  prometheus::Counter& HaloSent() {
    return halo_sent.Get([this]() -> prometheus::Counter& { return AddCounter(kHaloBytes, {{"direction", "sent"}}); });
  }
  prometheus::Counter& HaloReceived() {
    return halo_received.Get([this]() -> prometheus::Counter& {
      return AddCounter(kHaloBytes, {{"direction", "received"}});
    });
  }
  prometheus::Counter& GatherLocal() {
    return gather_local.Get([this]() -> prometheus::Counter& { return AddCounter(kGatherBytes, {{"source", "local"}}); });
  }
  prometheus::Counter& GatherRemote() {
    return gather_remote.Get([this]() -> prometheus::Counter& { return AddCounter(kGatherBytes, {{"source", "remote"}}); });
  }
  prometheus::Gauge& EdgeCut() {
    return edge_cut.Get([this]() -> prometheus::Gauge& { return AddGauge(kEdgeCut); });
  }
  prometheus::Gauge& WorkersAlive() {
    return workers_alive.Get([this]() -> prometheus::Gauge& { return AddGauge(kWorkersAlive); });
  }

  prometheus::Counter& SpillWritten() {
    return spill_written.Get([this]() -> prometheus::Counter& { return AddCounter(kSpillWritten); });
  }
  prometheus::Counter& SpillRead() {
    return spill_read.Get([this]() -> prometheus::Counter& { return AddCounter(kSpillRead); });
  }
  prometheus::Counter& SpillWait() {
    return spill_wait.Get([this]() -> prometheus::Counter& { return AddCounter(kSpillWait); });
  }
  prometheus::Counter& SpillFallbacks(Metrics::SpillFallback to) {
    if (to == Metrics::SpillFallback::kKeep) {
      return fallback_keep.Get([this]() -> prometheus::Counter& { return AddCounter(kSpillFallbacks, {{"to", "keep"}}); });
    }
    return fallback_recompute.Get(
        [this]() -> prometheus::Counter& { return AddCounter(kSpillFallbacks, {{"to", "recompute"}}); });
  }
  prometheus::Gauge& ActivationResident() {
    return activation_resident.Get([this]() -> prometheus::Gauge& { return AddGauge(kActivationResident); });
  }

  prometheus::Registry& registry;
  const prometheus::Labels const_labels;
  LazyMetric<prometheus::Histogram> step_duration;
  LazyMetric<prometheus::Gauge> loss;
  LazyMetric<prometheus::Gauge> epoch;
  LazyMetric<prometheus::Counter> halo_sent;
  LazyMetric<prometheus::Counter> halo_received;
  LazyMetric<prometheus::Counter> gather_local;
  LazyMetric<prometheus::Counter> gather_remote;
  LazyMetric<prometheus::Gauge> edge_cut;
  LazyMetric<prometheus::Gauge> workers_alive;
  LazyMetric<prometheus::Counter> spill_written;
  LazyMetric<prometheus::Counter> spill_read;
  LazyMetric<prometheus::Counter> spill_wait;
  LazyMetric<prometheus::Counter> fallback_keep;
  LazyMetric<prometheus::Counter> fallback_recompute;
  LazyMetric<prometheus::Gauge> activation_resident;
};

Metrics::Metrics(RankLabels labels, std::string_view version)
    : labels_(std::move(labels)), registry_(std::make_shared<prometheus::Registry>()) {
  families_ = std::make_unique<Families>(
      *registry_,
      prometheus::Labels{{"job", labels_.job}, {"rank", std::to_string(labels_.rank)}, {"role", labels_.role}});
  families_->AddGauge(kBuildInfo, {{"version", std::string(version)}}).Set(1);
  if (RoleExports(labels_.role, ExportedBy::kWorkers)) {
    families_->StepDuration();
    families_->Loss();
    families_->Epoch();
    families_->HaloSent();
    families_->HaloReceived();
    families_->GatherLocal();
    families_->GatherRemote();
    families_->SpillWritten();
    families_->SpillRead();
    families_->SpillWait();
    families_->SpillFallbacks(SpillFallback::kRecompute);
    families_->ActivationResident();
  }
  if (RoleExports(labels_.role, ExportedBy::kCoordinator)) {
    families_->EdgeCut();
    families_->WorkersAlive();
  }
}

Metrics::~Metrics() = default;

void Metrics::ObserveStep(double seconds) {
  prometheus::Histogram& histogram = families_->StepDuration();
  if (seconds >= 0) histogram.Observe(seconds);  // false for NaN too
}

void Metrics::SetLoss(double loss) { families_->Loss().Set(loss); }

void Metrics::SetEpoch(int64_t epoch) { families_->Epoch().Set(static_cast<double>(epoch)); }

void Metrics::AddHaloBytes(int64_t sent, int64_t received) {
  prometheus::Counter& sent_total = families_->HaloSent();
  prometheus::Counter& received_total = families_->HaloReceived();
  if (sent > 0) sent_total.Increment(static_cast<double>(sent));
  if (received > 0) received_total.Increment(static_cast<double>(received));
}

void Metrics::AddGatherBytes(int64_t local, int64_t remote) {
  prometheus::Counter& local_total = families_->GatherLocal();
  prometheus::Counter& remote_total = families_->GatherRemote();
  if (local > 0) local_total.Increment(static_cast<double>(local));
  if (remote > 0) remote_total.Increment(static_cast<double>(remote));
}

void Metrics::SetPartitionEdgeCut(int64_t cut) { families_->EdgeCut().Set(static_cast<double>(cut)); }

void Metrics::SetWorkersAlive(int64_t n) { families_->WorkersAlive().Set(static_cast<double>(n)); }

void Metrics::AddSpillIo(int64_t written_bytes, int64_t read_bytes, double wait_seconds) {
  prometheus::Counter& written = families_->SpillWritten();
  prometheus::Counter& read = families_->SpillRead();
  prometheus::Counter& wait = families_->SpillWait();
  if (written_bytes > 0) written.Increment(static_cast<double>(written_bytes));
  if (read_bytes > 0) read.Increment(static_cast<double>(read_bytes));
  if (wait_seconds > 0) wait.Increment(wait_seconds);  // false for NaN too
}

void Metrics::AddSpillFallbacks(SpillFallback to, int64_t n) {
  prometheus::Counter& fallbacks = families_->SpillFallbacks(to);
  if (n > 0) fallbacks.Increment(static_cast<double>(n));
}

void Metrics::SetActivationResidentBytes(int64_t bytes) {
  families_->ActivationResident().Set(static_cast<double>(bytes));
}

std::shared_ptr<prometheus::Registry> Metrics::registry() { return registry_; }

}  // namespace tessel::monitoring
