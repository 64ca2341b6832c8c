#include "monitoring/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

#include "core/logging.h"

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
                                  .help =
                                      "Bytes of input feature rows this rank's sampled batches gathered from its own "
                                      "feature store (local) or received from other ranks (remote)."};
constexpr MetricSpec kGatherRows{.name = "tessel_gather_rows_total",
                                 .kind = MetricKind::kCounter,
                                 .unit = "",
                                 .variable_labels = "source",
                                 .exported_by = ExportedBy::kWorkers,
                                 .help =
                                     "Input feature rows this rank's sampled batches gathered from its own feature "
                                     "store (local) or received from other ranks (remote)."};
constexpr MetricSpec kGatherSeconds{.name = "tessel_gather_seconds_total",
                                    .kind = MetricKind::kCounter,
                                    .unit = "seconds",
                                    .variable_labels = "",
                                    .exported_by = ExportedBy::kWorkers,
                                    .help =
                                        "Time this rank's sampled batches spent fetching their feature rows, local and "
                                        "remote (on the prefetch thread when batches are prefetched)."};
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
    .help =
        "Offloads that found the disk full or the spill budget spent and were kept in memory (to=keep) or "
        "recomputed (to=recompute) instead."};
constexpr MetricSpec kActivationResident{.name = "tessel_activation_resident_bytes",
                                         .kind = MetricKind::kGauge,
                                         .unit = "bytes",
                                         .variable_labels = "",
                                         .exported_by = ExportedBy::kWorkers,
                                         .help = "Bytes of saved activations this rank holds in memory now."};

constexpr MetricSpec kLastStep{
    .name = "tessel_last_step_timestamp_seconds",
    .kind = MetricKind::kGauge,
    .unit = "seconds",
    .variable_labels = "",
    .exported_by = ExportedBy::kWorkers,
    .help = "Unix time at which this rank last finished a training step; 0 before the first."};
constexpr MetricSpec kForward{
    .name = "tessel_forward_duration_seconds",
    .kind = MetricKind::kHistogram,
    .unit = "seconds",
    .variable_labels = "",
    .exported_by = ExportedBy::kWorkers,
    .help = "Forward time of one training step on this rank (halo and pipeline waits included)."};
constexpr MetricSpec kBackward{.name = "tessel_backward_duration_seconds",
                               .kind = MetricKind::kHistogram,
                               .unit = "seconds",
                               .variable_labels = "",
                               .exported_by = ExportedBy::kWorkers,
                               .help = "Backward and optimizer time of one training step on this rank."};
constexpr MetricSpec kSamples{.name = "tessel_samples_total",
                              .kind = MetricKind::kCounter,
                              .unit = "",
                              .variable_labels = "kind",
                              .exported_by = ExportedBy::kWhenSet,
                              .help =
                                  "Samples of the job's global batches trained so far, counted on every worker: "
                                  "labelled training nodes (kind=nodes) or tokens (kind=tokens)."};
constexpr MetricSpec kLearningRate{.name = "tessel_learning_rate",
                                   .kind = MetricKind::kGauge,
                                   .unit = "",
                                   .variable_labels = "",
                                   .exported_by = ExportedBy::kWorkers,
                                   .help = "Learning rate of the most recent step on this rank."};
constexpr MetricSpec kValLoss{.name = "tessel_validation_loss",
                              .kind = MetricKind::kGauge,
                              .unit = "",
                              .variable_labels = "",
                              .exported_by = ExportedBy::kWhenSet,
                              .help = "Validation loss of the most recent validation on this rank."};
constexpr MetricSpec kPipelineBytes{.name = "tessel_pipeline_bytes_total",
                                    .kind = MetricKind::kCounter,
                                    .unit = "bytes",
                                    .variable_labels = "direction",
                                    .exported_by = ExportedBy::kWorkers,
                                    .help =
                                        "Bytes of activations and gradients this pipeline stage sent to or received "
                                        "from its neighbouring stages."};
constexpr MetricSpec kPeerWait{
    .name = "tessel_peer_wait_seconds_total",
    .kind = MetricKind::kCounter,
    .unit = "seconds",
    .variable_labels = "kind",
    .exported_by = ExportedBy::kWorkers,
    .help =
        "Time this rank spent blocked in communication with its peers, apart from computing, by what it "
        "waited in: allreduce (gradient and loss sums), alltoall (halo and remote feature rows), p2p "
        "(pipeline activations and gradients)."};
constexpr MetricSpec kKernelSeconds{.name = "tessel_kernel_seconds_total",
                                    .kind = MetricKind::kCounter,
                                    .unit = "seconds",
                                    .variable_labels = "op,device",
                                    .exported_by = ExportedBy::kWhenSet,
                                    .help =
                                        "Time of the kernel calls timed on sampled steps "
                                        "(metrics.kernel_sample_every), by op and device."};
constexpr MetricSpec kKernelCalls{.name = "tessel_kernel_calls_total",
                                  .kind = MetricKind::kCounter,
                                  .unit = "",
                                  .variable_labels = "op,device",
                                  .exported_by = ExportedBy::kWhenSet,
                                  .help = "Kernel calls timed on sampled steps, by op and device."};
constexpr MetricSpec kGpuMemoryUsed{.name = "tessel_gpu_memory_used_bytes",
                                    .kind = MetricKind::kGauge,
                                    .unit = "bytes",
                                    .variable_labels = "device",
                                    .exported_by = ExportedBy::kWhenSet,
                                    .help = "Memory used on this rank's GPU, every process's (NVML)."};
constexpr MetricSpec kGpuMemoryTotal{.name = "tessel_gpu_memory_total_bytes",
                                     .kind = MetricKind::kGauge,
                                     .unit = "bytes",
                                     .variable_labels = "device",
                                     .exported_by = ExportedBy::kWhenSet,
                                     .help = "Memory of this rank's GPU (NVML)."};
constexpr MetricSpec kGpuUtilization{.name = "tessel_gpu_utilization_ratio",
                                     .kind = MetricKind::kGauge,
                                     .unit = "",
                                     .variable_labels = "device",
                                     .exported_by = ExportedBy::kWhenSet,
                                     .help =
                                         "Fraction of the last sample period in which a kernel ran on this rank's "
                                         "GPU (NVML's utilization.gpu / 100)."};
constexpr MetricSpec kBadLoss{.name = "tessel_bad_loss_total",
                              .kind = MetricKind::kCounter,
                              .unit = "",
                              .variable_labels = "",
                              .exported_by = ExportedBy::kEveryRank,
                              .help =
                                  "Steps whose loss was NaN, infinite or exploded (train.on_bad_loss): counted by "
                                  "the workers, and by the coordinator when a worker stops the job for one."};
constexpr MetricSpec kMemory{.name = "tessel_memory_bytes",
                             .kind = MetricKind::kGauge,
                             .unit = "bytes",
                             .variable_labels = "kind",
                             .exported_by = ExportedBy::kWhenSet,
                             .help =
                                 "Bytes this rank holds, by kind: weights, gradients, optimizer state, "
                                 "activations, kernel workspace (peak), graph (features, labels, masks, adjacency)."};
constexpr MetricSpec kResident{.name = "tessel_resident_memory_bytes",
                               .kind = MetricKind::kGauge,
                               .unit = "bytes",
                               .variable_labels = "",
                               .exported_by = ExportedBy::kEveryRank,
                               .help = "Resident memory of this rank's process."};
constexpr MetricSpec kPluginInfo{.name = "tessel_plugin_info",
                                 .kind = MetricKind::kGauge,
                                 .unit = "",
                                 .variable_labels = "plugin,version,abi,op,device",
                                 .exported_by = ExportedBy::kWhenSet,
                                 .help =
                                     "Always 1, one series per op and device this rank's plugins offer: the plugin "
                                     "that serves it (the only one, or the one plugins.prefer chose), its version "
                                     "and ABI."};
constexpr MetricSpec kImbalance{
    .name = "tessel_partition_imbalance",
    .kind = MetricKind::kGauge,
    .unit = "",
    .variable_labels = "",
    .exported_by = ExportedBy::kCoordinator,
    .help =
        "The graph partition's worst imbalance over its balance constraints (a partition's weight over "
        "the mean); 1 is balanced."};
constexpr MetricSpec kJobState{.name = "tessel_job_state",
                               .kind = MetricKind::kGauge,
                               .unit = "",
                               .variable_labels = "state",
                               .exported_by = ExportedBy::kCoordinator,
                               .help =
                                   "1 for the job's current state (planning, training, done, failed, stopped), 0 "
                                   "for the others."};
constexpr MetricSpec kHeartbeatAge{.name = "tessel_heartbeat_age_seconds",
                                   .kind = MetricKind::kGauge,
                                   .unit = "seconds",
                                   .variable_labels = "worker_rank",
                                   .exported_by = ExportedBy::kWhenSet,
                                   .help = "Seconds since the coordinator last heard from the worker."};
constexpr MetricSpec kStraggler{
    .name = "tessel_straggler_score",
    .kind = MetricKind::kGauge,
    .unit = "",
    .variable_labels = "worker_rank,kind",
    .exported_by = ExportedBy::kWhenSet,
    .help =
        "The worker's median compute time over the last straggler window against the fastest worker's "
        "(kind=vs_fastest) and against its own earlier median (kind=vs_own_median)."};

constexpr std::array kCatalog{
    kBuildInfo,     kStepDuration,  kForward,      kBackward,      kLastStep,    kLoss,           kBadLoss,
    kValLoss,       kLearningRate,  kEpoch,        kSamples,       kHaloBytes,   kGatherBytes,    kGatherRows,
    kGatherSeconds, kPipelineBytes, kPeerWait,     kEdgeCut,       kImbalance,   kWorkersAlive,   kHeartbeatAge,
    kJobState,      kStraggler,     kSpillWritten, kSpillRead,     kSpillWait,   kSpillFallbacks, kActivationResident,
    kMemory,        kResident,      kPluginInfo,   kKernelSeconds, kKernelCalls, kGpuMemoryUsed,  kGpuMemoryTotal,
    kGpuUtilization};

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

// The registered metrics. Family registration goes through the Registry's Merge behaviour, so the series of
// one family (the two directions of the halo counter, say) share it.
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
  prometheus::Histogram& AddHistogram(const MetricSpec& spec) {
    return prometheus::BuildHistogram()
        .Name(std::string(spec.name))
        .Help(std::string(spec.help))
        .Labels(const_labels)
        .Register(registry)
        .Add({}, prometheus::Histogram::BucketBoundaries(kStepDurationBuckets.begin(), kStepDurationBuckets.end()));
  }

  // A series registered on first use, cached for every later use.
  template <typename T, typename Add>
  static T& Lazy(LazyMetric<T>& slot, Add&& add) {
    return slot.Get(std::forward<Add>(add));
  }
  prometheus::Histogram& StepDuration() {
    return Lazy(
        step_duration, [this]() -> auto& { return AddHistogram(kStepDuration); });
  }
  prometheus::Histogram& Forward() {
    return Lazy(
        forward, [this]() -> auto& { return AddHistogram(kForward); });
  }
  prometheus::Histogram& Backward() {
    return Lazy(
        backward, [this]() -> auto& { return AddHistogram(kBackward); });
  }
  prometheus::Gauge& LastStep() {
    return Lazy(
        last_step, [this]() -> auto& { return AddGauge(kLastStep); });
  }
  prometheus::Gauge& Loss() {
    return Lazy(
        loss, [this]() -> auto& { return AddGauge(kLoss); });
  }
  prometheus::Gauge& ValLoss() {
    return Lazy(
        val_loss, [this]() -> auto& { return AddGauge(kValLoss); });
  }
  prometheus::Gauge& LearningRate() {
    return Lazy(
        lr, [this]() -> auto& { return AddGauge(kLearningRate); });
  }
  prometheus::Gauge& Epoch() {
    return Lazy(
        epoch, [this]() -> auto& { return AddGauge(kEpoch); });
  }
  prometheus::Counter& HaloSent() {
    return Lazy(
        halo_sent, [this]() -> auto& {
          return AddCounter(kHaloBytes, {{"direction", "sent"}});
        });
  }
  prometheus::Counter& HaloReceived() {
    return Lazy(
        halo_received, [this]() -> auto& {
          return AddCounter(kHaloBytes, {{"direction", "received"}});
        });
  }
  prometheus::Counter& GatherLocal() {
    return Lazy(
        gather_local, [this]() -> auto& {
          return AddCounter(kGatherBytes, {{"source", "local"}});
        });
  }
  prometheus::Counter& GatherRemote() {
    return Lazy(
        gather_remote, [this]() -> auto& {
          return AddCounter(kGatherBytes, {{"source", "remote"}});
        });
  }
  prometheus::Counter& GatherRowsLocal() {
    return Lazy(
        gather_rows_local, [this]() -> auto& {
          return AddCounter(kGatherRows, {{"source", "local"}});
        });
  }
  prometheus::Counter& GatherRowsRemote() {
    return Lazy(
        gather_rows_remote, [this]() -> auto& {
          return AddCounter(kGatherRows, {{"source", "remote"}});
        });
  }
  prometheus::Counter& GatherSeconds() {
    return Lazy(
        gather_seconds, [this]() -> auto& { return AddCounter(kGatherSeconds); });
  }
  prometheus::Counter& BadLoss() {
    return Lazy(
        bad_loss, [this]() -> auto& { return AddCounter(kBadLoss); });
  }
  prometheus::Counter& PipelineSent() {
    return Lazy(
        pipeline_sent, [this]() -> auto& {
          return AddCounter(kPipelineBytes, {{"direction", "sent"}});
        });
  }
  prometheus::Counter& PipelineReceived() {
    return Lazy(
        pipeline_received, [this]() -> auto& {
          return AddCounter(kPipelineBytes, {{"direction", "received"}});
        });
  }
  std::array<prometheus::Counter*, std::size(kPeerWaitKinds)>& PeerWaits() {
    std::call_once(peer_waits_once, [this] {
      for (size_t i = 0; i < std::size(kPeerWaitKinds); ++i) {
        peer_waits[i] = &AddCounter(kPeerWait, {{"kind", std::string(kPeerWaitKinds[i])}});
      }
    });
    return peer_waits;
  }
  prometheus::Gauge& EdgeCut() {
    return Lazy(
        edge_cut, [this]() -> auto& { return AddGauge(kEdgeCut); });
  }
  prometheus::Gauge& Imbalance() {
    return Lazy(
        imbalance, [this]() -> auto& { return AddGauge(kImbalance); });
  }
  prometheus::Gauge& WorkersAlive() {
    return Lazy(
        workers_alive, [this]() -> auto& { return AddGauge(kWorkersAlive); });
  }
  prometheus::Gauge& Resident() {
    return Lazy(
        resident, [this]() -> auto& { return AddGauge(kResident); });
  }
  prometheus::Counter& SpillWritten() {
    return Lazy(
        spill_written, [this]() -> auto& { return AddCounter(kSpillWritten); });
  }
  prometheus::Counter& SpillRead() {
    return Lazy(
        spill_read, [this]() -> auto& { return AddCounter(kSpillRead); });
  }
  prometheus::Counter& SpillWait() {
    return Lazy(
        spill_wait, [this]() -> auto& { return AddCounter(kSpillWait); });
  }
  prometheus::Counter& SpillFallbacks(Metrics::SpillFallback to) {
    if (to == Metrics::SpillFallback::kKeep) {
      return Lazy(
          fallback_keep, [this]() -> auto& {
            return AddCounter(kSpillFallbacks, {{"to", "keep"}});
          });
    }
    return Lazy(
        fallback_recompute, [this]() -> auto& {
          return AddCounter(kSpillFallbacks, {{"to", "recompute"}});
        });
  }
  prometheus::Gauge& ActivationResident() {
    return Lazy(
        activation_resident, [this]() -> auto& { return AddGauge(kActivationResident); });
  }
  std::array<prometheus::Gauge*, std::size(kJobStates)>& JobStates() {
    std::call_once(job_states_once, [this] {
      for (size_t i = 0; i < std::size(kJobStates); ++i) {
        job_states[i] = &AddGauge(kJobState, {{"state", std::string(kJobStates[i])}});
      }
    });
    return job_states;
  }

  // Series whose label values are known only when set: looked up under a lock, by the coordinator once a
  // heartbeat or a straggler window, by a worker once a step (samples) or once (plugins).
  template <typename T>
  T& Keyed(const std::string& key, const std::function<T&()>& add) {
    std::lock_guard<std::mutex> lock(keyed_mu);
    auto [it, fresh] = keyed.emplace(key, nullptr);
    if (fresh) it->second = &add();
    return *static_cast<T*>(it->second);
  }

  prometheus::Registry& registry;
  const prometheus::Labels const_labels;
  LazyMetric<prometheus::Histogram> step_duration, forward, backward;
  LazyMetric<prometheus::Gauge> last_step, loss, val_loss, lr, epoch, edge_cut, imbalance, workers_alive, resident,
      activation_resident;
  LazyMetric<prometheus::Counter> bad_loss, halo_sent, halo_received, pipeline_sent, pipeline_received, gather_local,
      gather_remote, gather_rows_local, gather_rows_remote, gather_seconds, spill_written, spill_read, spill_wait,
      fallback_keep, fallback_recompute;
  std::once_flag peer_waits_once;
  std::array<prometheus::Counter*, std::size(kPeerWaitKinds)> peer_waits{};
  std::once_flag job_states_once;
  std::array<prometheus::Gauge*, std::size(kJobStates)> job_states{};
  std::mutex keyed_mu;
  std::map<std::string, void*> keyed;
};

Metrics::Metrics(RankLabels labels, std::string_view version)
    : labels_(std::move(labels)), registry_(std::make_shared<prometheus::Registry>()) {
  families_ = std::make_unique<Families>(
      *registry_,
      prometheus::Labels{{"job", labels_.job}, {"rank", std::to_string(labels_.rank)}, {"role", labels_.role}});
  families_->AddGauge(kBuildInfo, {{"version", std::string(version)}}).Set(1);
  families_->Resident();
  families_->BadLoss();
  if (RoleExports(labels_.role, ExportedBy::kWorkers)) {
    families_->StepDuration();
    families_->Forward();
    families_->Backward();
    families_->LastStep();
    families_->Loss();
    families_->LearningRate();
    families_->Epoch();
    families_->HaloSent();
    families_->HaloReceived();
    families_->GatherLocal();
    families_->GatherRemote();
    families_->GatherRowsLocal();
    families_->GatherRowsRemote();
    families_->GatherSeconds();
    families_->PeerWaits();
    families_->PipelineSent();
    families_->PipelineReceived();
    families_->SpillWritten();
    families_->SpillRead();
    families_->SpillWait();
    families_->SpillFallbacks(SpillFallback::kRecompute);
    families_->ActivationResident();
  }
  if (RoleExports(labels_.role, ExportedBy::kCoordinator)) {
    families_->EdgeCut();
    families_->Imbalance();
    families_->WorkersAlive();
    families_->JobStates();
  }
}

Metrics::~Metrics() = default;

void Metrics::ObserveStep(double seconds) {
  prometheus::Histogram& histogram = families_->StepDuration();
  prometheus::Gauge& last = families_->LastStep();
  if (seconds >= 0) histogram.Observe(seconds);  // false for NaN too
  last.Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}

void Metrics::ObserveForwardBackward(double forward_seconds, double backward_seconds) {
  prometheus::Histogram& forward = families_->Forward();
  prometheus::Histogram& backward = families_->Backward();
  if (forward_seconds >= 0) forward.Observe(forward_seconds);
  if (backward_seconds >= 0) backward.Observe(backward_seconds);
}

void Metrics::AddSamples(std::string_view kind, int64_t n) {
  prometheus::Counter& samples =
      families_->Keyed<prometheus::Counter>(StrCat("samples/", kind), [&]() -> prometheus::Counter& {
        return families_->AddCounter(kSamples, {{"kind", std::string(kind)}});
      });
  if (n > 0) samples.Increment(static_cast<double>(n));
}

void Metrics::SetLearningRate(double lr) { families_->LearningRate().Set(lr); }

void Metrics::SetValidationLoss(double loss) { families_->ValLoss().Set(loss); }

void Metrics::AddPipelineBytes(int64_t sent, int64_t received) {
  prometheus::Counter& sent_total = families_->PipelineSent();
  prometheus::Counter& received_total = families_->PipelineReceived();
  if (sent > 0) sent_total.Increment(static_cast<double>(sent));
  if (received > 0) received_total.Increment(static_cast<double>(received));
}

void Metrics::AddPeerWait(std::string_view kind, double seconds) {
  auto& waits = families_->PeerWaits();
  const auto* it = std::find(std::begin(kPeerWaitKinds), std::end(kPeerWaitKinds), kind);
  if (it == std::end(kPeerWaitKinds)) return;
  if (seconds > 0) waits[static_cast<size_t>(it - std::begin(kPeerWaitKinds))]->Increment(seconds);  // false for NaN
}

void Metrics::AddKernelTime(std::string_view op, std::string_view device, double seconds, int64_t calls) {
  if (calls <= 0 || !(seconds >= 0)) return;
  const prometheus::Labels labels{{"op", std::string(op)}, {"device", std::string(device)}};
  const std::string key = StrCat(op, "/", device);
  families_
      ->Keyed<prometheus::Counter>(
          StrCat("kernel_seconds/", key),
          [&]() -> prometheus::Counter& { return families_->AddCounter(kKernelSeconds, labels); })
      .Increment(seconds);
  families_
      ->Keyed<prometheus::Counter>(
          StrCat("kernel_calls/", key),
          [&]() -> prometheus::Counter& { return families_->AddCounter(kKernelCalls, labels); })
      .Increment(static_cast<double>(calls));
}

void Metrics::SetGpuStats(std::string_view device, int64_t memory_used_bytes, int64_t memory_total_bytes,
                          double utilization) {
  const prometheus::Labels labels{{"device", std::string(device)}};
  auto set = [&](const MetricSpec& spec, double value) {
    if (!(value >= 0)) return;
    families_
        ->Keyed<prometheus::Gauge>(StrCat(spec.name, "/", device),
                                   [&]() -> prometheus::Gauge& { return families_->AddGauge(spec, labels); })
        .Set(value);
  };
  set(kGpuMemoryUsed, static_cast<double>(memory_used_bytes));
  set(kGpuMemoryTotal, static_cast<double>(memory_total_bytes));
  set(kGpuUtilization, utilization);
}

void Metrics::AddBadLoss() { families_->BadLoss().Increment(); }

void Metrics::SetMemoryBytes(std::string_view kind, int64_t bytes) {
  if (std::find(std::begin(kMemoryKinds), std::end(kMemoryKinds), kind) == std::end(kMemoryKinds)) return;
  families_
      ->Keyed<prometheus::Gauge>(StrCat("memory/", kind),
                                 [&]() -> prometheus::Gauge& {
                                   return families_->AddGauge(kMemory, {{"kind", std::string(kind)}});
                                 })
      .Set(static_cast<double>(bytes));
}

void Metrics::SetResidentMemoryBytes(int64_t bytes) { families_->Resident().Set(static_cast<double>(bytes)); }

void Metrics::SetPluginInfo(std::string_view plugin, std::string_view version, std::string_view abi,
                            std::string_view op, std::string_view device) {
  families_
      ->Keyed<prometheus::Gauge>(StrCat("plugin/", plugin, "/", version, "/", abi, "/", op, "/", device),
                                 [&]() -> prometheus::Gauge& {
                                   return families_->AddGauge(kPluginInfo, {{"plugin", std::string(plugin)},
                                                                            {"version", std::string(version)},
                                                                            {"abi", std::string(abi)},
                                                                            {"op", std::string(op)},
                                                                            {"device", std::string(device)}});
                                 })
      .Set(1);
}

void Metrics::SetLoss(double loss) { families_->Loss().Set(loss); }

void Metrics::SetEpoch(int64_t epoch) { families_->Epoch().Set(static_cast<double>(epoch)); }

void Metrics::AddHaloBytes(int64_t sent, int64_t received) {
  prometheus::Counter& sent_total = families_->HaloSent();
  prometheus::Counter& received_total = families_->HaloReceived();
  if (sent > 0) sent_total.Increment(static_cast<double>(sent));
  if (received > 0) received_total.Increment(static_cast<double>(received));
}

void Metrics::AddGatherRows(int64_t local, int64_t remote, double seconds) {
  prometheus::Counter& local_total = families_->GatherRowsLocal();
  prometheus::Counter& remote_total = families_->GatherRowsRemote();
  prometheus::Counter& time_total = families_->GatherSeconds();
  if (local > 0) local_total.Increment(static_cast<double>(local));
  if (remote > 0) remote_total.Increment(static_cast<double>(remote));
  if (seconds > 0) time_total.Increment(seconds);  // false for NaN too
}

void Metrics::AddGatherBytes(int64_t local, int64_t remote) {
  prometheus::Counter& local_total = families_->GatherLocal();
  prometheus::Counter& remote_total = families_->GatherRemote();
  if (local > 0) local_total.Increment(static_cast<double>(local));
  if (remote > 0) remote_total.Increment(static_cast<double>(remote));
}

void Metrics::SetPartitionEdgeCut(int64_t cut) { families_->EdgeCut().Set(static_cast<double>(cut)); }

void Metrics::SetPartitionImbalance(double ratio) { families_->Imbalance().Set(ratio); }

void Metrics::SetWorkersAlive(int64_t n) { families_->WorkersAlive().Set(static_cast<double>(n)); }

void Metrics::SetJobState(std::string_view state) {
  auto& gauges = families_->JobStates();
  const auto* it = std::find(std::begin(kJobStates), std::end(kJobStates), state);
  if (it == std::end(kJobStates)) return;
  for (size_t i = 0; i < gauges.size(); ++i) gauges[i]->Set(kJobStates[i] == state ? 1 : 0);
}

void Metrics::SetHeartbeatAge(int32_t worker_rank, double seconds) {
  families_
      ->Keyed<prometheus::Gauge>(
          StrCat("heartbeat/", worker_rank),
          [&]() -> prometheus::Gauge& {
            return families_->AddGauge(kHeartbeatAge, {{"worker_rank", std::to_string(worker_rank)}});
          })
      .Set(seconds);
}

void Metrics::SetStragglerScore(int32_t worker_rank, double vs_fastest, double vs_own_median) {
  const std::string rank = std::to_string(worker_rank);
  for (auto [kind, value] :
       {std::pair<const char*, double>{"vs_fastest", vs_fastest}, {"vs_own_median", vs_own_median}}) {
    if (std::isnan(value)) continue;
    families_
        ->Keyed<prometheus::Gauge>(StrCat("straggler/", rank, "/", kind),
                                   [&]() -> prometheus::Gauge& {
                                     return families_->AddGauge(kStraggler, {{"worker_rank", rank}, {"kind", kind}});
                                   })
        .Set(value);
  }
}

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

MetricTotals Metrics::Totals() {
  Families& f = *families_;
  MetricTotals t;
  t.halo_sent_bytes = f.HaloSent().Value();
  t.halo_received_bytes = f.HaloReceived().Value();
  t.gather_local_bytes = f.GatherLocal().Value();
  t.gather_remote_bytes = f.GatherRemote().Value();
  t.spill_written_bytes = f.SpillWritten().Value();
  t.spill_read_bytes = f.SpillRead().Value();
  t.spill_wait_seconds = f.SpillWait().Value();
  for (prometheus::Counter* wait : f.PeerWaits()) t.peer_wait_seconds += wait->Value();
  t.pipeline_sent_bytes = f.PipelineSent().Value();
  t.pipeline_received_bytes = f.PipelineReceived().Value();
  t.activation_resident_bytes = f.ActivationResident().Value();
  return t;
}

std::shared_ptr<prometheus::Registry> Metrics::registry() { return registry_; }

}  // namespace tessel::monitoring
