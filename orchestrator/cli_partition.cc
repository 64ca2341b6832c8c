// `tessel partition GRAPH --parts N --out DIR [--method metis|random|range] [--seed S]`
// `mpirun -np P tessel partition --input CHUNKED_DIR --parts N --out DIR [--method ptscotch|random|range]`
//
// Reads a graph file (or, with --input, every rank its share of a chunked graph:
// orchestrator/partitioning/chunked_partition.h), partitions it, and writes DIR/part-K.h5 (one WorkerPartition per
// part) and DIR/partition.json. Everything is written into a sibling temporary directory that is renamed into place at
// the end, so a failure leaves no partial output. partition.json's "files" lists every file the command wrote (itself
// included). An existing DIR is replaced only when it is empty or provably an earlier output: its partition.json lists
// every entry of the directory, and nothing else is there; anything else is refused (exit 2) naming the entries it
// would have removed.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/logging.h"
#include "core/safe_file.h"
#include "jobs/spec.h"
#include "orchestrator/cli.h"
#include "orchestrator/graph_partitioner.h"
#include "orchestrator/partitioning/chunked_partition.h"
#include "orchestrator/partitioning/rank_group.h"
#include "orchestrator/partitioning/rank_output.h"
#include "storage/graph.h"
#include "storage/partition.h"
#include "storage/partition_manifest.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::cli {
namespace {

namespace fs = std::filesystem;
using orchestrator::PartitionResult;

// The method and seed default to the job file's (partition.method, partition.seed): parts cut with the
// defaults are the parts `tessel run` cuts with its own.
struct PartitionOptions {
  std::string graph;
  storage::ChunkedImportOptions input;  // --input DIR: a chunked graph, partitioned by every rank of an mpirun
  std::string out;
  std::string method;  // empty: the job file's default (metis) for GRAPH, ptscotch for --input
  int32_t parts = 0;
  uint64_t seed = jobs::PartitionSection{}.seed;
  int64_t memory_budget_bytes = 0;  // --input: each rank's
};

constexpr const char* kReport = storage::kPartitionManifestName;
constexpr size_t kNamedEntries = 3;  // unknown entries a refusal names

// The files an earlier output's partition.json lists (nothing when it is absent, unreadable or lists
// none: an output of an older Tessel, or not Tessel's at all).
std::vector<std::string> ListedFiles(const fs::path& dir) {
  std::ifstream in(dir / kReport, std::ios::binary);
  if (!in) return {};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto doc = ParseJson(text, (dir / kReport).string());
  if (!doc.ok() || !doc->contains("files") || !doc->at("files").is_array()) return {};
  std::vector<std::string> out;
  for (const Json& f : doc->at("files")) {
    if (f.is_string()) out.push_back(f.get<std::string>());
  }
  return out;
}

// kUsage unless `dir` is absent, an empty directory, or an earlier `tessel partition` output: a
// partition.json listing every entry, each a regular file (never a link or a directory).
Status CheckReplaceable(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return Status::Ok();
  if (fs::is_symlink(st)) {
    return UsageError(
        StrCat("--out ", dir.string(), " is a symbolic link; name the directory itself (it is replaced whole)"));
  }
  if (!fs::is_directory(st)) return UsageError(StrCat("--out ", dir.string(), " exists and is not a directory"));
  const std::vector<std::string> listed = ListedFiles(dir);
  std::vector<std::string> unknown;
  size_t entries = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    ++entries;
    const std::string name = e.path().filename().string();
    const bool ours =
        std::find(listed.begin(), listed.end(), name) != listed.end() && fs::is_regular_file(e.symlink_status(ec));
    if (!ours) unknown.push_back(fs::is_directory(e.symlink_status(ec)) ? name + "/" : name);
  }
  if (ec) return StorageError(StrCat("--out ", dir.string(), ": cannot list it: ", ec.message()));
  if (entries == 0 || unknown.empty()) return Status::Ok();
  std::string named;
  for (size_t i = 0; i < unknown.size() && i < kNamedEntries; ++i) named += StrCat(i ? ", " : "", unknown[i]);
  if (unknown.size() > kNamedEntries) named += StrCat(" and ", unknown.size() - kNamedEntries, " more");
  const std::string why =
      listed.empty() ? StrCat("it is not an earlier partition output (no ", kReport, " listing the files it wrote)")
                     : StrCat("it holds entries that its ", kReport, " does not list");
  return UsageError(StrCat("--out ", dir.string(), ": refusing to replace it: ", why, "; it would remove ", named,
                           "; move them away or choose another --out"));
}

// Moves the finished `tmp` to `dir`, replacing an earlier output only once the new one is complete.
Status CommitDirectory(const fs::path& tmp, const fs::path& dir) {
  TESSEL_RETURN_IF_ERROR(CheckReplaceable(dir));
  std::error_code ec;
  fs::path old;
  if (fs::exists(fs::symlink_status(dir, ec))) {
    old = TemporaryPathFor(dir.string() + ".old");
    fs::rename(dir, old, ec);
    if (ec) return StorageError(StrCat("cannot move the earlier ", dir.string(), " aside: ", ec.message()));
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    std::error_code restore_ec;
    if (!old.empty()) fs::rename(old, dir, restore_ec);
    return StorageError(StrCat("cannot rename ", tmp.string(), " to ", dir.string(), ": ", ec.message()));
  }
  // What was moved aside is what CheckReplaceable proved to be an earlier output: only its listed files.
  if (!old.empty()) fs::remove_all(old, ec);
  return Status::Ok();
}

storage::PartitionManifest ManifestOf(const PartitionOptions& opts, const storage::HeteroGraph& g,
                                      const std::string& graph_hash, const PartitionResult& r, int64_t random_edge_cut,
                                      const std::vector<storage::WorkerPartition>& parts) {
  storage::PartitionManifest m;
  m.graph = opts.graph;
  m.graph_name = g.name;
  m.graph_hash = graph_hash;
  m.nodes = g.num_nodes();
  m.edges = g.num_edges();
  m.relations = static_cast<int64_t>(g.relations.size());
  m.classes = g.num_classes;
  m.feature_dim = parts.empty() ? 0 : parts.front().feature_dim;
  m.method = r.method;
  m.parts = r.num_parts;
  m.seed = static_cast<int64_t>(opts.seed);
  m.edge_cut = r.edge_cut;
  m.random_edge_cut = random_edge_cut;
  m.constraints = r.constraint_names;
  m.imbalance = r.imbalance;
  m.rebalance_moves = r.rebalance_moves;
  m.seconds = r.seconds;
  for (const storage::WorkerPartition& p : parts) {
    m.per_part.push_back(storage::SizesOf(p));
    m.files.push_back(m.per_part.back().file);
  }
  m.files.push_back(kReport);
  return m;
}

void PrintTable(std::ostream& os, const storage::PartitionManifest& m, double total_seconds, const fs::path& out) {
  char line[256];
  os << "graph        " << m.graph << " (" << m.nodes << " nodes, " << m.edges << " edges, " << m.relations
     << " relations)\n";
  os << "method       " << m.method << ", " << m.parts << " parts, seed " << m.seed << "\n";
  if (m.random_edge_cut > 0) {
    std::snprintf(line, sizeof line, "edge cut     %" PRId64 "  (random partition: %" PRId64 ", ratio %.3f)\n",
                  m.edge_cut, m.random_edge_cut, static_cast<double>(m.edge_cut) / m.random_edge_cut);
  } else {
    std::snprintf(line, sizeof line, "edge cut     %" PRId64 "  (random partition: %" PRId64 ")\n", m.edge_cut,
                  m.random_edge_cut);
  }
  os << line;
  os << "imbalance   ";
  bool over = false;
  for (size_t c = 0; c < m.constraints.size(); ++c) {
    std::snprintf(line, sizeof line, " %s %.3f", m.constraints[c].c_str(), m.imbalance[c]);
    os << line;
    over = over || m.imbalance[c] > orchestrator::kMaxImbalance;
  }
  os << (over ? "  (above the 1.05 target: no move could repair it, e.g. one node outweighs a part's slack)" : "")
     << "\n";
  std::snprintf(line, sizeof line, "time         partition %.3f s (%" PRId64 " rebalancing moves), total %.3f s\n",
                m.seconds, m.rebalance_moves, total_seconds);
  os << line;
  std::snprintf(line, sizeof line, "%6s %12s %12s %12s %10s\n", "part", "owned", "halo", "edges", "train");
  os << line;
  for (const storage::PartSizes& p : m.per_part) {
    std::snprintf(line, sizeof line, "%6d %12" PRId64 " %12" PRId64 " %12" PRId64 " %10" PRId64 "\n", p.part, p.owned,
                  p.halo, p.edges, p.train);
    os << line;
  }
  os << "wrote        " << (out / "part-*.h5").string() << " and " << (out / "partition.json").string() << "\n";
}

Result<fs::path> OutputDirectory(const PartitionOptions& opts) {
  const fs::path out = fs::path(opts.out).lexically_normal();
  if (out.filename().empty() || out.filename() == "." || out.filename() == "..")
    return UsageError(StrCat("--out ", opts.out, " does not name a directory"));
  return out;
}

Status PartitionOnRanks(const orchestrator::RankGroup& group, const orchestrator::ChunkedPartitionOptions& o,
                        const fs::path& out, std::chrono::steady_clock::time_point start, std::ostream& os);

// `mpirun -np P tessel partition --input DIR ...`: every rank reads its share and writes the parts it
// owns into one temporary directory on the storage they share; rank 0 writes partition.json and renames
// the directory into place once every rank has written, and removes it when any rank failed.
Status RunChunkedPartition(const PartitionOptions& opts, std::ostream& os) {
  const auto start = std::chrono::steady_clock::now();
  orchestrator::ChunkedPartitionOptions o;
  o.input = opts.input;
  o.parts = opts.parts;
  o.seed = opts.seed;
  o.memory_budget_bytes = opts.memory_budget_bytes;
  const std::string method = opts.method.empty() ? "ptscotch" : opts.method;
  if (method == "ptscotch") {
    o.method = orchestrator::ShardedMethod::kPtScotch;
  } else if (method == "stream") {
    o.method = orchestrator::ShardedMethod::kStream;
  } else if (method == "random") {
    o.method = orchestrator::ShardedMethod::kRandom;
  } else if (method == "range") {
    o.method = orchestrator::ShardedMethod::kRange;
  } else {
    return UsageError(StrCat("--method ", method,
                             " does not partition a chunked graph (--input): expected ptscotch, "
                             "stream, random or range; metis runs on one process over a graph file"));
  }
  TESSEL_ASSIGN_OR_RETURN(const fs::path out, OutputDirectory(opts));
  TESSEL_ASSIGN_OR_RETURN(auto session, workers::MpiSession::Init(nullptr, nullptr));
  TESSEL_ASSIGN_OR_RETURN(const orchestrator::RankGroup group, orchestrator::RankGroup::World());
  return group.PrintedOnce(PartitionOnRanks(group, o, out, start, os));
}

Status PartitionOnRanks(const orchestrator::RankGroup& group, const orchestrator::ChunkedPartitionOptions& o,
                        const fs::path& out, std::chrono::steady_clock::time_point start, std::ostream& os) {
  const bool root = group.rank() == 0;
  TESSEL_RETURN_IF_ERROR(group.Agree(root ? CheckReplaceable(out) : Status::Ok()));
  Result<orchestrator::ChunkedPartition> r = InternalError("not partitioned");
  TESSEL_RETURN_IF_ERROR(orchestrator::WriteDirectoryOnRanks(
      group, out,
      [&](const fs::path& tmp) {
        r = orchestrator::PartitionChunked(group, o, tmp);
        return r.status();
      },
      [&](const fs::path& tmp) {
        TESSEL_RETURN_IF_ERROR(WriteFileAtomically(tmp / kReport, storage::FormatPartitionManifest(r->manifest)));
        return CommitDirectory(tmp, out);
      }));
  if (!root) return Status::Ok();
  for (const std::string& what : r->ignored) {
    os << "note: " << what << " is not read (Tessel trains on node features, labels and masks only)\n";
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintTable(os, r->manifest, total, out);
  char line[160];
  std::snprintf(line, sizeof line, "phases       read %.3f s, partition %.3f s, build %.3f s on %d ranks\n",
                r->read_seconds, r->partition_seconds, r->build_seconds, group.size());
  os << line;
  std::snprintf(line, sizeof line, "%6s %12s %12s %14s %14s\n", "rank", "home nodes", "in-edges", "peak RSS MB",
                "predicted MB");
  os << line;
  for (size_t i = 0; i < r->ranks.size(); ++i) {
    std::snprintf(line, sizeof line, "%6zu %12" PRId64 " %12" PRId64 " %14.1f %14.1f\n", i, r->ranks[i].home_nodes,
                  r->ranks[i].in_edges, static_cast<double>(r->ranks[i].peak_rss_bytes) / 1e6,
                  static_cast<double>(r->ranks[i].predicted_bytes) / 1e6);
    os << line;
  }
  return Status::Ok();
}

Status RunPartition(const PartitionOptions& opts, std::ostream& os) {
  if (opts.graph.empty() == opts.input.dir.empty()) {
    return UsageError("name either a graph file (GRAPH) or a chunked graph directory (--input DIR)");
  }
  if (!opts.input.dir.empty()) return RunChunkedPartition(opts, os);
  const storage::ChunkedImportOptions plain;
  const storage::ChunkedImportOptions& in = opts.input;
  if (in.add_inverse || in.add_self_loop || !in.name.empty() || in.features != plain.features ||
      in.labels != plain.labels || in.train_mask != plain.train_mask || in.val_mask != plain.val_mask ||
      in.test_mask != plain.test_mask) {
    return UsageError(
        "--features, --labels, the masks, --add-inverse, --add-self-loop and --name read a chunked graph (--input); "
        "a graph file (GRAPH) already has its relations and data");
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string method_name =
      opts.method.empty() ? std::string(NameOf(jobs::PartitionSection{}.method)) : opts.method;
  const std::optional<PartitionMethod> chosen = ChoiceNamed<PartitionMethod>(method_name);
  if (!chosen)
    return UsageError(StrCat("--method ", method_name,
                             " does not partition a graph file: expected metis, random or "
                             "range; ptscotch runs over a chunked graph (--input DIR)"));
  const PartitionMethod method = *chosen;
  TESSEL_ASSIGN_OR_RETURN(const fs::path out, OutputDirectory(opts));
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
  const std::string graph_hash = storage::GraphHash(g);
  for (storage::WorkerPartition& p : parts) p.graph_hash = graph_hash;
  const storage::PartitionManifest manifest = ManifestOf(opts, g, graph_hash, r, random_edge_cut, parts);

  TESSEL_ASSIGN_OR_RETURN(const fs::path tmp, orchestrator::MakeTemporaryDirectory(out));
  std::error_code ec;
  Status st;
  for (const storage::WorkerPartition& p : parts) {
    st = storage::WritePartitionFile(p, (tmp / StrCat("part-", p.part, ".h5")).string());
    if (!st.ok()) break;
  }
  if (st.ok()) st = WriteFileAtomically(tmp / kReport, storage::FormatPartitionManifest(manifest));
  if (st.ok()) st = CommitDirectory(tmp, out);
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintTable(os, manifest, total, out);
  return Status::Ok();
}

}  // namespace

void RegisterPartitionCommands(CLI::App& app, Status* result) {
  auto opts = std::make_shared<PartitionOptions>();
  CLI::App* cmd = app.add_subcommand(
      "partition",
      "Partition a graph file (METIS k-way), or under mpirun a chunked graph directory (PT-Scotch), into per-worker "
      "parts");
  cmd->add_option("GRAPH", opts->graph, "Graph file (.h5)");
  cmd->add_option("--input", opts->input.dir,
                  "A graph in DGL's chunked format (the directory of metadata.json), read by every rank of an mpirun");
  AddChunkedReadOptions(cmd, &opts->input);
  cmd->add_option("--parts", opts->parts, "Number of parts (workers)")->required()->check(WholeNumberAtLeast(1));
  cmd->add_option("--out", opts->out, "Output directory for part-K.h5 and partition.json")->required();
  cmd->add_option("--method", opts->method,
                  "GRAPH: metis (default), random or range; --input: ptscotch (default), stream, random or range")
      ->check(CLI::IsMember({"metis", "ptscotch", "stream", "random", "range"}));
  cmd->add_option("--memory-budget", opts->memory_budget_bytes,
                  "--input: the bytes each rank may use; refused before reading when the predicted peak is above")
      ->check(WholeNumberAtLeast(1));
  cmd->add_option("--seed", opts->seed, "Seed for METIS and the random baseline (default: the job's partition.seed)")
      ->capture_default_str();
  cmd->callback([opts, result] { *result = RunPartition(*opts, std::cout); });
}

}  // namespace tessel::cli
