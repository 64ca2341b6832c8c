#include "orchestrator/job_plan.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "core/logging.h"

namespace tessel::orchestrator {

namespace {

PartitionMethod ToMethod(jobs::PartitionMethod m) {
  switch (m) {
    case jobs::PartitionMethod::kRandom: return PartitionMethod::kRandom;
    case jobs::PartitionMethod::kRange: return PartitionMethod::kRange;
    case jobs::PartitionMethod::kMetis: break;
  }
  return PartitionMethod::kMetis;
}

// A deliberately simple roofline: dense products at kGemmFlops per thread, everything else streams
// memory at kBandwidth. Good enough to compare plans and catch a budget overrun, not to promise times.
constexpr double kGemmFlopsPerThread = 20e9;
constexpr double kBandwidth = 5e9;

WorkerCost Estimate(const jobs::JobSpec& spec, const storage::WorkerPartition& p) {
  WorkerCost c;
  c.owned = p.num_owned;
  c.halo = p.num_rows() - p.num_owned;
  c.edges = static_cast<int64_t>(p.src.size());
  for (int32_t r = 0; r < p.num_relations(); ++r) {
    int64_t prev = -1;
    for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
      if (p.src[static_cast<size_t>(e)] != prev) ++c.uniq_pairs, prev = p.src[static_cast<size_t>(e)];
    }
  }
  const bool onehot = spec.model.input == "onehot" || (spec.model.input == "auto" && p.feature_dim == 0);
  std::vector<int64_t> dims;
  dims.push_back(onehot ? p.total_nodes : p.feature_dim);
  for (int l = 1; l < spec.model.layers; ++l) dims.push_back(spec.model.hidden);
  dims.push_back(p.num_classes);
  const int64_t R = p.num_relations(), rows = p.num_rows();
  int64_t params = 0, act = 0;
  double flops = 0, bytes = 0;
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    const int64_t in = dims[l], out = dims[l + 1];
    params += R * in * out;
    act += (c.uniq_pairs + c.owned + rows) * out;
    if (l == 0 && onehot) {
      bytes += 2.0 * static_cast<double>(c.uniq_pairs * out) * 4;
    } else {
      flops += 6.0 * static_cast<double>(c.uniq_pairs * in * out);  // fwd + dX + dW
    }
    bytes += 4.0 * static_cast<double>(c.edges * out) * 4;  // aggregate fwd + bwd, read + write
  }
  bytes += static_cast<double>(params) * 4 * 7;  // Adam reads param/grad/m/v, writes param/m/v
  if (p.num_parts > 1) bytes += static_cast<double>(params) * 4 * 2;  // allreduce
  c.parameter_bytes = params * 4 * 4;
  c.activation_bytes = act * 4 * 2;  // outputs and their gradients
  c.graph_bytes = c.edges * (8 * 4 + 4) + c.uniq_pairs * 16 + rows * 8 + static_cast<int64_t>(p.features.size()) * 4;
  const double threads = std::max(1, spec.resources.threads_per_worker);
  c.predicted_epoch_seconds = flops / (kGemmFlopsPerThread * threads) + bytes / kBandwidth;
  return c;
}

std::string Bytes(int64_t b) {
  char buf[32];
  const double v = static_cast<double>(b);
  if (v >= 1 << 30) std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1 << 30));
  else if (v >= 1 << 20) std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024);
  return buf;
}

}  // namespace

Result<JobPlan> PlanJob(const jobs::JobSpec& spec, const storage::HeteroGraph& graph, int32_t num_workers) {
  if (num_workers < 1) return UsageError("the job needs at least one worker");
  JobPlan plan;
  plan.num_workers = num_workers;
  TESSEL_ASSIGN_OR_RETURN(plan.partition,
                          PartitionGraph(graph, num_workers, ToMethod(spec.partition.method), spec.partition.seed));
  TESSEL_ASSIGN_OR_RETURN(plan.parts, storage::BuildWorkerPartitions(graph, plan.partition.part_of, num_workers));
  for (const auto& p : plan.parts) plan.costs.push_back(Estimate(spec, p));
  const int64_t budget = spec.resources.memory_budget_bytes;
  if (budget > 0) {
    for (size_t w = 0; w < plan.costs.size(); ++w) {
      if (plan.costs[w].total_bytes() > budget) {
        return UsageError(StrCat(jobs::KeyOrigin(spec, "resources.memory_budget_bytes"),
                                 ": resources.memory_budget_bytes = ", budget, " but worker ", w, " needs about ",
                                 plan.costs[w].total_bytes(), " bytes (", Bytes(plan.costs[w].total_bytes()),
                                 "); add workers or raise the budget"));
      }
    }
  }
  return plan;
}

void PrintPlan(const jobs::JobSpec& spec, const storage::HeteroGraph& graph, const JobPlan& plan, std::ostream& out) {
  const PartitionResult& pr = plan.partition;
  out << "job " << spec.job.name << ": " << jobs::KindName(spec.job.kind) << " / " << spec.model.name << ", "
      << spec.model.layers << " layers, hidden " << spec.model.hidden << ", " << spec.train.epochs << " epochs\n";
  out << "graph " << graph.name << ": " << graph.num_nodes() << " nodes, " << graph.num_edges() << " edges, "
      << graph.relations.size() << " relations, " << graph.num_classes << " classes\n";
  out << "partition: " << pr.method << " into " << plan.num_workers << " parts, edge cut " << pr.edge_cut;
  for (size_t i = 0; i < pr.constraint_names.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.3f", i == 0 ? ", imbalance " : ", ", pr.constraint_names[i].c_str(), pr.imbalance[i]);
    out << buf;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, " (%.2f s)\n", pr.seconds);
  out << buf;
  std::snprintf(buf, sizeof buf, "%-7s %10s %10s %12s %12s %12s %14s\n", "worker", "owned", "halo", "edges",
                "pairs", "memory", "epoch (pred.)");
  out << buf;
  for (size_t w = 0; w < plan.costs.size(); ++w) {
    const WorkerCost& c = plan.costs[w];
    std::snprintf(buf, sizeof buf, "%-7zu %10lld %10lld %12lld %12lld %12s %12.1f ms\n", w, static_cast<long long>(c.owned),
                  static_cast<long long>(c.halo), static_cast<long long>(c.edges), static_cast<long long>(c.uniq_pairs),
                  Bytes(c.total_bytes()).c_str(), c.predicted_epoch_seconds * 1e3);
    out << buf;
  }
  if (spec.resources.memory_budget_bytes > 0) out << "memory budget per worker: " << Bytes(spec.resources.memory_budget_bytes) << "\n";
}

}  // namespace tessel::orchestrator
