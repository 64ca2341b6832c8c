#include "orchestrator/partitioning/chunked_partition.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <tuple>
#include <utility>

#include "core/logging.h"
#include "orchestrator/graph_partitioner.h"
#include "orchestrator/partitioning/home_graph.h"
#include "orchestrator/partitioning/part_builder.h"
#include "orchestrator/partitioning/ptscotch_parts.h"
#include "orchestrator/partitioning/rebalancer.h"
#include "orchestrator/partitioning/stream_parts.h"
#include "storage/digest.h"
#include "storage/edges_import.h"

namespace tessel::orchestrator {
namespace {

using Clock = std::chrono::steady_clock;
using storage::ChunkedGraph;
using storage::HeteroGraph;
using storage::RelationKind;
using storage::WorkerPartition;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The global per-constraint imbalance of `part`.
Result<std::vector<double>> GlobalImbalance(const RankGroup& group, const std::vector<std::vector<int64_t>>& w,
                                            const std::vector<int64_t>& totals, const std::vector<int32_t>& part,
                                            int32_t k) {
  std::vector<int64_t> part_w(static_cast<size_t>(k) * w.size(), 0);
  for (size_t c = 0; c < w.size(); ++c) {
    for (size_t i = 0; i < part.size(); ++i) part_w[static_cast<size_t>(part[i]) * w.size() + c] += w[c][i];
  }
  TESSEL_RETURN_IF_ERROR(group.Sum(part_w.data(), static_cast<int64_t>(part_w.size())));
  std::vector<double> imbalance(w.size(), 0.0);
  for (size_t c = 0; c < w.size(); ++c) {
    for (int32_t p = 0; p < k; ++p) {
      imbalance[c] = std::max(imbalance[c], static_cast<double>(part_w[static_cast<size_t>(p) * w.size() + c]) * k /
                                                static_cast<double>(totals[c]));
    }
  }
  return imbalance;
}

// The one vertex weight PT-Scotch balances: each constraint scaled so that its total equals the node
// count's, so no constraint dominates the sum.
std::vector<int64_t> CombinedWeight(const std::vector<std::vector<int64_t>>& w, const std::vector<int64_t>& totals,
                                    int64_t n) {
  const size_t m = w.empty() ? 0 : w.front().size();
  std::vector<int64_t> out(m, 0);
  for (size_t c = 0; c < w.size(); ++c) {
    const double scale = totals[c] > 0 ? 16.0 * static_cast<double>(n) / static_cast<double>(totals[c]) : 0.0;
    for (size_t i = 0; i < m; ++i) out[i] += static_cast<int64_t>(static_cast<double>(w[c][i]) * scale + 0.5);
  }
  for (int64_t& v : out) v = std::max<int64_t>(v, 1);
  return out;
}

int64_t PeakRssBytes() {
  struct rusage ru;
  return ::getrusage(RUSAGE_SELF, &ru) == 0 ? static_cast<int64_t>(ru.ru_maxrss) * 1024 : 0;
}

}  // namespace

const char* ShardedMethodName(ShardedMethod m) {
  switch (m) {
    case ShardedMethod::kPtScotch:
      return "ptscotch";
    case ShardedMethod::kStream:
      return "stream";
    case ShardedMethod::kRandom:
      return "random";
    case ShardedMethod::kRange:
      return "range";
  }
  return "?";
}

int64_t PredictRankPeakBytes(ShardedMethod method, const RankShare& s) {
  const double n = static_cast<double>(s.nodes), h = static_cast<double>(s.home_nodes);
  const double e = n > 0 ? static_cast<double>(s.in_edges) * h / n : 0.0;  // this home's in-edges
  const double base = 40e6;                                                // the process: MPI, HDF5, the binary
  const double home = h * 40;           // labels, masks, weights, placement (features stay in the chunk files)
  const double read = 32.0 * e + home;  // the edges sent and received
  const double owned = n / std::max(1, s.parts) * std::max(1.0, static_cast<double>(s.parts) / s.ranks);
  const double halo = std::min(n - std::min(n, owned), 0.5 * e);
  // PT-Scotch's own copies of the distributed graph (on one rank it runs the sequential Scotch, which stays
  // below the build phase).
  // Measured at 10M edges: about 2.2, 1.4 and 1.2 GB on 2, 4 and 8 ranks, a part that does not shrink
  // with P (its folded coarse graphs) and one that does.
  const double scotch =
      method == ShardedMethod::kPtScotch && s.ranks > 1 ? 35.0 * static_cast<double>(s.in_edges) + 150.0 * e : 0.0;
  const double partition = 40.0 * e + home + scotch;  // the edges, the adjacency and its neighbour list
  // The parts: owned rows (twice at most), halo rows with their ids only.
  const double build = 48.0 * e + home + 32.0 * owned + 24.0 * halo;
  // The features, streamed into the written parts: a slab read, sent and received (more only when every
  // home sends its whole slab to one rank).
  const double stream = s.feature_bytes > 0 ? home + 3.0 * static_cast<double>(kFeatureSlabBytes) : 0.0;
  return static_cast<int64_t>(base + std::max({read, partition, build, stream}));
}

Result<ChunkedPartition> PartitionChunked(const RankGroup& group, const ChunkedPartitionOptions& o,
                                          const std::filesystem::path& dir) {
  const auto start = Clock::now();
  const int ranks = group.size(), me = group.rank();
  ChunkedPartition out;

  // 1. metadata.json on every rank, and the shape of the graph.
  Result<ChunkedGraph> read = storage::ReadChunkedMetadata(o.input.dir);
  TESSEL_RETURN_IF_ERROR(group.Agree(read.status()));
  const ChunkedGraph& cg = *read;
  const HeteroGraph skeleton = storage::ChunkedSkeleton(cg, o.input.add_inverse, o.input.add_self_loop);
  const Layout layout(skeleton, ranks);
  const int64_t n = layout.n;
  const int32_t k = o.parts;
  if (k < 1 || (n > 0 && k > n)) {
    return UsageError(StrCat("cannot split the graph of ", cg.metadata_path, " (", n, " nodes) into ", k, " parts"));
  }
  if (n >= kMaxPackedId || static_cast<int64_t>(skeleton.relations.size()) >= kMaxPackedRelations) {
    return UsageError(StrCat(cg.metadata_path, ": ", n, " nodes and ", skeleton.relations.size(),
                             " relations; the distributed partitioner takes below 2^48 nodes and 2^16 relations"));
  }
  out.ignored = storage::IgnoredChunkedData(cg, o.input);
  const std::string options = StrCat(
      "features=", o.input.features, "; labels=", o.input.labels, "; masks=", o.input.train_mask, ",", o.input.val_mask,
      ",", o.input.test_mask, "; inverse=", o.input.add_inverse ? 1 : 0, "; self_loop=", o.input.add_self_loop ? 1 : 0);
  // The memory this rank will need, before anything but the headers is read.
  Result<int64_t> width = FeatureWidth(cg, o.input);
  TESSEL_RETURN_IF_ERROR(group.Agree(width.status()));
  RankShare share;
  share.nodes = n;
  share.home_nodes = layout.home[static_cast<size_t>(me) + 1] - layout.home[static_cast<size_t>(me)];
  for (const storage::ChunkedEdgeType& et : cg.edge_types) share.in_edges += et.count * (o.input.add_inverse ? 2 : 1);
  if (o.input.add_self_loop) share.in_edges += n;
  share.feature_bytes = *width * static_cast<int64_t>(sizeof(float));
  share.parts = k;
  share.ranks = ranks;
  const int64_t predicted = PredictRankPeakBytes(o.method, share);
  TESSEL_RETURN_IF_ERROR(group.Agree(
      o.memory_budget_bytes > 0 && predicted > o.memory_budget_bytes
          ? UsageError(StrCat("this rank would need about ", predicted / 1000000, " MB (predicted for ",
                              share.home_nodes, " of ", n, " nodes), above --memory-budget ",
                              o.memory_budget_bytes / 1000000, " MB; run on more ranks, each holding less",
                              o.method == ShardedMethod::kPtScotch ? ", or --method stream (no PT-Scotch copies)" : ""))
          : Status::Ok()));
  TESSEL_ASSIGN_OR_RETURN(const std::string graph_hash, InputHash(group, cg, options));

  // 2. The home range's node data, then the edges at their destinations' homes.
  Home home;
  TESSEL_RETURN_IF_ERROR(group.Agree(ReadHome(cg, o.input, layout, me, &home)));
  std::vector<Edge> in_edges, out_pairs;
  TESSEL_RETURN_IF_ERROR(ReadEdges(cg, skeleton, layout, group, o.input.add_inverse, &in_edges, &out_pairs));
  out.read_seconds = Since(start);

  // 3. Whole-graph facts.
  int64_t facts[3] = {home.max_label, 0, 0};
  TESSEL_RETURN_IF_ERROR(group.Max(facts, 1));
  const int64_t num_classes = facts[0] + 1;
  facts[1] = facts[2] = 0;
  for (size_t i = 0; i < static_cast<size_t>(home.size()); ++i) {
    if (home.labels[i] < 0) continue;
    facts[1] += home.train[i];
    facts[2] += home.test[i];
  }
  TESSEL_RETURN_IF_ERROR(group.Sum(facts + 1, 2));
  const int64_t total_train = facts[1], total_test = facts[2];

  // 4. The balance constraints (train, edges, nodes; one with a zero total is dropped), as PartitionGraph.
  const auto hn = static_cast<size_t>(home.size());
  std::vector<std::vector<int64_t>> all_w(3, std::vector<int64_t>(hn, 0));
  for (size_t i = 0; i < hn; ++i) {
    all_w[0][i] = home.labels[i] >= 0 && home.train[i] ? 1 : 0;
    all_w[2][i] = 1;
  }
  for (const Edge& e : in_edges) ++all_w[1][static_cast<size_t>(e.dst() - home.lo)];
  int64_t all_totals[3];
  for (int c = 0; c < 3; ++c) all_totals[c] = std::accumulate(all_w[c].begin(), all_w[c].end(), int64_t{0});
  TESSEL_RETURN_IF_ERROR(group.Sum(all_totals, 3));
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> w;
  std::vector<int64_t> totals;
  const char* all_names[3] = {"train", "edges", "nodes"};
  for (int c = 0; c < 3; ++c) {
    if (all_totals[c] == 0) continue;
    names.emplace_back(all_names[c]);
    w.push_back(std::move(all_w[c]));
    totals.push_back(all_totals[c]);
  }

  // 5. The partition of the home nodes.
  const auto part_start = Clock::now();
  std::vector<int64_t> adj_ptr, adj;
  BuildAdjacency(skeleton, home, in_edges, out_pairs, &adj_ptr, &adj);
  out_pairs = {};
  std::vector<int64_t> neighbours(adj);
  std::sort(neighbours.begin(), neighbours.end());
  neighbours.erase(std::unique(neighbours.begin(), neighbours.end()), neighbours.end());
  std::vector<int64_t> interleaved(hn * w.size()), local(w.size(), 0);  // the weights, node by node
  for (size_t i = 0; i < hn; ++i) {
    for (size_t c = 0; c < w.size(); ++c) {
      interleaved[i * w.size() + c] = w[c][i];
      local[c] += w[c][i];
    }
  }
  const auto ncon = static_cast<int32_t>(w.size());
  std::vector<int32_t> part(hn, 0);
  int64_t moves = 0;
  if (k > 1 && o.method == ShardedMethod::kRange) {
    for (size_t i = 0; i < hn; ++i) part[i] = RangePartOf(home.lo + static_cast<int64_t>(i), n, k);
  } else if (k > 1 && o.method == ShardedMethod::kRandom) {
    for (size_t i = 0; i < hn; ++i) part[i] = RandomPartOf(home.lo + static_cast<int64_t>(i), k, o.seed);
  } else if (k > 1) {
    if (o.method == ShardedMethod::kStream) {
      TESSEL_ASSIGN_OR_RETURN(
          part, StreamParts(group, layout, home, adj_ptr, adj, neighbours, interleaved, ncon, k, kMaxImbalance - 1e-9));
    } else {
      TESSEL_ASSIGN_OR_RETURN(part,
                              PtScotchParts(group, layout.home, adj_ptr, adj, CombinedWeight(w, totals, n), k, o.seed));
    }
    // PT-Scotch balances one weight, and a stream can meet a node heavier than the slack left; the repair
    // brings every constraint within the target. Each rank repairs its own home nodes to its own totals,
    // which bounds the sum; tighter targets as the one-process path tries them, until the whole is within
    // kMaxImbalance.
    for (const double target : {kMaxImbalance, 1.045, 1.04, 1.03}) {
      TESSEL_ASSIGN_OR_RETURN(const std::vector<int32_t> remote, Resolve(group, layout, home.lo, part, neighbours));
      const HomeView view{adj_ptr, adj, part, home.lo, home.hi, neighbours, remote};
      moves += Rebalancer(view, interleaved.data(), ncon, local, k, target - 1e-9, part).Run();
      TESSEL_ASSIGN_OR_RETURN(const std::vector<double> now, GlobalImbalance(group, w, totals, part, k));
      if (now.empty() || *std::max_element(now.begin(), now.end()) <= kMaxImbalance) break;
    }
    TESSEL_RETURN_IF_ERROR(group.Sum(&moves, 1));
  }
  interleaved = {};

  // 6. New ids: nodes ordered by (part, original id); homes are in id order, so a home's nodes of part p
  // come after those of every lower rank.
  std::vector<int64_t> sizes(static_cast<size_t>(k), 0), before;
  for (const int32_t p : part) ++sizes[static_cast<size_t>(p)];
  before = sizes;
  TESSEL_RETURN_IF_ERROR(group.ExclusivePrefixSum(before.data(), k));
  TESSEL_RETURN_IF_ERROR(group.Sum(sizes.data(), k));
  std::vector<int64_t> offsets(static_cast<size_t>(k) + 1, 0);
  for (int32_t p = 0; p < k; ++p)
    offsets[static_cast<size_t>(p) + 1] = offsets[static_cast<size_t>(p)] + sizes[static_cast<size_t>(p)];
  std::vector<Placed> placed(hn);
  {
    std::vector<int64_t> next(before);
    for (size_t i = 0; i < hn; ++i) {
      const auto p = static_cast<size_t>(part[i]);
      placed[i] = {offsets[p] + next[p]++, part[i], 0};
    }
  }

  // 7. Edge cut and balance, on the symmetric adjacency (each undirected edge counted at its lower end).
  TESSEL_ASSIGN_OR_RETURN(const std::vector<int32_t> where, Resolve(group, layout, home.lo, part, neighbours));
  int64_t cuts[2] = {0, 0};  // this partition's, the random baseline's
  for (size_t i = 0; i < hn; ++i) {
    const int64_t u = home.lo + static_cast<int64_t>(i);
    for (int64_t j = adj_ptr[i]; j < adj_ptr[i + 1]; ++j) {
      const int64_t v = adj[static_cast<size_t>(j)];
      if (v <= u) continue;
      const auto at = std::lower_bound(neighbours.begin(), neighbours.end(), v) - neighbours.begin();
      cuts[0] += where[static_cast<size_t>(at)] != part[i] ? 1 : 0;
      cuts[1] += RandomPartOf(v, k, o.seed) != RandomPartOf(u, k, o.seed) ? 1 : 0;
    }
  }
  TESSEL_RETURN_IF_ERROR(group.Sum(cuts, 2));
  adj = {};
  adj_ptr = {};
  neighbours = {};
  TESSEL_ASSIGN_OR_RETURN(const std::vector<double> imbalance, GlobalImbalance(group, w, totals, part, k));
  w = {};
  out.partition_seconds = Since(part_start);

  // 8. The parts this rank owns.
  const auto build_start = Clock::now();
  RankFigures mine{home.size(), static_cast<int64_t>(in_edges.size()), 0, predicted};
  PartFacts part_facts;
  part_facts.parts = k;
  part_facts.offsets = offsets;
  for (const storage::Relation& r : skeleton.relations) part_facts.relation_names.push_back(r.name);
  part_facts.type_offsets = layout.type_offsets;
  part_facts.total_nodes = n;
  part_facts.num_classes = num_classes;
  part_facts.total_train = total_train;
  part_facts.total_test = total_test;
  part_facts.graph_hash = graph_hash;
  TESSEL_ASSIGN_OR_RETURN(std::vector<WorkerPartition> parts,
                          BuildOwnedParts(group, layout, home, std::move(in_edges), placed, part_facts));
  constexpr size_t kSizeFields = 6;
  std::vector<int64_t> part_sizes(static_cast<size_t>(k) * kSizeFields, 0);
  for (const WorkerPartition& wp : parts) {
    const storage::PartSizes s = storage::SizesOf(wp);
    const int64_t fields[kSizeFields] = {s.owned, s.halo, s.edges, s.pairs, s.train, s.features};
    std::copy(fields, fields + kSizeFields, part_sizes.begin() + static_cast<ptrdiff_t>(wp.part * kSizeFields));
  }
  // Each part's file with all but its features (its arrays freed once there), then the features, from
  // the chunk files a slab at a time.
  std::vector<storage::PartitionFileWriter> writers;
  Status st;
  for (WorkerPartition& wp : parts) {
    Result<storage::PartitionFileWriter> w =
        storage::PartitionFileWriter::Create(wp, (dir / StrCat("part-", wp.part, ".h5")).string());
    st = w.status();
    if (!st.ok()) break;
    writers.push_back(std::move(*w));
    wp = WorkerPartition();
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  TESSEL_RETURN_IF_ERROR(StreamOwnedFeatures(group, cg, o.input, layout, home, placed, offsets, writers));
  for (storage::PartitionFileWriter& w : writers) {
    st = w.Commit();
    if (!st.ok()) break;
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  out.build_seconds = Since(build_start);

  // 9. The manifest, the same on every rank.
  TESSEL_RETURN_IF_ERROR(group.Sum(part_sizes.data(), static_cast<int64_t>(part_sizes.size())));
  storage::PartitionManifest& m = out.manifest;
  m.graph = o.input.dir;
  m.graph_name = !o.input.name.empty()    ? o.input.name
                 : !cg.graph_name.empty() ? cg.graph_name
                                          : storage::StemOf(std::filesystem::absolute(o.input.dir).filename());
  m.graph_hash = graph_hash;
  m.nodes = n;
  int64_t edges_total = 0;
  for (const storage::ChunkedEdgeType& et : cg.edge_types) edges_total += et.count * (o.input.add_inverse ? 2 : 1);
  if (o.input.add_self_loop) edges_total += n;
  m.edges = edges_total;
  m.relations = static_cast<int64_t>(skeleton.relations.size());
  m.classes = num_classes;
  m.feature_dim = home.feature_dim;
  m.method = ShardedMethodName(o.method);
  m.parts = k;
  m.seed = static_cast<int64_t>(o.seed);
  m.edge_cut = cuts[0];
  m.random_edge_cut = cuts[1];
  m.constraints = names;
  m.imbalance = imbalance;
  m.rebalance_moves = moves;
  m.seconds = out.partition_seconds;
  for (int32_t p = 0; p < k; ++p) {
    storage::PartSizes s;
    s.part = p;
    s.file = StrCat("part-", p, ".h5");
    const int64_t* f = part_sizes.data() + static_cast<size_t>(p) * kSizeFields;
    s.owned = f[0];
    s.halo = f[1];
    s.edges = f[2];
    s.pairs = f[3];
    s.train = f[4];
    s.features = f[5];
    m.per_part.push_back(s);
    m.files.push_back(s.file);
  }
  m.files.push_back(storage::kPartitionManifestName);

  mine.peak_rss_bytes = PeakRssBytes();
  out.ranks.resize(static_cast<size_t>(ranks));
  for (int64_t RankFigures::*field : {&RankFigures::home_nodes, &RankFigures::in_edges, &RankFigures::peak_rss_bytes,
                                      &RankFigures::predicted_bytes}) {
    TESSEL_ASSIGN_OR_RETURN(const std::vector<int64_t> all, group.AllGather(mine.*field));
    for (size_t r = 0; r < all.size(); ++r) out.ranks[r].*field = all[r];
  }
  return out;
}

}  // namespace tessel::orchestrator
