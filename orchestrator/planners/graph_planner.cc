#include "orchestrator/planners/graph_planner.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <tuple>

#include "jobs/carry.h"
#include "orchestrator/graph_partitioner.h"
#include "orchestrator/planners/job_graph.h"
#include "storage/partition.h"
#include "storage/partition_manifest.h"
#include "workers/rgnn/model_registry.h"

namespace tessel::orchestrator {

namespace {

using workers::RgnnSettings;

// A deliberately simple roofline: dense products at kGemmFlops per thread, everything else streams
// memory at kBandwidth. Good enough to compare plans and catch a budget overrun, not to promise times.
constexpr double kGemmFlopsPerThread = 20e9;
constexpr double kBandwidth = 5e9;

struct WorkerCost {
  int64_t owned = 0, halo = 0, edges = 0, uniq_pairs = 0;
  int64_t parameter_bytes = 0;   // weights + gradients + Adam moments
  int64_t activation_bytes = 0;  // per-layer outputs kept for backward, and their gradients
  int64_t graph_bytes = 0;       // edge arrays, features, labels, the halo exchange's own
  int64_t total_bytes() const { return parameter_bytes + activation_bytes + graph_bytes; }
  double epoch_seconds = 0;
};

PartFacts FactsOf(const storage::WorkerPartition& p) {
  return {storage::SizesOf(p), p.total_nodes, p.feature_dim, p.num_classes, p.num_relations(), p.num_parts};
}

WorkerCost Estimate(const RgnnSettings& s, int32_t threads, const PartFacts& p) {
  WorkerCost c;
  c.owned = p.sizes.owned;
  c.halo = p.sizes.halo;
  c.edges = p.sizes.edges;
  c.uniq_pairs = p.sizes.pairs;
  const bool onehot = s.input == ModelInput::kOneHot;
  std::vector<int64_t> dims;
  dims.push_back(onehot ? p.total_nodes : p.feature_dim);
  for (int l = 1; l < s.layers; ++l) dims.push_back(s.hidden);
  dims.push_back(p.num_classes);
  // A streamed halo (train.halo) keeps no halo rows: the layers' buffers hold the owned rows, and one peer's
  // block of a layer's input (and its gradient) at a time, about halo / (parts - 1) rows.
  const bool streamed = s.halo == HaloMode::kStreamed && p.num_parts > 1;
  const int64_t R = p.num_relations, rows = streamed ? c.owned : c.owned + c.halo;
  const int64_t block_rows = streamed ? (c.halo + p.num_parts - 2) / (p.num_parts - 1) : 0;
  int64_t params = 0, act = 0;
  double flops = 0, bytes = 0;
  const workers::RgnnModel* model = workers::FindRgnnModel(s.model);
  const bool per_pair = model == nullptr || model->KeepsPairBuffers(s);
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    const int64_t in = dims[l], out = dims[l + 1];
    const bool last = l + 2 == dims.size();
    params += R * in * out;
    // What the executor keeps (rgnn_executor.cc, Shape): between two layers the next layer's input and its
    // gradient over every row (owned + halo), the layer writing its output into the first (RGAT's concatenated
    // heads keep theirs apart, not counted); after the last layer its output and the loss's gradient over the
    // owned rows.
    act += (last ? 2 * c.owned : 2 * rows) * out + (per_pair ? c.uniq_pairs * out : 0);
    if (l == 0 && onehot) {
      bytes += 2.0 * static_cast<double>(c.uniq_pairs * out) * 4;
    } else {
      flops += 6.0 * static_cast<double>(c.uniq_pairs * in * out);  // fwd + dX + dW
    }
    bytes += 4.0 * static_cast<double>(c.edges * out) * 4;  // aggregate fwd + bwd, read + write
  }
  bytes += static_cast<double>(params) * 4 * 7;                       // Adam reads param/grad/m/v, writes param/m/v
  if (p.num_parts > 1) bytes += static_cast<double>(params) * 4 * 2;  // allreduce
  c.parameter_bytes = params * 4 * 4;
  int64_t widest_in = 0;
  for (size_t l = onehot ? 1 : 0; l + 1 < dims.size(); ++l) widest_in = std::max(widest_in, dims[l]);
  act += 2 * block_rows * widest_in;  // a streamed block of a layer's input, and its gradient
  c.activation_bytes = act * 4;
  // The part carries the owned rows' features; with feature input the halo rows' join them at load (a
  // streamed halo fetches them as the layers run).
  const int64_t feature_values = onehot ? p.sizes.features : rows * p.feature_dim;
  // Every row's node type (i32), and its global id (i64) where a one-hot first layer indexes by it (a
  // streamed halo's blocks keep their rows' ids).
  const int64_t row_bytes = onehot ? 12 : 4;
  const int64_t block_id_bytes = streamed && onehot ? c.halo * 8 : 0;
  // The halo exchange: which owned row each peer asks for (i32, about one per halo row across the peers),
  // and one peer's rows of the widest that moves (halo.h: one peer a round): the input features at load,
  // every layer's output but the last's.
  int64_t widest = onehot ? 0 : p.feature_dim;
  for (size_t l = 1; l + 1 < dims.size(); ++l) widest = std::max(widest, dims[l]);
  const int64_t halo_bytes = p.num_parts > 1 ? c.halo * 4 + c.halo / (p.num_parts - 1) * widest * 4 : 0;
  // An edge in the segment layout: 8 i32 indices and a norm, or one index fewer where no layer reads dedge_pair.
  const bool edge_pairs = model == nullptr || model->ReadsEdgePairs(s);
  c.graph_bytes = c.edges * (edge_pairs ? 36 : 32) + c.uniq_pairs * 16 + rows * row_bytes + block_id_bytes +
                  feature_values * 4 + halo_bytes;
  c.epoch_seconds = flops / (kGemmFlopsPerThread * std::max(1, threads)) + bytes / kBandwidth;
  return c;
}

int64_t Int(const Record& r, std::string_view name) { return static_cast<int64_t>(FindNumber(r, name).value_or(0)); }

const Record* Sub(const Record& r, std::string_view name) {
  const RecordValue* v = Find(r, name);
  return v != nullptr ? std::get_if<Record>(&v->data) : nullptr;
}

}  // namespace

namespace {

// The job's model and training settings as a worker takes them, model.input not yet resolved.
// (Carried from the schema rows, jobs/carry.h.)
RgnnSettings ModelSettingsOf(const jobs::JobSpec& spec) {
  auto s = jobs::CarryFrom<RgnnSettings>(spec, {.sections = {"model", "train"},
                                                .renamed = {{"model", "model.name"}},
                                                .derived = {"compaction", "reordering", "options"}});
  s.options = jobs::ModelOptionsOf(spec);
  s.compaction = spec.model.compact ? workers::Compaction::kPerUniquePair : workers::Compaction::kPerEdge;
  s.reordering = spec.model.reorder ? workers::Reordering::kOn : workers::Reordering::kOff;
  return s;
}

}  // namespace

Result<RgnnSettings> RgnnSettingsFor(const jobs::JobSpec& spec, int64_t feature_dim) {
  RgnnSettings s = ModelSettingsOf(spec);
  if (s.input == ModelInput::kFeatures && feature_dim <= 0) {
    return UsageError(StrCat(jobs::KeyOrigin(spec, "model.input"),
                             ": model.input = \"features\" but the graph's nodes carry no (uniform) features"));
  }
  if (s.input == ModelInput::kAuto) s.input = feature_dim > 0 ? ModelInput::kFeatures : ModelInput::kOneHot;
  return s;
}

Status CheckRgnnModel(const jobs::JobSpec& spec, const RgnnSettings& settings, const workers::ModelShape& shape,
                      std::vector<std::string>* notes) {
  const workers::RgnnModel* model = workers::FindRgnnModel(settings.model);
  if (model == nullptr) {
    std::string names;
    for (const std::string_view n : workers::RgnnModelNames())
      names += StrCat(names.empty() ? "" : ", ", "\"", n, "\"");
    return UsageError(StrCat(jobs::KeyOrigin(spec, "model.name"), ": model.name = \"", settings.model,
                             "\" is not an RGNN model of this build (it has ", names, ")"));
  }
  std::string lines;
  if (settings.halo == HaloMode::kStreamed && !model->StreamsHalo(settings)) {
    lines = StrCat(jobs::KeyOrigin(spec, "train.halo"),
                   ": train.halo = \"streamed\" runs a layer one block of input rows at a time, as a sum, which model "
                   "\"",
                   settings.model,
                   "\" with these settings cannot (RGCN with model.reorder = true can; RGAT's "
                   "and HGT's softmax spans all of a node's edges): use \"resident\"");
  }
  for (const workers::SettingProblem& p : model->Check(settings, shape)) {
    const std::string& key = p.or_key.empty() || spec.origins.contains(p.key) ? p.key : p.or_key;
    lines += StrCat(lines.empty() ? "" : "\n", jobs::KeyOrigin(spec, key), ": ", p.message);
  }
  if (!lines.empty()) return UsageError(lines);
  if (notes != nullptr) {
    for (std::string& note : model->Notes(settings, shape)) notes->push_back(std::move(note));
  }
  return Status();
}

Status GraphPlanner::Check(const jobs::JobSpec& spec) const {
  return CheckRgnnModel(spec, ModelSettingsOf(spec), workers::ModelShape{}, nullptr);
}

namespace {

// The plan's "graph" and "partition" records, and its notes on them.
void Describe(const std::string& name, int64_t nodes, int64_t edges, int64_t relations, int64_t classes,
              const std::string& method, int32_t parts, int64_t edge_cut, double seconds,
              const std::vector<std::string>& constraints, const std::vector<double>& imbalances, Plan* plan) {
  Record g;
  Set(g, "name", name);
  Set(g, "nodes", nodes);
  Set(g, "edges", edges);
  Set(g, "relations", relations);
  Set(g, "classes", classes);
  Record imbalance;
  for (size_t i = 0; i < constraints.size(); ++i) Set(imbalance, constraints[i], imbalances[i]);
  Record pr;
  Set(pr, "method", method);
  Set(pr, "parts", static_cast<int64_t>(parts));
  Set(pr, "edge_cut", edge_cut);
  Set(pr, "seconds", seconds);
  Set(pr, "imbalance", imbalance);
  Set(plan->summary, "graph", g);
  Set(plan->summary, "partition", pr);
  plan->notes.push_back(StrCat("graph ", name, ": ", nodes, " nodes, ", edges, " edges, ", relations, " relations, ",
                               classes, " classes"));
  if (parts > 1) {
    std::string imb;
    for (size_t i = 0; i < constraints.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.3f", constraints[i].c_str(), imbalances[i]);
      imb += buf;
    }
    plan->notes.push_back(
        StrCat("partitioned with ", method, " into ", parts, " parts: edge cut ", edge_cut, ", imbalance", imb));
  }
}

// data.format = "partitions": the plan from partition.json alone; each worker reads its part file.
Result<std::vector<PartFacts>> PartsFromManifest(const jobs::JobSpec& spec, int32_t num_workers,
                                                 std::vector<workers::PartFile>* files, Plan* plan) {
  TESSEL_ASSIGN_OR_RETURN(storage::PartitionManifest m, storage::ReadPartitionManifest(spec.data.partitions));
  if (m.parts != num_workers) {
    return UsageError(StrCat(jobs::KeyOrigin(spec, "data.partitions"), ": ", spec.data.partitions, "/",
                             storage::kPartitionManifestName, " holds ", m.parts, " parts, but the job has ",
                             num_workers, " workers; partition the graph into ", num_workers,
                             " parts or set resources.workers = ", m.parts));
  }
  // The parts fix the cut: a job that asks for another method or seed than they were cut with is refused.
  const std::string seed = std::to_string(spec.partition.seed);
  for (const auto& [key, asked, cut] : {std::tuple<std::string_view, std::string, std::string>{
                                            "partition.method", std::string(NameOf(spec.partition.method)), m.method},
                                        {"partition.seed", seed, std::to_string(m.seed)}}) {
    if (spec.origins.contains(key) && asked != cut) {
      return UsageError(StrCat(jobs::KeyOrigin(spec, key), ": ", key, " = ", asked, ", but the parts in ",
                               spec.data.partitions, " were cut with ", key, " = ", cut,
                               "; partition the graph again with it, or leave the key out"));
    }
  }
  Describe(m.graph_name, m.nodes, m.edges, m.relations, m.classes, m.method, m.parts, m.edge_cut, m.seconds,
           m.constraints, m.imbalance, plan);
  plan->notes.push_back(
      StrCat("parts read by their workers from ", spec.data.partitions, " (graph ", m.graph_hash, ")"));
  std::vector<PartFacts> facts;
  for (int32_t w = 0; w < m.parts; ++w) {
    facts.push_back({m.per_part[static_cast<size_t>(w)], m.nodes, m.feature_dim, m.classes, m.relations, m.parts});
    files->push_back(
        {std::filesystem::absolute(m.PartFile(spec.data.partitions, w)).string(), m.graph_hash, w, m.parts});
  }
  return facts;
}

}  // namespace

Result<Plan> GraphPlanner::MakePlan(const jobs::JobSpec& spec, int32_t num_workers, const Logger& log) {
  if (num_workers < 1) return UsageError("the job needs at least one worker");
  TESSEL_RETURN_IF_ERROR(Check(spec));  // the model's own rules, before the graph is read
  Plan plan;
  plan.step_unit = "epoch";
  plan.num_steps = spec.train.epochs;
  Set(plan.summary, "model", spec.model.name);
  std::vector<storage::WorkerPartition> parts;  // sent in the assignments, or
  std::vector<workers::PartFile> files;         // read by the workers (data.format = "partitions")
  std::vector<PartFacts> facts;
  if (spec.data.format == jobs::DataFormat::kPartitions) {
    TESSEL_ASSIGN_OR_RETURN(facts, PartsFromManifest(spec, num_workers, &files, &plan));
    if (spec.train.mode == jobs::TrainMode::kSampled) {
      TESSEL_RETURN_IF_ERROR(AddSampledWorkersFromParts(spec, facts, std::move(files), &plan));
      return plan;
    }
  } else {
    // The whole graph lives only in this scope: once partitioned, the workers' shares are all that is kept.
    TESSEL_ASSIGN_OR_RETURN(storage::HeteroGraph graph, LoadJobGraph(spec, log));
    TESSEL_ASSIGN_OR_RETURN(PartitionResult partition,
                            PartitionGraph(graph, num_workers, spec.partition.method, spec.partition.seed));
    Describe(graph.name, graph.num_nodes(), graph.num_edges(), static_cast<int64_t>(graph.relations.size()),
             graph.num_classes, partition.method, num_workers, partition.edge_cut, partition.seconds,
             partition.constraint_names, partition.imbalance, &plan);
    if (spec.train.mode == jobs::TrainMode::kSampled) {
      TESSEL_RETURN_IF_ERROR(AddSampledWorkers(spec, graph, partition.part_of, num_workers, &plan));
      return plan;
    }
    TESSEL_ASSIGN_OR_RETURN(parts, storage::BuildWorkerPartitions(graph, partition.part_of, num_workers));
    for (const storage::WorkerPartition& p : parts) facts.push_back(FactsOf(p));
  }
  const PartFacts& first = facts.front();
  TESSEL_ASSIGN_OR_RETURN(RgnnSettings settings, RgnnSettingsFor(spec, first.feature_dim));
  workers::ModelShape shape;
  shape.input_dim = settings.input == ModelInput::kOneHot ? first.total_nodes : first.feature_dim;
  shape.classes = first.num_classes;
  shape.workers = first.num_parts;
  TESSEL_RETURN_IF_ERROR(CheckRgnnModel(spec, settings, shape, &plan.notes));
  // Over the budget with the halo resident: the same worker with it streamed, when the model allows it.
  const auto streamed_would_need = [&](const PartFacts& f) -> std::string {
    RgnnSettings streamed = settings;
    streamed.halo = HaloMode::kStreamed;
    if (settings.halo == HaloMode::kStreamed || f.num_parts < 2 || !CheckRgnnModel(spec, streamed, shape, nullptr).ok())
      return "";
    const int64_t bytes = Estimate(streamed, spec.resources.threads_per_worker, f).total_bytes();
    return StrCat(", or set train.halo = \"streamed\" (no halo rows kept; about ", FormatBytes(bytes), ")");
  };
  const int64_t budget = spec.resources.memory_budget_bytes;
  for (size_t w = 0; w < facts.size(); ++w) {
    const WorkerCost c = Estimate(settings, spec.resources.threads_per_worker, facts[w]);
    if (budget > 0 && c.total_bytes() > budget) {
      return UsageError(StrCat(jobs::KeyOrigin(spec, "resources.memory_budget_bytes"),
                               ": resources.memory_budget_bytes = ", budget, " but worker ", w, " needs about ",
                               c.total_bytes(), " bytes (", FormatBytes(c.total_bytes()),
                               "); add workers or raise the budget", streamed_would_need(facts[w])));
    }
    WorkerPlan wp;
    wp.predicted_memory_bytes = c.total_bytes();
    wp.predicted_step_seconds = c.epoch_seconds;
    Set(wp.details, "owned", c.owned);
    Set(wp.details, "halo", c.halo);
    Set(wp.details, "edges", c.edges);
    Set(wp.details, "pairs", c.uniq_pairs);
    if (files.empty()) {
      wp.payload = std::make_unique<workers::RgnnAssignment>(settings, std::move(parts[w]));
    } else {
      wp.payload = std::make_unique<workers::RgnnAssignment>(settings, std::move(files[w]));
    }
    plan.workers.push_back(std::move(wp));
  }
  return plan;
}

void GraphPlanner::Publish(const Plan& plan, monitoring::Metrics& metrics) const {
  const Record* pr = Sub(plan.summary, "partition");
  if (pr == nullptr) return;
  metrics.Set("tessel_partition_edge_cut", static_cast<double>(Int(*pr, "edge_cut")));
  double worst = 1;
  if (const Record* imbalance = Sub(*pr, "imbalance")) {
    for (const RecordField& f : *imbalance) worst = std::max(worst, FindNumber(*imbalance, f.name).value_or(1));
  }
  metrics.Set("tessel_partition_imbalance", worst);
}

void GraphPlanner::Print(const jobs::JobSpec& spec, const Plan& plan, std::ostream& out) const {
  out << "job " << spec.job.name << ": " << NameOf(spec.job.kind) << " / " << spec.model.name << ", "
      << spec.model.layers << " layers, hidden " << spec.model.hidden << ", " << spec.train.epochs << " epochs"
      << (spec.train.mode == TrainMode::kFull && spec.train.halo == HaloMode::kStreamed ? ", halo streamed" : "")
      << "\n";
  if (const Record* g = Sub(plan.summary, "graph")) {
    const RecordValue* name = Find(*g, "name");
    out << "graph " << (name ? std::get<std::string>(name->data) : "?") << ": " << Int(*g, "nodes") << " nodes, "
        << Int(*g, "edges") << " edges, " << Int(*g, "relations") << " relations, " << Int(*g, "classes")
        << " classes\n";
  }
  if (const Record* pr = Sub(plan.summary, "partition")) {
    const RecordValue* method = Find(*pr, "method");
    out << "partition: " << (method ? std::get<std::string>(method->data) : "?") << " into " << plan.workers.size()
        << " parts, edge cut " << Int(*pr, "edge_cut");
    if (const Record* imbalance = Sub(*pr, "imbalance")) {
      bool first = true;
      for (const RecordField& f : *imbalance) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%s %.3f", first ? ", imbalance " : ", ", f.name.c_str(),
                      FindNumber(*imbalance, f.name).value_or(0));
        out << buf;
        first = false;
      }
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.2f s)\n", FindNumber(*pr, "seconds").value_or(0));
    out << buf;
  }
  char buf[160];
  if (spec.train.mode == jobs::TrainMode::kSampled) {
    // Every worker holds the structure (whole, or its own share) and serves its own nodes' feature
    // rows; the time of a sampled epoch is not predicted.
    std::snprintf(buf, sizeof buf, "%-7s %10s %12s %12s\n", "worker", "owned", "edges", "memory");
    out << buf;
    for (size_t w = 0; w < plan.workers.size(); ++w) {
      const WorkerPlan& p = plan.workers[w];
      std::snprintf(buf, sizeof buf, "%-7zu %10lld %12lld %12s\n", w, static_cast<long long>(Int(p.details, "owned")),
                    static_cast<long long>(Int(p.details, "edges")), FormatBytes(p.predicted_memory_bytes).c_str());
      out << buf;
    }
  } else {
    std::snprintf(buf, sizeof buf, "%-7s %10s %10s %12s %12s %12s %14s\n", "worker", "owned", "halo", "edges", "pairs",
                  "memory", "epoch (pred.)");
    out << buf;
    for (size_t w = 0; w < plan.workers.size(); ++w) {
      const WorkerPlan& p = plan.workers[w];
      std::snprintf(buf, sizeof buf, "%-7zu %10lld %10lld %12lld %12lld %12s %12.1f ms\n", w,
                    static_cast<long long>(Int(p.details, "owned")), static_cast<long long>(Int(p.details, "halo")),
                    static_cast<long long>(Int(p.details, "edges")), static_cast<long long>(Int(p.details, "pairs")),
                    FormatBytes(p.predicted_memory_bytes).c_str(), p.predicted_step_seconds * 1e3);
      out << buf;
    }
  }
  if (spec.resources.memory_budget_bytes > 0) {
    out << "memory budget per worker: " << FormatBytes(spec.resources.memory_budget_bytes) << "\n";
  }
}

}  // namespace tessel::orchestrator
