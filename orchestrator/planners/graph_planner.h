// GraphPlanner: plans a full-graph RGNN job (job.kind = "rgnn"). It loads (or imports) the graph,
// partitions it with METIS (or the job's method) into one part per worker, or, with data.format =
// "partitions", reads only partition.json and has each worker read its part file; it turns the job's model
// settings into the RgnnSettings every worker receives, and predicts each worker's memory and epoch time
// with a roofline cost model, refusing a plan that passes the memory budget.
// Thread safety: one thread. Failure: see Planner.
#pragma once

#include "orchestrator/planners/planner.h"
#include "storage/graph.h"
#include "storage/partition_manifest.h"
#include "workers/rgnn/model.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::orchestrator {

// What one worker's cost scales with: its part's sizes (from the partition, or from partition.json) and
// the graph's widths.
struct PartFacts {
  storage::PartSizes sizes;
  int64_t total_nodes = 0, feature_dim = 0, num_classes = 0, num_relations = 0;
  int32_t num_parts = 1;
};

class GraphPlanner final : public Planner {
 public:
  Result<Plan> MakePlan(const jobs::JobSpec& spec, int32_t num_workers, const Logger& log) override;
  void Print(const jobs::JobSpec& spec, const Plan& plan, std::ostream& out) const override;
  void Publish(const Plan& plan, monitoring::Metrics& metrics) const override;
  std::string Length(const jobs::JobSpec& spec) const override { return StrCat(spec.train.epochs, " epochs"); }
  // model.name names a registered RGNN model, and the job keeps that model's own rules.
  Status Check(const jobs::JobSpec& spec) const override;

 private:
  // train.mode = "sampled" (sampled_plan.cc): one rgnn.sampled assignment per worker. From the graph the
  // coordinator loaded and its partition: the replicated structure (and the worker's feature rows when
  // the graph has no file to read them from), or, with data.structure = "partitioned", the worker's
  // partition. From data.partitions: the worker's part file, its structure partitioned.
  static Status AddSampledWorkers(const jobs::JobSpec& spec, const storage::HeteroGraph& graph,
                                  const std::vector<int32_t>& part_of, int32_t num_workers, Plan* plan);
  static Status AddSampledWorkersFromParts(const jobs::JobSpec& spec, const std::vector<PartFacts>& facts,
                                           std::vector<workers::PartFile> files, Plan* plan);
};

// The workers' settings for `spec` on a graph with `feature_dim` uniform features (0 = none), resolving
// model.input = "auto". kUsage when the job asks for features the graph lacks.
Result<workers::RgnnSettings> RgnnSettingsFor(const jobs::JobSpec& spec, int64_t feature_dim);

// The model's rules for `settings` (RgnnModel::Check; shape.input_dim == 0 when the widths are not known
// yet), as one kUsage error naming each key's origin; the model's notes for the plan go to `notes`
// (may be null). kUsage naming the registered models when model.name is none of them.
Status CheckRgnnModel(const jobs::JobSpec& spec, const workers::RgnnSettings& settings,
                      const workers::ModelShape& shape, std::vector<std::string>* notes);

}  // namespace tessel::orchestrator
