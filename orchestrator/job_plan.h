// JobPlan: what the coordinator decides before any worker runs: the partition of the graph across
// workers, each worker's partition, and the cost model's predicted time and memory per worker.
// `tessel plan` prints it; `tessel run` executes it. The memory prediction is checked against
// [resources] memory_budget_bytes here, so a job that cannot fit fails before it is dispatched.
// Thread safety: reentrant. Failure: kUsage (budget), kBadData (graph), partitioner errors.
#pragma once

#include <iosfwd>
#include <vector>

#include "core/status.h"
#include "jobs/spec.h"
#include "orchestrator/graph_partitioner.h"
#include "storage/graph.h"
#include "storage/partition.h"

namespace tessel::orchestrator {

struct WorkerCost {
  int64_t owned = 0, halo = 0, edges = 0, uniq_pairs = 0;
  int64_t parameter_bytes = 0;   // weights + gradients + Adam moments
  int64_t activation_bytes = 0;  // per-layer outputs kept for backward
  int64_t graph_bytes = 0;       // edge arrays, features, labels
  int64_t total_bytes() const { return parameter_bytes + activation_bytes + graph_bytes; }
  double predicted_epoch_seconds = 0;
};

struct JobPlan {
  int32_t num_workers = 1;
  PartitionResult partition;
  std::vector<storage::WorkerPartition> parts;
  std::vector<WorkerCost> costs;
};

Result<JobPlan> PlanJob(const jobs::JobSpec& spec, const storage::HeteroGraph& graph, int32_t num_workers);
void PrintPlan(const jobs::JobSpec& spec, const storage::HeteroGraph& graph, const JobPlan& plan, std::ostream& out);

}  // namespace tessel::orchestrator
