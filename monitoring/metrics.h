// The Tessel metric catalog and the per-rank Metrics object that owns a prometheus-cpp Registry.
//
// The catalog (Catalog()) is the single list of every metric Tessel exports; monitoring/METRICS.md documents
// it and a unit test checks that the two agree. A metric is added by appending a MetricSpec here, a setter
// to Metrics, and a row to METRICS.md. Only metrics that something updates belong in the catalog.
//
// No globals: each rank (normally each process; tests may run several ranks in one process) creates its own
// Metrics and passes it explicitly to whoever updates it and to the Exporter that serves it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

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
};

// Every metric Tessel exports. The returned storage is static and immutable; any thread may call.
std::span<const MetricSpec> Catalog();

// "counter" | "gauge" | "histogram": the Prometheus TYPE names, as METRICS.md writes them.
std::string_view MetricKindName(MetricKind kind);

// True when a rank with this role registers metrics of `exported_by` at construction. An unknown role exports only
// kEveryRank metrics up front.
bool RoleExports(std::string_view role, ExportedBy exported_by);

// Upper bounds (seconds) of the duration histograms' buckets (step, forward, backward): 1 ms to 100 s, 1-2.5-5
// steps.
std::span<const double> StepDurationBuckets();

// The values of tessel_memory_bytes's kind label.
inline constexpr std::string_view kMemoryKinds[] = {"weights",     "gradients", "optimizer",
                                                    "activations", "workspace", "graph"};

// The values of tessel_peer_wait_seconds_total's kind label: what the rank waited in. `allreduce`: the sums
// of gradients, losses and stop requests; `alltoall`: halo rows (full-graph rgnn) and remote feature rows
// (sampled rgnn); `p2p`: a pipeline stage's activations and gradients (llm).
inline constexpr std::string_view kPeerWaitKinds[] = {"allreduce", "alltoall", "p2p"};

// The values of tessel_job_state's state label, in the order a job passes them.
inline constexpr std::string_view kJobStates[] = {"planning", "training", "done", "failed", "stopped"};

// A rank's running totals, read back for RUN_DIR/metrics.csv (the differences of two snapshots make a step's row).
struct MetricTotals {
  double halo_sent_bytes = 0, halo_received_bytes = 0;
  double gather_local_bytes = 0, gather_remote_bytes = 0;
  double spill_written_bytes = 0, spill_read_bytes = 0, spill_wait_seconds = 0;
  double peer_wait_seconds = 0;
  double pipeline_sent_bytes = 0, pipeline_received_bytes = 0;
  double activation_resident_bytes = 0;
};

// Owns a prometheus::Registry holding every Tessel metric family of one rank, each with the constant labels
// job, rank and role.
//
// The metrics a rank's role exports (see ExportedBy) are registered at zero by the constructor, so rate()
// sees their first increment. Any other setter still works: its family is registered on first use (the
// coordinator of a test run may observe steps, for instance).
//
// Thread safety: every method may be called from any thread, concurrently.
// Failure: setters do not fail. Values that would corrupt a metric are dropped (see each setter).
class Metrics {
 public:
  // `version` becomes the version label of tessel_build_info.
  explicit Metrics(RankLabels labels, std::string_view version);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // tessel_step_duration_seconds, and tessel_last_step_timestamp_seconds set to now (the Unix time).
  // Negative or NaN durations (a clock bug) are dropped; the timestamp is still set.
  void ObserveStep(double seconds);
  // tessel_forward_duration_seconds and tessel_backward_duration_seconds: the step's compute phases.
  // Negative or NaN durations are dropped.
  void ObserveForwardBackward(double forward_seconds, double backward_seconds);
  // tessel_samples_total{kind}: `kind` is "nodes" or "tokens" (StepResult::samples_kind). Non-positive
  // counts are dropped.
  void AddSamples(std::string_view kind, int64_t n);
  // tessel_learning_rate.
  void SetLearningRate(double lr);
  // tessel_validation_loss (registered when first set: a job that never validates does not export it).
  void SetValidationLoss(double loss);
  // tessel_pipeline_bytes_total{direction="sent"|"received"}: activations and gradients a pipeline stage
  // sent to or received from its neighbours. Negative amounts are dropped.
  void AddPipelineBytes(int64_t sent, int64_t received);
  // tessel_peer_wait_seconds_total{kind}: time the rank spent blocked in communication with its peers, apart
  // from computing, by what it waited in (one of kPeerWaitKinds; others are dropped). Negative or NaN
  // amounts are dropped.
  void AddPeerWait(std::string_view kind, double seconds);
  // tessel_kernel_seconds_total{op, device} and tessel_kernel_calls_total{op, device}: the time and the
  // number of the kernel calls timed on a sampled step (metrics.kernel_sample_every). Non-positive call
  // counts and negative or NaN times are dropped.
  void AddKernelTime(std::string_view op, std::string_view device, double seconds, int64_t calls);
  // tessel_gpu_memory_used_bytes{device}, tessel_gpu_memory_total_bytes{device} and
  // tessel_gpu_utilization_ratio{device}, as NVML reports them for the rank's GPU (`device` = "cuda:N").
  // Negative values (not known) are dropped.
  void SetGpuStats(std::string_view device, int64_t memory_used_bytes, int64_t memory_total_bytes, double utilization);
  // tessel_bad_loss_total: a step whose loss was NaN, infinite or exploded (train.on_bad_loss).
  void AddBadLoss();
  // tessel_memory_bytes{kind}: bytes the rank holds for `kind` (one of kMemoryKinds; others are dropped).
  // A kind is exported once set: a job that has none of it (a GPT stage's graph) does not show it.
  void SetMemoryBytes(std::string_view kind, int64_t bytes);
  // tessel_resident_memory_bytes: the process's resident set now.
  void SetResidentMemoryBytes(int64_t bytes);
  // tessel_plugin_info{plugin, version, abi, op, device} = 1 for each (op, device) the rank's plugins offer:
  // the plugin that serves it (the only one, or the one [plugins] prefer chose).
  void SetPluginInfo(std::string_view plugin, std::string_view version, std::string_view abi, std::string_view op,
                     std::string_view device);
  // tessel_loss. NaN and infinities are stored as they are: an alert watches for them.
  void SetLoss(double loss);
  // tessel_epoch: the current epoch (rgnn) or step (llm).
  void SetEpoch(int64_t epoch);
  // tessel_halo_exchange_bytes_total{direction="sent"|"received"}. Negative amounts are dropped.
  void AddHaloBytes(int64_t sent, int64_t received);
  // tessel_gather_bytes_total{source="local"|"remote"}: sampled batches' feature rows. Negative amounts
  // are dropped.
  void AddGatherBytes(int64_t local, int64_t remote);
  // tessel_gather_rows_total{source="local"|"remote"} and tessel_gather_seconds_total: the rows of those
  // bytes, and the time spent fetching them. Negative or NaN amounts are dropped.
  void AddGatherRows(int64_t local, int64_t remote, double seconds);
  // tessel_partition_edge_cut (coordinator).
  void SetPartitionEdgeCut(int64_t cut);
  // tessel_workers_alive (coordinator).
  void SetWorkersAlive(int64_t n);
  // tessel_partition_imbalance (coordinator): the partition's worst imbalance over its balance constraints.
  void SetPartitionImbalance(double ratio);
  // tessel_job_state{state}: 1 for `state` (one of kJobStates), 0 for the others (coordinator). Unknown
  // states are dropped.
  void SetJobState(std::string_view state);
  // tessel_heartbeat_age_seconds{worker_rank} (coordinator): seconds since the worker's last message.
  void SetHeartbeatAge(int32_t worker_rank, double seconds);
  // tessel_straggler_score{worker_rank, kind}: the worker's median compute time over the last straggler
  // window against the fastest worker's (kind="vs_fastest") and against its own median before that window
  // (kind="vs_own_median"). NaN (not known yet) is dropped.
  void SetStragglerScore(int32_t worker_rank, double vs_fastest, double vs_own_median);

  // The running totals of this rank's counters and byte gauges.
  MetricTotals Totals();

  // The spill store's I/O since the last call: tessel_spill_written_bytes_total,
  // tessel_spill_read_bytes_total and tessel_spill_wait_seconds_total (pass the difference of two
  // storage::SpillStats). Negative or NaN amounts are dropped.
  void AddSpillIo(int64_t written_bytes, int64_t read_bytes, double wait_seconds);
  // tessel_spill_fallbacks_total{to="keep"|"recompute"}: offloads that hit a full disk or the spill budget
  // and were kept in memory or recomputed instead (the GPT executor recomputes). Non-positive counts are
  // dropped.
  enum class SpillFallback { kKeep, kRecompute };
  void AddSpillFallbacks(SpillFallback to, int64_t n);
  // tessel_activation_resident_bytes: saved activations held in memory now.
  void SetActivationResidentBytes(int64_t bytes);

  // The registry to serve or collect. Shared: it stays valid for as long as any holder keeps it.
  std::shared_ptr<prometheus::Registry> registry();
  const RankLabels& labels() const { return labels_; }

 private:
  struct Families;
  RankLabels labels_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
};

}  // namespace tessel::monitoring
