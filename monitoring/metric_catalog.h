// The Tessel metric catalog: one row per metric, the one place a metric is declared (its name, type, unit,
// labels, the label values known up front, which roles export it from the start, and its help text).
// Registration (monitoring::Metrics), the check against monitoring/METRICS.md and the dashboard check all
// read these rows. A metric is added by a row here, its row in METRICS.md, and its call site:
//
//   metrics.Add("tessel_halo_exchange_bytes_total", bytes, {"sent"});
//
// The name is checked when the call site compiles: a name that is not a row, or a counter set as a gauge,
// does not build (CounterName, GaugeName, HistogramName below).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace tessel::monitoring {

enum class MetricKind { kCounter, kGauge, kHistogram };

// Which roles export a metric from the start (registered at zero when Metrics is constructed).
enum class ExportedBy {
  kEveryRank,    // coordinator, worker, embedded
  kWorkers,      // worker, embedded
  kCoordinator,  // coordinator, embedded
  kWhenSet,      // no role up front: a label value or the value itself is known only later (METRICS.md "when set")
};

struct MetricSpec {
  std::string_view name;  // full family name, e.g. "tessel_halo_exchange_bytes_total"
  MetricKind kind;
  std::string_view unit;             // base unit ("seconds", "bytes") or "" when dimensionless
  std::string_view variable_labels;  // comma-separated labels beyond job, rank, role; "" if none
  ExportedBy exported_by;
  std::string_view help;
  // For a metric of one variable label whose values are known up front: those values. A role that exports
  // the metric registers each at zero; a value not listed is dropped.
  std::span<const std::string_view> label_values = {};
  // A gauge whose negative or NaN value means "not known": such a value is dropped. (Counters always drop
  // non-positive and NaN amounts, histograms negative and NaN observations; other gauges store any value,
  // NaN included: an alert watches tessel_loss for it.)
  bool drops_unknown = false;
};

// Label values known up front.
inline constexpr std::string_view kDirections[] = {"sent", "received"};
inline constexpr std::string_view kSources[] = {"local", "remote"};
inline constexpr std::string_view kSpillFallbackTargets[] = {"keep", "recompute"};
// "samples": the unit of an executor that names none (StepResult::samples_kind).
inline constexpr std::string_view kSampleKinds[] = {"nodes", "tokens", "samples"};
inline constexpr std::string_view kMemoryKinds[] = {"weights",     "gradients", "optimizer",
                                                    "activations", "workspace", "graph"};
// What a rank waited in. `allreduce`: the sums of gradients, losses and stop requests; `alltoall`: halo
// rows (full-graph rgnn) and remote feature rows (sampled rgnn); `p2p`: a pipeline stage's activations and
// gradients (llm). workers/comm/timed_comm.h counts in this order.
inline constexpr std::string_view kPeerWaitKinds[] = {"allreduce", "alltoall", "p2p"};
// The job's states, in the order a job passes them.
inline constexpr std::string_view kJobStates[] = {"planning", "training", "done", "failed", "stopped"};

// Every metric Tessel exports, in METRICS.md's order. Only metrics that something updates belong here.
inline constexpr MetricSpec kMetricCatalog[] = {
    {.name = "tessel_build_info",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "version",
     .exported_by = ExportedBy::kEveryRank,
     .help = "Always 1; the version label names the Tessel build this rank runs."},
    {.name = "tessel_step_duration_seconds",
     .kind = MetricKind::kHistogram,
     .unit = "seconds",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Wall time of one training step on this rank, from its first kernel to its last exchange."},
    {.name = "tessel_forward_duration_seconds",
     .kind = MetricKind::kHistogram,
     .unit = "seconds",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Forward time of one training step on this rank (halo and pipeline waits included)."},
    {.name = "tessel_backward_duration_seconds",
     .kind = MetricKind::kHistogram,
     .unit = "seconds",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Backward and optimizer time of one training step on this rank."},
    {.name = "tessel_last_step_timestamp_seconds",
     .kind = MetricKind::kGauge,
     .unit = "seconds",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Unix time at which this rank last finished a training step; 0 before the first."},
    {.name = "tessel_loss",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Training loss of the most recent step on this rank."},
    {.name = "tessel_bad_loss_total",
     .kind = MetricKind::kCounter,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kEveryRank,
     .help = "Steps whose loss was NaN, infinite or exploded (train.on_bad_loss): counted by the workers, and by the "
             "coordinator when a worker stops the job for one."},
    {.name = "tessel_validation_loss",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Validation loss of the most recent validation on this rank."},
    {.name = "tessel_learning_rate",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Learning rate of the most recent step on this rank."},
    {.name = "tessel_epoch",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Current epoch (rgnn jobs) or step (llm jobs) of this rank."},
    {.name = "tessel_samples_total",
     .kind = MetricKind::kCounter,
     .unit = "",
     .variable_labels = "kind",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Samples of the job's global batches trained so far, counted on every worker: labelled training nodes "
             "(kind=nodes) or tokens (kind=tokens).",
     .label_values = kSampleKinds},
    {.name = "tessel_halo_exchange_bytes_total",
     .kind = MetricKind::kCounter,
     .unit = "bytes",
     .variable_labels = "direction",
     .exported_by = ExportedBy::kWorkers,
     .help = "Bytes of halo node features and gradients this rank sent or received.",
     .label_values = kDirections},
    {.name = "tessel_gather_bytes_total",
     .kind = MetricKind::kCounter,
     .unit = "bytes",
     .variable_labels = "source",
     .exported_by = ExportedBy::kWorkers,
     .help = "Bytes of input feature rows this rank's sampled batches gathered from its own feature store (local) or "
             "received from other ranks (remote).",
     .label_values = kSources},
    {.name = "tessel_gather_rows_total",
     .kind = MetricKind::kCounter,
     .unit = "",
     .variable_labels = "source",
     .exported_by = ExportedBy::kWorkers,
     .help = "Input feature rows this rank's sampled batches gathered from its own feature store (local) or received "
             "from other ranks (remote).",
     .label_values = kSources},
    {.name = "tessel_gather_seconds_total",
     .kind = MetricKind::kCounter,
     .unit = "seconds",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Time this rank's sampled batches spent fetching their feature rows, local and remote (on the prefetch "
             "thread when batches are prefetched)."},
    {.name = "tessel_pipeline_bytes_total",
     .kind = MetricKind::kCounter,
     .unit = "bytes",
     .variable_labels = "direction",
     .exported_by = ExportedBy::kWorkers,
     .help = "Bytes of activations and gradients this pipeline stage sent to or received from its neighbouring stages.",
     .label_values = kDirections},
    {.name = "tessel_peer_wait_seconds_total",
     .kind = MetricKind::kCounter,
     .unit = "seconds",
     .variable_labels = "kind",
     .exported_by = ExportedBy::kWorkers,
     .help = "Time this rank spent blocked in communication with its peers, apart from computing, by what it waited "
             "in: allreduce (gradient and loss sums), alltoall (halo and remote feature rows), p2p (pipeline "
             "activations and gradients).",
     .label_values = kPeerWaitKinds},
    {.name = "tessel_partition_edge_cut",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kCoordinator,
     .help = "Edges whose endpoints lie in different partitions, in the current graph partition."},
    {.name = "tessel_partition_imbalance",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kCoordinator,
     .help = "The graph partition's worst imbalance over its balance constraints (a partition's weight over the mean); "
             "1 is balanced."},
    {.name = "tessel_workers_alive",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "",
     .exported_by = ExportedBy::kCoordinator,
     .help = "Workers whose heartbeat the coordinator has seen within the heartbeat timeout."},
    {.name = "tessel_heartbeat_age_seconds",
     .kind = MetricKind::kGauge,
     .unit = "seconds",
     .variable_labels = "worker_rank",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Seconds since the coordinator last heard from the worker."},
    {.name = "tessel_job_state",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "state",
     .exported_by = ExportedBy::kCoordinator,
     .help = "1 for the job's current state (planning, training, done, failed, stopped), 0 for the others.",
     .label_values = kJobStates},
    {.name = "tessel_straggler_score",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "worker_rank,kind",
     .exported_by = ExportedBy::kWhenSet,
     .help = "The worker's median compute time over the last straggler window against the fastest worker's "
             "(kind=vs_fastest) and against its own earlier median (kind=vs_own_median).",
     .drops_unknown = true},
    {.name = "tessel_spill_written_bytes_total",
     .kind = MetricKind::kCounter,
     .unit = "bytes",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Bytes of saved activations this rank's spill store wrote to disk."},
    {.name = "tessel_spill_read_bytes_total",
     .kind = MetricKind::kCounter,
     .unit = "bytes",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Bytes of saved activations this rank's spill store read back from disk."},
    {.name = "tessel_spill_wait_seconds_total",
     .kind = MetricKind::kCounter,
     .unit = "seconds",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Time the training thread spent blocked on the spill store (a prefetch or an offload that was late)."},
    {.name = "tessel_spill_fallbacks_total",
     .kind = MetricKind::kCounter,
     .unit = "",
     .variable_labels = "to",
     .exported_by = ExportedBy::kWorkers,
     .help = "Offloads that found the disk full or the spill budget spent and were kept in memory (to=keep) or "
             "recomputed (to=recompute) instead.",
     .label_values = kSpillFallbackTargets},
    {.name = "tessel_activation_resident_bytes",
     .kind = MetricKind::kGauge,
     .unit = "bytes",
     .variable_labels = "",
     .exported_by = ExportedBy::kWorkers,
     .help = "Bytes of saved activations this rank holds in memory now."},
    {.name = "tessel_memory_bytes",
     .kind = MetricKind::kGauge,
     .unit = "bytes",
     .variable_labels = "kind",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Bytes this rank holds, by kind: weights, gradients, optimizer state, activations, kernel workspace "
             "(peak), graph (features, labels, masks, adjacency).",
     .label_values = kMemoryKinds},
    {.name = "tessel_resident_memory_bytes",
     .kind = MetricKind::kGauge,
     .unit = "bytes",
     .variable_labels = "",
     .exported_by = ExportedBy::kEveryRank,
     .help = "Resident memory of this rank's process."},
    {.name = "tessel_plugin_info",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "plugin,version,abi,op,device",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Always 1, one series per op and device this rank's plugins offer: the plugin that serves it (the only "
             "one, or the one plugins.prefer chose), its version and ABI."},
    {.name = "tessel_kernel_seconds_total",
     .kind = MetricKind::kCounter,
     .unit = "seconds",
     .variable_labels = "op,device",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Time of the kernel calls timed on sampled steps (metrics.kernel_sample_every), by op and device."},
    {.name = "tessel_kernel_calls_total",
     .kind = MetricKind::kCounter,
     .unit = "",
     .variable_labels = "op,device",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Kernel calls timed on sampled steps, by op and device."},
    {.name = "tessel_gpu_memory_used_bytes",
     .kind = MetricKind::kGauge,
     .unit = "bytes",
     .variable_labels = "device",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Memory used on this rank's GPU, every process's (NVML).",
     .drops_unknown = true},
    {.name = "tessel_gpu_memory_total_bytes",
     .kind = MetricKind::kGauge,
     .unit = "bytes",
     .variable_labels = "device",
     .exported_by = ExportedBy::kWhenSet,
     .help = "Memory of this rank's GPU (NVML).",
     .drops_unknown = true},
    {.name = "tessel_gpu_utilization_ratio",
     .kind = MetricKind::kGauge,
     .unit = "",
     .variable_labels = "device",
     .exported_by = ExportedBy::kWhenSet,
     .help =
         "Fraction of the last sample period in which a kernel ran on this rank's GPU (NVML's utilization.gpu / 100).",
     .drops_unknown = true},
};

// A catalog row of kind K, named at compile time (consteval: a name that is not a row of that kind does
// not compile).
template <MetricKind K>
class MetricName {
 public:
  consteval MetricName(const char* name) : index_(Find(name)) {}  // NOLINT: implicit, from a literal
  // Row `index` of kMetricCatalog, which must be of kind K: for code that walks the catalog (registration,
  // tests). Everything else names its metric.
  static constexpr MetricName At(size_t index) { return MetricName(index, 0); }
  constexpr size_t index() const { return index_; }
  constexpr const MetricSpec& spec() const { return kMetricCatalog[index_]; }

 private:
  static consteval size_t Find(std::string_view name) {
    for (size_t i = 0; i < std::size(kMetricCatalog); ++i) {
      if (kMetricCatalog[i].name != name) continue;
      if (kMetricCatalog[i].kind != K) throw "this metric is of another kind (monitoring/metric_catalog.h)";
      return i;
    }
    throw "no such metric in monitoring/metric_catalog.h";
  }
  constexpr MetricName(size_t index, int) : index_(index) {}
  size_t index_;
};
using CounterName = MetricName<MetricKind::kCounter>;
using GaugeName = MetricName<MetricKind::kGauge>;
using HistogramName = MetricName<MetricKind::kHistogram>;

}  // namespace tessel::monitoring
