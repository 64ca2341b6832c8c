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

// Upper bounds (seconds) of the tessel_step_duration_seconds buckets: 1 ms to 100 s, 1-2.5-5 steps.
std::span<const double> StepDurationBuckets();

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

  // tessel_step_duration_seconds. Negative or NaN durations (a clock bug) are dropped.
  void ObserveStep(double seconds);
  // tessel_loss. NaN and infinities are stored as they are: an alert watches for them.
  void SetLoss(double loss);
  // tessel_epoch: the current epoch (rgnn) or step (llm).
  void SetEpoch(int64_t epoch);
  // tessel_halo_exchange_bytes_total{direction="sent"|"received"}. Negative amounts are dropped.
  void AddHaloBytes(int64_t sent, int64_t received);
  // tessel_gather_bytes_total{source="local"|"remote"}: sampled batches' feature rows. Negative amounts
  // are dropped.
  void AddGatherBytes(int64_t local, int64_t remote);
  // tessel_partition_edge_cut (coordinator).
  void SetPartitionEdgeCut(int64_t cut);
  // tessel_workers_alive (coordinator).
  void SetWorkersAlive(int64_t n);

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
