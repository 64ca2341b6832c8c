// `tessel partition GRAPH --parts N --out DIR [--method metis|random|range] [--seed S]`
//
// Reads a graph file, partitions it, and writes DIR/part-K.h5 (one WorkerPartition per part) and
// DIR/partition.json. Everything is written into a sibling temporary directory that is renamed into
// place at the end, so a failure leaves no partial output. An existing DIR is replaced only if it is
// empty or holds an earlier partition.json; anything else is refused.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/logging.h"
#include "orchestrator/cli.h"
#include "orchestrator/graph_partitioner.h"
#include "storage/graph.h"
#include "storage/partition.h"

namespace tessel::cli {
namespace {

namespace fs = std::filesystem;
using orchestrator::PartitionResult;

struct PartitionOptions {
  std::string graph;
  std::string out;
  std::string method = "metis";
  int32_t parts = 0;
  uint64_t seed = 1;
};

// kUsage unless `dir` is absent, an empty directory, or an earlier `tessel partition` output.
Status CheckReplaceable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  if (!fs::is_directory(dir, ec)) return UsageError(StrCat("--out ", dir.string(), " exists and is not a directory"));
  if (fs::is_empty(dir, ec) || fs::exists(dir / "partition.json", ec)) return Status::Ok();
  return UsageError(
      StrCat("--out ", dir.string(),
             " exists and is not an earlier partition output (no partition.json); refusing to replace it"));
}

// Moves the finished `tmp` to `dir`, replacing an earlier output only once the new one is complete.
Status CommitDirectory(const fs::path& tmp, const fs::path& dir) {
  TESSEL_RETURN_IF_ERROR(CheckReplaceable(dir));
  std::error_code ec;
  fs::path old;
  if (fs::exists(dir, ec)) {
    old = dir;
    old += StrCat(".old-", ::getpid());
    fs::rename(dir, old, ec);
    if (ec) return StorageError(StrCat("cannot move the earlier ", dir.string(), " aside: ", ec.message()));
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    std::error_code restore_ec;
    if (!old.empty()) fs::rename(old, dir, restore_ec);
    return StorageError(StrCat("cannot rename ", tmp.string(), " to ", dir.string(), ": ", ec.message()));
  }
  if (!old.empty()) fs::remove_all(old, ec);
  return Status::Ok();
}

std::string PartitionJson(const PartitionOptions& opts, const storage::HeteroGraph& g, const PartitionResult& r,
                          int64_t random_edge_cut, const std::vector<storage::WorkerPartition>& parts) {
  Json doc = Json::object();
  doc["graph"] = opts.graph;
  doc["graph_name"] = g.name;
  doc["nodes"] = g.num_nodes();
  doc["edges"] = g.num_edges();
  doc["method"] = r.method;
  doc["parts"] = r.num_parts;
  doc["seed"] = static_cast<int64_t>(opts.seed);
  doc["edge_cut"] = r.edge_cut;
  doc["random_edge_cut"] = random_edge_cut;
  doc["cut_ratio"] = static_cast<double>(r.edge_cut) / static_cast<double>(random_edge_cut);
  doc["constraints"] = r.constraint_names;
  doc["imbalance"] = r.imbalance;
  doc["rebalance_moves"] = r.rebalance_moves;
  doc["seconds"] = r.seconds;
  Json& per_part = doc["per_part"] = Json::array();
  for (const storage::WorkerPartition& p : parts) {
    int64_t train = 0;
    for (size_t i = 0; i < p.train_mask.size(); ++i) train += (p.train_mask[i] && p.labels[i] >= 0) ? 1 : 0;
    per_part.push_back({{"part", p.part},
                        {"file", StrCat("part-", p.part, ".h5")},
                        {"owned", p.num_owned},
                        {"halo", p.num_rows() - p.num_owned},
                        {"edges", static_cast<int64_t>(p.src.size())},
                        {"train", train}});
  }
  return FormatJson(doc, JsonLayout::kIndented) + "\n";
}

void PrintTable(std::ostream& os, const PartitionOptions& opts, const storage::HeteroGraph& g, const PartitionResult& r,
                int64_t random_edge_cut, const std::vector<storage::WorkerPartition>& parts, double total_seconds,
                const fs::path& out) {
  char line[256];
  os << "graph        " << opts.graph << " (" << g.num_nodes() << " nodes, " << g.num_edges() << " edges, "
     << g.relations.size() << " relations)\n";
  os << "method       " << r.method << ", " << r.num_parts << " parts, seed " << opts.seed << "\n";
  if (random_edge_cut > 0) {
    std::snprintf(line, sizeof line, "edge cut     %" PRId64 "  (random partition: %" PRId64 ", ratio %.3f)\n",
                  r.edge_cut, random_edge_cut, static_cast<double>(r.edge_cut) / random_edge_cut);
  } else {
    std::snprintf(line, sizeof line, "edge cut     %" PRId64 "  (random partition: %" PRId64 ")\n", r.edge_cut,
                  random_edge_cut);
  }
  os << line;
  os << "imbalance   ";
  bool over = false;
  for (size_t c = 0; c < r.constraint_names.size(); ++c) {
    std::snprintf(line, sizeof line, " %s %.3f", r.constraint_names[c].c_str(), r.imbalance[c]);
    os << line;
    over = over || r.imbalance[c] > orchestrator::kMaxImbalance;
  }
  os << (over ? "  (above the 1.05 target: no move could repair it, e.g. one node outweighs a part's slack)" : "")
     << "\n";
  std::snprintf(line, sizeof line, "time         partition %.3f s (%d rebalancing moves), total %.3f s\n", r.seconds,
                r.rebalance_moves, total_seconds);
  os << line;
  std::snprintf(line, sizeof line, "%6s %12s %12s %12s %10s\n", "part", "owned", "halo", "edges", "train");
  os << line;
  for (const storage::WorkerPartition& p : parts) {
    int64_t train = 0;
    for (size_t i = 0; i < p.train_mask.size(); ++i) train += (p.train_mask[i] && p.labels[i] >= 0) ? 1 : 0;
    std::snprintf(line, sizeof line, "%6d %12" PRId64 " %12" PRId64 " %12zu %10" PRId64 "\n", p.part, p.num_owned,
                  p.num_rows() - p.num_owned, p.src.size(), train);
    os << line;
  }
  os << "wrote        " << (out / "part-*.h5").string() << " and " << (out / "partition.json").string() << "\n";
}

Status WriteTextFile(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) return StorageError(StrCat("cannot write ", path.string()));
  return Status::Ok();
}

Status RunPartition(const PartitionOptions& opts, std::ostream& os) {
  const auto start = std::chrono::steady_clock::now();
  const std::optional<PartitionMethod> chosen = ChoiceNamed<PartitionMethod>(opts.method);
  if (!chosen) return UsageError(StrCat("unknown partition method '", opts.method, "' (expected metis, random or range)"));
  const PartitionMethod method = *chosen;
  const fs::path out = fs::path(opts.out).lexically_normal();
  if (out.filename().empty() || out.filename() == "." || out.filename() == "..")
    return UsageError(StrCat("--out ", opts.out, " does not name a directory"));
  TESSEL_RETURN_IF_ERROR(CheckReplaceable(out));

  TESSEL_ASSIGN_OR_RETURN(storage::HeteroGraph g, storage::ReadGraph(opts.graph));
  TESSEL_ASSIGN_OR_RETURN(PartitionResult r, orchestrator::PartitionGraph(g, opts.parts, method, opts.seed));
  int64_t random_edge_cut = r.edge_cut;
  if (method != PartitionMethod::kRandom) {
    TESSEL_ASSIGN_OR_RETURN(PartitionResult rnd,
                            orchestrator::PartitionGraph(g, opts.parts, PartitionMethod::kRandom, opts.seed));
    random_edge_cut = rnd.edge_cut;
  }
  TESSEL_ASSIGN_OR_RETURN(std::vector<storage::WorkerPartition> parts,
                          storage::BuildWorkerPartitions(g, r.part_of, r.num_parts));

  std::error_code ec;
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) return StorageError(StrCat("cannot create ", parent.string(), ": ", ec.message()));
  fs::path tmp = out;
  tmp += StrCat(".tmp-", ::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec) {
    return StorageError(StrCat("cannot create ", tmp.string(), ": ", ec.message()));
  }
  Status st;
  for (const storage::WorkerPartition& p : parts) {
    st = storage::WritePartitionFile(p, (tmp / StrCat("part-", p.part, ".h5")).string());
    if (!st.ok()) break;
  }
  if (st.ok()) st = WriteTextFile(tmp / "partition.json", PartitionJson(opts, g, r, random_edge_cut, parts));
  if (st.ok()) st = CommitDirectory(tmp, out);
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintTable(os, opts, g, r, random_edge_cut, parts, total, out);
  return Status::Ok();
}

}  // namespace

void RegisterPartitionCommands(CLI::App& app, Status* result) {
  auto opts = std::make_shared<PartitionOptions>();
  CLI::App* cmd = app.add_subcommand("partition", "Partition a graph file into per-worker parts (METIS k-way)");
  cmd->add_option("GRAPH", opts->graph, "Graph file (.h5)")->required();
  cmd->add_option("--parts", opts->parts, "Number of parts (workers)")->required()->check(WholeNumberAtLeast(1));
  cmd->add_option("--out", opts->out, "Output directory for part-K.h5 and partition.json")->required();
  cmd->add_option("--method", opts->method, "metis (default), random or range")
      ->check(CLI::IsMember({"metis", "random", "range"}));
  cmd->add_option("--seed", opts->seed, "Seed for METIS and the random baseline (default 1)");
  cmd->callback([opts, result] { *result = RunPartition(*opts, std::cout); });
}

}  // namespace tessel::cli
