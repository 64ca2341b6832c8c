// Sampled training's plan (GraphPlanner::AddSampledWorkers and AddSampledWorkersFromParts): the model and
// sampling settings every worker gets, where its structure and feature rows come from, and its predicted
// memory, checked against resources.memory_budget_bytes.
#include <filesystem>

#include "jobs/carry.h"
#include "orchestrator/planners/graph_planner.h"
#include "storage/partition.h"
#include "workers/rgnn/part_structure.h"
#include "workers/rgnn/sampler.h"

namespace tessel::orchestrator {
namespace {

using workers::RgnnSettings;
using workers::SamplingSettings;

// The uniform feature width of the graph's nodes, or 0 when a type has none or the widths differ (the
// model then takes one-hot input), as BuildWorkerPartitions decides it.
int64_t UniformFeatureDim(const storage::HeteroGraph& graph) {
  int64_t dim = -1;
  for (const storage::NodeType& t : graph.node_types) {
    if (t.count == 0) continue;
    if (dim < 0) dim = t.feature_dim;
    if (t.feature_dim != dim) return 0;
  }
  return std::max<int64_t>(dim, 0);
}

struct SampledSetup {
  RgnnSettings settings;
  SamplingSettings sampling;
  bool features = false;
};

// The checked model settings and the sampling settings, for a graph of `nodes` nodes, `classes` classes
// and uniform features of `feature_dim` (0 = none). partitioned: the feature rows come with the worker's
// partition (into memory) rather than from the graph file.
Result<SampledSetup> SetUp(const jobs::JobSpec& spec, int64_t feature_dim, int64_t nodes, int64_t classes,
                           int32_t num_workers, bool partitioned, Plan* plan) {
  SampledSetup s;
  TESSEL_ASSIGN_OR_RETURN(s.settings, RgnnSettingsFor(spec, feature_dim));
  {
    workers::ModelShape shape;
    shape.input_dim = s.settings.input == ModelInput::kOneHot ? nodes : feature_dim;
    shape.classes = classes;
    shape.workers = num_workers;
    shape.full_graph = false;
    TESSEL_RETURN_IF_ERROR(CheckRgnnModel(spec, s.settings, shape, &plan->notes));
  }
  SamplingSettings& sampling = s.sampling;
  sampling = jobs::CarryFrom<SamplingSettings>(
      spec, {.sections = {"train"}, .renamed = {}, .derived = {"fanouts", "store", "gather", "graph_path"}});
  sampling.fanouts = jobs::FanoutsOf(spec);
  s.features = s.settings.input == ModelInput::kFeatures;
  const bool has_file = !partitioned && !spec.data.graph.empty() && std::filesystem::exists(spec.data.graph);
  sampling.store = spec.data.feature_store;
  if (partitioned && sampling.store != FeatureStoreChoice::kAuto) {
    return UsageError(StrCat(jobs::KeyOrigin(spec, "data.feature_store"), ": data.feature_store = \"",
                             NameOf(spec.data.feature_store),
                             "\" reads the graph file, but with data.structure = \"partitioned\" a worker's feature "
                             "rows come with its partition; leave it \"auto\""));
  }
  if (sampling.store == FeatureStoreChoice::kAuto) {
    const bool gpu = spec.job.device == DeviceChoice::kCuda || spec.resources.gpus_per_worker > 0;
    sampling.store =
        !has_file ? FeatureStoreChoice::kMemory : (gpu ? FeatureStoreChoice::kPinned : FeatureStoreChoice::kMapped);
  } else if (s.features && !has_file) {
    return UsageError(StrCat(jobs::KeyOrigin(spec, "data.feature_store"), ": data.feature_store = \"",
                             NameOf(spec.data.feature_store),
                             "\" reads the graph file, but data.graph names none; set data.graph (the import "
                             "or generator then writes it there) or use \"auto\""));
  }
  if (has_file) sampling.graph_path = std::filesystem::absolute(spec.data.graph).string();
  sampling.gather = spec.data.feature_gather;
  if (sampling.gather == FeatureGather::kZeroCopy && s.features) {
    // The GPU reads rows in place only from page-locked memory: the pinned store.
    std::string why;
    if (spec.job.device == DeviceChoice::kCpu) {
      why = "job.device = \"cpu\"";
    } else if (partitioned) {
      why = "with data.structure = \"partitioned\" the rows come with the worker's partition, not the pinned store";
    } else if (sampling.store != FeatureStoreChoice::kPinned) {
      why = StrCat("the feature rows are ", sampling.store == FeatureStoreChoice::kMemory
                                                ? "sent in the assignment (data.graph names no file)"
                                                : "mapped from the graph file (data.feature_store = \"mapped\")");
    }
    if (!why.empty()) {
      return UsageError(StrCat(jobs::KeyOrigin(spec, "data.feature_gather"),
                               ": data.feature_gather = \"zero_copy\" has the GPU read feature rows from the pinned "
                               "store in place, but ",
                               why, "; use data.feature_store = \"pinned\" with a GPU, or \"auto\""));
    }
  }
  return s;
}

// A partitioned worker's peak: its partition as read (edges 16 bytes, rows 16, features, the owned rows'
// supervision 11), the structure built from it (16 bytes an edge, 26 an owned node) and the labelled
// training nodes of the whole graph (8 bytes each).
int64_t PartitionedBytes(const storage::PartSizes& s, int64_t labelled) {
  const int64_t rows = s.owned + s.halo;
  return s.edges * 16 + rows * 16 + s.features * 4 + s.owned * 11 + s.edges * 16 + s.owned * 26 + labelled * 8;
}

// The budget check, the plan's summary and its note.
Status Finish(const jobs::JobSpec& spec, const SamplingSettings& sampling, const std::string& structure, Plan* plan) {
  const int64_t budget = spec.resources.memory_budget_bytes;
  for (size_t w = 0; w < plan->workers.size(); ++w) {
    const int64_t need = plan->workers[w].predicted_memory_bytes;
    if (budget > 0 && need > budget) {
      return UsageError(StrCat(jobs::KeyOrigin(spec, "resources.memory_budget_bytes"),
                               ": resources.memory_budget_bytes = ", budget, " but worker ", w, " needs about ", need,
                               " bytes (", FormatBytes(need), "); add workers or raise the budget"));
    }
  }
  Set(plan->summary, "train_mode", std::string("sampled"));
  Set(plan->summary, "feature_store", std::string(NameOf(sampling.store)));
  Set(plan->summary, "structure", structure.substr(0, structure.find(' ')));
  std::string fanouts;
  for (const int32_t f : sampling.fanouts) fanouts += StrCat(fanouts.empty() ? "" : ", ", f);
  plan->notes.push_back(StrCat("sampled training: fanouts [", fanouts, "] ",
                               sampling.fanout_per == FanoutPer::kRelation ? "per relation" : "in total",
                               ", batches of ", sampling.batch_size, " seeds, structure ", structure, ", prefetch ",
                               sampling.prefetch ? "on" : "off"));
  return Status();
}

std::unique_ptr<workers::RgnnSampledAssignment> Payload(const SampledSetup& s, int32_t worker, int32_t workers,
                                                        int64_t feature_dim) {
  auto a = std::make_unique<workers::RgnnSampledAssignment>();
  a->settings = s.settings;
  a->sampling = s.sampling;
  a->worker = worker;
  a->num_workers = workers;
  a->feature_dim = s.features ? feature_dim : 0;
  return a;
}

}  // namespace

Status GraphPlanner::AddSampledWorkers(const jobs::JobSpec& spec, const storage::HeteroGraph& graph,
                                       const std::vector<int32_t>& part_of, int32_t num_workers, Plan* plan) {
  const int64_t feature_dim = UniformFeatureDim(graph);
  const bool partitioned = spec.data.structure == SampledStructure::kPartitioned;
  TESSEL_ASSIGN_OR_RETURN(
      SampledSetup s, SetUp(spec, feature_dim, graph.num_nodes(), graph.num_classes, num_workers, partitioned, plan));
  if (partitioned) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<storage::WorkerPartition> parts,
                            storage::BuildWorkerPartitions(graph, part_of, num_workers));
    for (int32_t w = 0; w < num_workers; ++w) {
      auto a = Payload(s, w, num_workers, feature_dim);
      a->partition = std::move(parts[static_cast<size_t>(w)]);
      const storage::PartSizes sizes = storage::SizesOf(a->partition);
      WorkerPlan wp;
      wp.predicted_memory_bytes = PartitionedBytes(sizes, a->partition.total_train);
      Set(wp.details, "owned", sizes.owned);
      Set(wp.details, "edges", sizes.edges);
      wp.payload = std::move(a);
      plan->workers.push_back(std::move(wp));
    }
    return Finish(spec, s.sampling, "partitioned (each worker its own nodes' in-edges)", plan);
  }
  const auto sampled = std::make_shared<const workers::SampledGraph>(workers::SampledGraph::FromGraph(graph, part_of));
  const int64_t structure_bytes =
      static_cast<int64_t>(sampled->in_ptr.size()) * 8 + sampled->num_edges() * 8 + sampled->num_nodes * (4 + 8 + 2);
  for (int32_t w = 0; w < num_workers; ++w) {
    auto a = Payload(s, w, num_workers, feature_dim);
    a->graph = sampled;
    int64_t owned = 0;
    for (size_t t = 0, base = 0; t < graph.node_types.size();
         base += static_cast<size_t>(graph.node_types[t].count), ++t) {
      const storage::NodeType& nt = graph.node_types[t];
      for (size_t i = 0; i < static_cast<size_t>(nt.count); ++i) {
        if (part_of[base + i] != w) continue;
        ++owned;
        if (s.features && s.sampling.store == FeatureStoreChoice::kMemory) {
          const float* row = nt.features.data() + i * static_cast<size_t>(feature_dim);
          a->owned_features.insert(a->owned_features.end(), row, row + feature_dim);
        }
      }
    }
    WorkerPlan wp;
    wp.predicted_memory_bytes = structure_bytes + (s.features ? owned * feature_dim * 4 : 0);
    Set(wp.details, "owned", owned);
    Set(wp.details, "edges", sampled->num_edges());
    wp.payload = std::move(a);
    plan->workers.push_back(std::move(wp));
  }
  return Finish(spec, s.sampling, StrCat("replicated (", FormatBytes(structure_bytes), " a worker)"), plan);
}

Status GraphPlanner::AddSampledWorkersFromParts(const jobs::JobSpec& spec, const std::vector<PartFacts>& facts,
                                                std::vector<workers::PartFile> files, Plan* plan) {
  const PartFacts& first = facts.front();
  const auto workers = static_cast<int32_t>(facts.size());
  TESSEL_ASSIGN_OR_RETURN(SampledSetup s,
                          SetUp(spec, first.feature_dim, first.total_nodes, first.num_classes, workers, true, plan));
  int64_t labelled = 0;
  for (const PartFacts& f : facts) labelled += f.sizes.train;
  for (int32_t w = 0; w < workers; ++w) {
    auto a = Payload(s, w, workers, first.feature_dim);
    a->source = std::move(files[static_cast<size_t>(w)]);
    const storage::PartSizes& sizes = facts[static_cast<size_t>(w)].sizes;
    WorkerPlan wp;
    wp.predicted_memory_bytes = PartitionedBytes(sizes, labelled);
    Set(wp.details, "owned", sizes.owned);
    Set(wp.details, "edges", sizes.edges);
    wp.payload = std::move(a);
    plan->workers.push_back(std::move(wp));
  }
  return Finish(spec, s.sampling, "partitioned (each worker its own part file's in-edges)", plan);
}

}  // namespace tessel::orchestrator
