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
#include "orchestrator/partitioning/ptscotch_parts.h"
#include "orchestrator/partitioning/rebalancer.h"
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

// An edge in global original ids. `pad` keeps the bytes MPI moves defined.
struct Edge {
  int64_t src = 0, dst = 0;
  int32_t rel = 0, pad = 0;
};

// Where a node went: its part and its new id.
struct Placed {
  int64_t new_id = 0;
  int32_t part = 0, pad = 0;
};

// A node as its part's builder receives it.
struct NodeOut {
  int64_t new_id = 0, orig_id = 0, label = -1;
  uint8_t train = 0, val = 0, test = 0, pad[5] = {};
};

// An in-edge as its part's builder receives it.
struct EdgeOut {
  int64_t src_new = 0, dst_new = 0;
  int32_t rel = 0, pad = 0;
};

// The id space and its home ranges.
struct Layout {
  std::vector<int64_t> type_offsets;  // [types + 1]
  std::vector<int64_t> home;          // [ranks + 1]: rank r is the home of [home[r], home[r + 1])
  int64_t n = 0;
  Layout(const HeteroGraph& skeleton, int ranks) {
    type_offsets.push_back(0);
    for (const storage::NodeType& t : skeleton.node_types) type_offsets.push_back(type_offsets.back() + t.count);
    n = type_offsets.back();
    for (int r = 0; r <= ranks; ++r) {
      home.push_back(static_cast<int64_t>(static_cast<unsigned __int128>(n) * static_cast<uint64_t>(r) /
                                          static_cast<uint64_t>(ranks)));
    }
  }
  int HomeOf(int64_t id) const {
    return static_cast<int>(std::upper_bound(home.begin(), home.end(), id) - home.begin()) - 1;
  }
  int32_t TypeOf(int64_t id) const {
    return static_cast<int32_t>(std::upper_bound(type_offsets.begin(), type_offsets.end(), id) - type_offsets.begin()) -
           1;
  }
};

// What a home rank holds of its nodes [lo, hi).
struct Home {
  int64_t lo = 0, hi = 0;
  int64_t feature_dim = 0;  // the graph's common width (0: featureless or the types disagree)
  std::vector<float> features;
  std::vector<int64_t> labels;
  std::vector<uint8_t> train, val, test;
  int64_t max_label = -1;
  int64_t size() const { return hi - lo; }
};

// Reads the node data of the home range (and every type's chunk headers, so every rank agrees on the
// widths).
Status ReadHome(const ChunkedGraph& cg, const storage::ChunkedImportOptions& o, const Layout& layout, int rank,
                Home* home) {
  home->lo = layout.home[static_cast<size_t>(rank)];
  home->hi = layout.home[static_cast<size_t>(rank) + 1];
  const size_t types = cg.node_types.size();
  std::vector<storage::ChunkedNodeRows> rows(types);
  std::vector<int64_t> dims(types, 0);
  for (size_t t = 0; t < types; ++t) {
    const int64_t off = layout.type_offsets[t], count = cg.node_types[t].count;
    const int64_t a = std::clamp(home->lo, off, off + count), b = std::clamp(home->hi, off, off + count);
    TESSEL_ASSIGN_OR_RETURN(rows[t], storage::ReadNodeRows(cg, o, static_cast<int32_t>(t), a - off, b - a));
    dims[t] = count > 0 ? rows[t].feature_dim : 0;
  }
  home->feature_dim =
      std::all_of(dims.begin(), dims.end(), [&](int64_t d) { return d == dims.front(); }) ? dims.front() : 0;
  const auto n = static_cast<size_t>(home->size());
  home->labels.assign(n, -1);
  home->train.assign(n, 0);
  home->val.assign(n, 0);
  home->test.assign(n, 0);
  home->features.reserve(n * static_cast<size_t>(home->feature_dim));
  for (size_t t = 0; t < types; ++t) {
    const int64_t off = layout.type_offsets[t], count = cg.node_types[t].count;
    const int64_t a = std::clamp(home->lo, off, off + count), b = std::clamp(home->hi, off, off + count);
    const auto at = static_cast<size_t>(a - home->lo);
    const storage::ChunkedNodeRows& r = rows[t];
    std::copy(r.labels.begin(), r.labels.end(), home->labels.begin() + static_cast<ptrdiff_t>(at));
    std::copy(r.train_mask.begin(), r.train_mask.end(), home->train.begin() + static_cast<ptrdiff_t>(at));
    std::copy(r.val_mask.begin(), r.val_mask.end(), home->val.begin() + static_cast<ptrdiff_t>(at));
    std::copy(r.test_mask.begin(), r.test_mask.end(), home->test.begin() + static_cast<ptrdiff_t>(at));
    if (home->feature_dim > 0) home->features.insert(home->features.end(), r.features.begin(), r.features.end());
    (void)b;
  }
  for (const int64_t l : home->labels) home->max_label = std::max(home->max_label, l);
  return Status::Ok();
}

// Reads every ranks-th edge chunk and sends each edge to the home of its destination (and, without
// inverse relations, the reversed pair to the home of its source for the symmetric adjacency). Appends
// the edges whose destination this rank is the home of, self-loops included, to *in_edges and the
// reversed pairs to *out_pairs; *counts gets the edges this rank read of each edge type.
Status ReadEdges(const ChunkedGraph& cg, const HeteroGraph& skeleton, const Layout& layout, const RankGroup& group,
                 bool add_inverse, std::vector<Edge>* in_edges, std::vector<Edge>* out_pairs) {
  const int ranks = group.size();
  const auto base = static_cast<int32_t>(cg.edge_types.size());
  std::vector<std::vector<Edge>> to_dst(static_cast<size_t>(ranks)), to_src(static_cast<size_t>(ranks));
  std::vector<int64_t> counts(static_cast<size_t>(base), 0);
  Status st;
  int64_t index = 0;
  std::vector<int64_t> src, dst;
  for (int32_t e = 0; e < base && st.ok(); ++e) {
    const storage::ChunkedEdgeType& et = cg.edge_types[static_cast<size_t>(e)];
    const int64_t so = layout.type_offsets[static_cast<size_t>(et.src_type)];
    const int64_t doff = layout.type_offsets[static_cast<size_t>(et.dst_type)];
    for (int32_t c = 0; c < static_cast<int32_t>(et.files.paths.size()); ++c, ++index) {
      if (index % ranks != group.rank()) continue;
      src.clear();
      dst.clear();
      st = storage::ReadEdgeChunk(cg, e, c, &src, &dst);
      if (!st.ok()) break;
      counts[static_cast<size_t>(e)] += static_cast<int64_t>(src.size());
      for (size_t i = 0; i < src.size(); ++i) {
        const int64_t s = so + src[i], d = doff + dst[i];
        to_dst[static_cast<size_t>(layout.HomeOf(d))].push_back({s, d, e, 0});
        if (add_inverse) {
          to_dst[static_cast<size_t>(layout.HomeOf(s))].push_back({d, s, base + e, 0});
        } else if (s != d) {
          to_src[static_cast<size_t>(layout.HomeOf(s))].push_back({d, s, e, 0});
        }
      }
    }
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  TESSEL_RETURN_IF_ERROR(group.Sum(counts.data(), base));
  for (int32_t e = 0; e < base; ++e) {
    const storage::ChunkedEdgeType& et = cg.edge_types[static_cast<size_t>(e)];
    if (counts[static_cast<size_t>(e)] != et.count) {
      return BadDataError(StrCat(cg.metadata_path, ": edge type '", et.canonical, "': its chunks hold ",
                                 counts[static_cast<size_t>(e)], " edges, metadata.json says ", et.count));
    }
  }
  TESSEL_ASSIGN_OR_RETURN(*in_edges, group.Exchange(to_dst));
  to_dst = {};
  TESSEL_ASSIGN_OR_RETURN(*out_pairs, group.Exchange(to_src));
  // Self-loops are made where they land.
  const int64_t lo = layout.home[static_cast<size_t>(group.rank())];
  const int64_t hi = layout.home[static_cast<size_t>(group.rank()) + 1];
  for (int32_t r = 0; r < static_cast<int32_t>(skeleton.relations.size()); ++r) {
    const storage::Relation& rel = skeleton.relations[static_cast<size_t>(r)];
    if (rel.kind != RelationKind::kSelfLoop) continue;
    const int64_t a = std::max(lo, layout.type_offsets[static_cast<size_t>(rel.src_type)]);
    const int64_t b = std::min(hi, layout.type_offsets[static_cast<size_t>(rel.src_type) + 1]);
    for (int64_t v = a; v < b; ++v) in_edges->push_back({v, v, r, 0});
  }
  return Status::Ok();
}

// The symmetric, deduplicated, self-loop-free adjacency of the home nodes, in global ids: the sources of
// their base and inverse in-edges and the reversed pairs.
void BuildAdjacency(const HeteroGraph& skeleton, const Home& home, const std::vector<Edge>& in_edges,
                    const std::vector<Edge>& out_pairs, std::vector<int64_t>* ptr, std::vector<int64_t>* adj) {
  const auto n = static_cast<size_t>(home.size());
  ptr->assign(n + 1, 0);
  const auto counts = [&](const Edge& e) {
    return e.src != e.dst && skeleton.relations[static_cast<size_t>(e.rel)].kind != RelationKind::kSelfLoop;
  };
  for (const std::vector<Edge>* list : {&in_edges, &out_pairs}) {
    for (const Edge& e : *list) {
      if (counts(e)) ++(*ptr)[static_cast<size_t>(e.dst - home.lo) + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) (*ptr)[i + 1] += (*ptr)[i];
  adj->resize(static_cast<size_t>(ptr->back()));
  std::vector<int64_t> cursor(ptr->begin(), ptr->end() - 1);
  for (const std::vector<Edge>* list : {&in_edges, &out_pairs}) {
    for (const Edge& e : *list) {
      if (counts(e)) (*adj)[static_cast<size_t>(cursor[static_cast<size_t>(e.dst - home.lo)]++)] = e.src;
    }
  }
  // Sort and deduplicate each list in place, compacting.
  int64_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto b = adj->begin() + (*ptr)[i], e = adj->begin() + (*ptr)[i + 1];
    std::sort(b, e);
    const auto end = std::unique(b, e);
    const int64_t start = w;
    for (auto it = b; it != end; ++it) (*adj)[static_cast<size_t>(w++)] = *it;
    (*ptr)[i] = start;
  }
  (*ptr)[n] = w;
  adj->resize(static_cast<size_t>(w));
  adj->shrink_to_fit();
}

// The value of each of `ids` (sorted and unique, of any home) in `values` (one per home node), asked of
// their homes. Ids of one home are one run of `ids`, and every home answers in the order asked.
template <typename T>
Result<std::vector<T>> Resolve(const RankGroup& group, const Layout& layout, int64_t lo, const std::vector<T>& values,
                               const std::vector<int64_t>& ids) {
  std::vector<std::vector<int64_t>> ask(static_cast<size_t>(group.size()));
  for (const int64_t id : ids) ask[static_cast<size_t>(layout.HomeOf(id))].push_back(id);
  std::vector<int64_t> from;
  TESSEL_ASSIGN_OR_RETURN(std::vector<int64_t> asked, group.Exchange(ask, &from));
  ask = {};
  std::vector<std::vector<T>> answer(static_cast<size_t>(group.size()));
  for (int r = 0; r < group.size(); ++r) {
    for (int64_t i = from[static_cast<size_t>(r)]; i < from[static_cast<size_t>(r) + 1]; ++i) {
      answer[static_cast<size_t>(r)].push_back(values[static_cast<size_t>(asked[static_cast<size_t>(i)] - lo)]);
    }
  }
  return group.Exchange(answer);
}

// The home nodes' adjacency as the repair pass sees it: the parts of home neighbours live, those of
// other homes' nodes as they were when the pass began (`neighbours` sorted, `remote_part` aligned).
struct HomeView {
  const std::vector<int64_t>& ptr;
  const std::vector<int64_t>& adj;
  const std::vector<int32_t>& part;
  int64_t lo, hi;
  const std::vector<int64_t>& neighbours;
  const std::vector<int32_t>& remote_part;
  int64_t nodes() const { return static_cast<int64_t>(part.size()); }
  template <typename F>
  void ForEachNeighbourPart(int64_t u, F&& f) const {
    for (int64_t e = ptr[static_cast<size_t>(u)]; e < ptr[static_cast<size_t>(u) + 1]; ++e) {
      const int64_t v = adj[static_cast<size_t>(e)];
      if (v >= lo && v < hi) {
        f(part[static_cast<size_t>(v - lo)]);
      } else {
        f(remote_part[static_cast<size_t>(std::lower_bound(neighbours.begin(), neighbours.end(), v) -
                                          neighbours.begin())]);
      }
    }
  }
};

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

// The digest of the input: metadata.json's bytes, the reading options, and every chunk file's bytes
// (file i digested by rank i % ranks).
Result<std::string> InputHash(const RankGroup& group, const ChunkedGraph& cg, const std::string& options) {
  std::vector<std::string> files{cg.metadata_path};
  for (const storage::ChunkedEdgeType& et : cg.edge_types) {
    files.insert(files.end(), et.files.paths.begin(), et.files.paths.end());
  }
  for (const storage::ChunkedNodeType& nt : cg.node_types) {
    for (const storage::ChunkedNodeData& d : nt.data) {
      files.insert(files.end(), d.files.paths.begin(), d.files.paths.end());
    }
  }
  std::vector<int64_t> digests(files.size(), 0);
  Status st;
  std::vector<char> block(size_t{1} << 20);
  for (size_t i = static_cast<size_t>(group.rank()); i < files.size() && st.ok();
       i += static_cast<size_t>(group.size())) {
    std::ifstream in(files[i], std::ios::binary);
    if (!in) {
      st = BadDataError(StrCat(files[i], ": cannot open (listed in ", cg.metadata_path, ")"));
      break;
    }
    storage::Digest d;
    while (in) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      d.Bytes(block.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) st = StorageError(StrCat(files[i], ": read failed"));
    digests[i] = static_cast<int64_t>(d.Value());
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  TESSEL_RETURN_IF_ERROR(group.Sum(digests.data(), static_cast<int64_t>(digests.size())));
  storage::Digest all;
  all.Str("chunked");
  all.Str(options);
  for (const int64_t d : digests) all.Int(d);
  return all.Hex();
}

int64_t PeakRssBytes() {
  struct rusage ru;
  return ::getrusage(RUSAGE_SELF, &ru) == 0 ? static_cast<int64_t>(ru.ru_maxrss) * 1024 : 0;
}

// One part from what its builder received, laid out as BuildWorkerPartitions lays it out.
struct PartInput {
  std::vector<NodeOut> nodes;  // by row (new id - lo)
  std::vector<float> features;
  std::vector<EdgeOut> edges;
};

}  // namespace

const char* ShardedMethodName(ShardedMethod m) {
  switch (m) {
    case ShardedMethod::kPtScotch:
      return "ptscotch";
    case ShardedMethod::kRandom:
      return "random";
    case ShardedMethod::kRange:
      return "range";
  }
  return "?";
}

Result<ChunkedPartition> PartitionChunked(const RankGroup& group, const ChunkedPartitionOptions& o) {
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
  out.ignored = storage::IgnoredChunkedData(cg, o.input);
  const std::string options = StrCat(
      "features=", o.input.features, "; labels=", o.input.labels, "; masks=", o.input.train_mask, ",", o.input.val_mask,
      ",", o.input.test_mask, "; inverse=", o.input.add_inverse ? 1 : 0, "; self_loop=", o.input.add_self_loop ? 1 : 0);
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
  for (const Edge& e : in_edges) ++all_w[1][static_cast<size_t>(e.dst - home.lo)];
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
  std::vector<int32_t> part(hn, 0);
  if (k > 1 && o.method == ShardedMethod::kRange) {
    for (size_t i = 0; i < hn; ++i) part[i] = RangePartOf(home.lo + static_cast<int64_t>(i), n, k);
  } else if (k > 1 && o.method == ShardedMethod::kRandom) {
    for (size_t i = 0; i < hn; ++i) part[i] = RandomPartOf(home.lo + static_cast<int64_t>(i), k, o.seed);
  } else if (k > 1) {
    TESSEL_ASSIGN_OR_RETURN(part,
                            PtScotchParts(group, layout.home, adj_ptr, adj, CombinedWeight(w, totals, n), k, o.seed));
  }
  std::vector<int64_t> neighbours(adj);
  std::sort(neighbours.begin(), neighbours.end());
  neighbours.erase(std::unique(neighbours.begin(), neighbours.end()), neighbours.end());
  int64_t moves = 0;
  if (k > 1 && o.method == ShardedMethod::kPtScotch) {
    // PT-Scotch balances one weight; the repair brings every constraint within the target. Each rank
    // repairs its own home nodes to its own totals, which bounds the sum; tighter targets as the
    // one-process path tries them, until the whole is within kMaxImbalance.
    std::vector<int64_t> interleaved(hn * w.size()), local(w.size(), 0);
    for (size_t i = 0; i < hn; ++i) {
      for (size_t c = 0; c < w.size(); ++c) {
        interleaved[i * w.size() + c] = w[c][i];
        local[c] += w[c][i];
      }
    }
    for (const double target : {kMaxImbalance, 1.045, 1.04, 1.03}) {
      TESSEL_ASSIGN_OR_RETURN(const std::vector<int32_t> remote, Resolve(group, layout, home.lo, part, neighbours));
      const HomeView view{adj_ptr, adj, part, home.lo, home.hi, neighbours, remote};
      moves +=
          Rebalancer(view, interleaved.data(), static_cast<int32_t>(w.size()), local, k, target - 1e-9, part).Run();
      TESSEL_ASSIGN_OR_RETURN(const std::vector<double> now, GlobalImbalance(group, w, totals, part, k));
      if (now.empty() || *std::max_element(now.begin(), now.end()) <= kMaxImbalance) break;
    }
    TESSEL_RETURN_IF_ERROR(group.Sum(&moves, 1));
  }

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

  // 8. To each part's builder: its nodes (with features) and its in-edges, sources resolved to new ids.
  const auto build_start = Clock::now();
  std::vector<int64_t> sources;
  sources.reserve(in_edges.size());
  for (const Edge& e : in_edges) sources.push_back(e.src);
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
  TESSEL_ASSIGN_OR_RETURN(const std::vector<Placed> source_at, Resolve(group, layout, home.lo, placed, sources));
  std::vector<std::vector<EdgeOut>> edges_to(static_cast<size_t>(ranks));
  for (const Edge& e : in_edges) {
    const Placed& d = placed[static_cast<size_t>(e.dst - home.lo)];
    const auto at = std::lower_bound(sources.begin(), sources.end(), e.src) - sources.begin();
    edges_to[static_cast<size_t>(OwnerOfPart(d.part, ranks))].push_back(
        {source_at[static_cast<size_t>(at)].new_id, d.new_id, e.rel, 0});
  }
  RankFigures mine{home.size(), static_cast<int64_t>(in_edges.size()), 0};
  in_edges = {};
  sources = {};
  std::vector<int64_t> edge_from;
  TESSEL_ASSIGN_OR_RETURN(std::vector<EdgeOut> my_edges, group.Exchange(edges_to, &edge_from));
  edges_to = {};
  const auto dim = static_cast<size_t>(home.feature_dim);
  std::vector<std::vector<NodeOut>> nodes_to(static_cast<size_t>(ranks));
  std::vector<std::vector<float>> features_to(static_cast<size_t>(ranks));
  for (size_t i = 0; i < hn; ++i) {
    const auto r = static_cast<size_t>(OwnerOfPart(part[i], ranks));
    nodes_to[r].push_back({placed[i].new_id,
                           home.lo + static_cast<int64_t>(i),
                           home.labels[i],
                           home.train[i],
                           home.val[i],
                           home.test[i],
                           {}});
    features_to[r].insert(features_to[r].end(), home.features.begin() + static_cast<ptrdiff_t>(i * dim),
                          home.features.begin() + static_cast<ptrdiff_t>((i + 1) * dim));
  }
  home.features = {};
  TESSEL_ASSIGN_OR_RETURN(std::vector<NodeOut> my_nodes, group.Exchange(nodes_to));
  nodes_to = {};
  TESSEL_ASSIGN_OR_RETURN(std::vector<float> my_features, group.Exchange(features_to));
  features_to = {};

  // 9. Each owned part's nodes by row, and its edges.
  std::vector<int32_t> owned;
  for (int32_t p = me; p < k; p += ranks) owned.push_back(p);
  std::vector<PartInput> inputs(owned.size());
  const auto slot = [&](int32_t p) { return static_cast<size_t>((p - me) / ranks); };
  for (size_t j = 0; j < owned.size(); ++j) {
    const auto p = static_cast<size_t>(owned[j]);
    inputs[j].nodes.resize(static_cast<size_t>(sizes[p]));
    inputs[j].features.resize(static_cast<size_t>(sizes[p]) * dim);
  }
  for (size_t i = 0; i < my_nodes.size(); ++i) {
    const storage::BookEntry b = storage::LookupRangeBook(offsets, my_nodes[i].new_id);
    PartInput& in = inputs[slot(b.part)];
    in.nodes[static_cast<size_t>(b.local)] = my_nodes[i];
    std::copy(my_features.begin() + static_cast<ptrdiff_t>(i * dim),
              my_features.begin() + static_cast<ptrdiff_t>((i + 1) * dim),
              in.features.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b.local) * dim));
  }
  my_nodes = {};
  my_features = {};
  for (const EdgeOut& e : my_edges) {
    inputs[slot(storage::LookupRangeBook(offsets, e.dst_new).part)].edges.push_back(e);
  }
  my_edges = {};

  // 10. The halo: every source outside its part, with its original id and features from its builder.
  std::vector<int64_t> halo_ids;
  for (size_t j = 0; j < owned.size(); ++j) {
    const int64_t lo = offsets[static_cast<size_t>(owned[j])], hi = offsets[static_cast<size_t>(owned[j]) + 1];
    for (const EdgeOut& e : inputs[j].edges) {
      if (e.src_new < lo || e.src_new >= hi) halo_ids.push_back(e.src_new);
    }
  }
  std::sort(halo_ids.begin(), halo_ids.end());
  halo_ids.erase(std::unique(halo_ids.begin(), halo_ids.end()), halo_ids.end());
  std::vector<std::vector<int64_t>> ask(static_cast<size_t>(ranks));
  for (const int64_t id : halo_ids) {
    ask[static_cast<size_t>(OwnerOfPart(storage::LookupRangeBook(offsets, id).part, ranks))].push_back(id);
  }
  std::vector<int64_t> asked_from;
  TESSEL_ASSIGN_OR_RETURN(const std::vector<int64_t> asked, group.Exchange(ask, &asked_from));
  std::vector<std::vector<int64_t>> orig_back(static_cast<size_t>(ranks));
  std::vector<std::vector<float>> feat_back(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int64_t i = asked_from[static_cast<size_t>(r)]; i < asked_from[static_cast<size_t>(r) + 1]; ++i) {
      const storage::BookEntry b = storage::LookupRangeBook(offsets, asked[static_cast<size_t>(i)]);
      const PartInput& in = inputs[slot(b.part)];
      orig_back[static_cast<size_t>(r)].push_back(in.nodes[static_cast<size_t>(b.local)].orig_id);
      const auto row = in.features.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b.local) * dim);
      feat_back[static_cast<size_t>(r)].insert(feat_back[static_cast<size_t>(r)].end(), row,
                                               row + static_cast<ptrdiff_t>(dim));
    }
  }
  TESSEL_ASSIGN_OR_RETURN(const std::vector<int64_t> halo_orig, group.Exchange(orig_back));
  TESSEL_ASSIGN_OR_RETURN(const std::vector<float> halo_feat, group.Exchange(feat_back));
  // The answers come by responder rank; index them by the halo id asked.
  std::vector<std::pair<int64_t, size_t>> answer_of;  // (new id, answer index), sorted
  {
    size_t a = 0;
    for (int r = 0; r < ranks; ++r) {
      for (const int64_t id : ask[static_cast<size_t>(r)]) answer_of.emplace_back(id, a++);
    }
    std::sort(answer_of.begin(), answer_of.end());
  }
  ask = {};

  // 11. The parts, as BuildWorkerPartitions lays them out.
  const auto num_rel = static_cast<int32_t>(skeleton.relations.size());
  std::vector<std::string> relation_names;
  for (const storage::Relation& r : skeleton.relations) relation_names.push_back(r.name);
  for (size_t j = 0; j < owned.size(); ++j) {
    PartInput& in = inputs[j];
    WorkerPartition& wp = out.parts.emplace_back();
    wp.part = owned[j];
    wp.num_parts = k;
    wp.offsets = offsets;
    const int64_t lo = offsets[static_cast<size_t>(wp.part)], hi = offsets[static_cast<size_t>(wp.part) + 1];
    wp.num_owned = hi - lo;
    std::vector<int64_t> halo;
    for (const EdgeOut& e : in.edges) {
      if (e.src_new < lo || e.src_new >= hi) halo.push_back(e.src_new);
    }
    std::sort(halo.begin(), halo.end());
    halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
    const int64_t rows = wp.num_owned + static_cast<int64_t>(halo.size());
    const auto row_of = [&](int64_t s) {
      return (s >= lo && s < hi) ? s - lo
                                 : wp.num_owned + (std::lower_bound(halo.begin(), halo.end(), s) - halo.begin());
    };
    wp.row_new_id.resize(static_cast<size_t>(rows));
    std::iota(wp.row_new_id.begin(), wp.row_new_id.begin() + wp.num_owned, lo);
    std::copy(halo.begin(), halo.end(), wp.row_new_id.begin() + wp.num_owned);
    wp.row_orig_id.resize(static_cast<size_t>(rows));
    wp.feature_dim = home.feature_dim;
    if (dim > 0) wp.features.resize(static_cast<size_t>(rows) * dim);
    for (int64_t i = 0; i < wp.num_owned; ++i)
      wp.row_orig_id[static_cast<size_t>(i)] = in.nodes[static_cast<size_t>(i)].orig_id;
    if (dim > 0) std::copy(in.features.begin(), in.features.end(), wp.features.begin());
    for (size_t h = 0; h < halo.size(); ++h) {
      const auto it = std::lower_bound(answer_of.begin(), answer_of.end(), std::pair<int64_t, size_t>{halo[h], 0});
      const size_t a = it->second;
      const size_t row = static_cast<size_t>(wp.num_owned) + h;
      wp.row_orig_id[row] = halo_orig[a];
      std::copy(halo_feat.begin() + static_cast<ptrdiff_t>(a * dim),
                halo_feat.begin() + static_cast<ptrdiff_t>((a + 1) * dim),
                wp.features.begin() + static_cast<ptrdiff_t>(row * dim));
    }
    // Edges grouped by relation, each group sorted by (source row, destination row).
    std::vector<std::tuple<int32_t, int64_t, int64_t>> edges;
    edges.reserve(in.edges.size());
    for (const EdgeOut& e : in.edges) edges.emplace_back(e.rel, row_of(e.src_new), e.dst_new - lo);
    in.edges = {};
    std::sort(edges.begin(), edges.end());
    wp.relation_names = relation_names;
    wp.rel_ptr.assign(static_cast<size_t>(num_rel) + 1, 0);
    wp.src.resize(edges.size());
    wp.dst.resize(edges.size());
    for (size_t e = 0; e < edges.size(); ++e) {
      ++wp.rel_ptr[static_cast<size_t>(std::get<0>(edges[e])) + 1];
      wp.src[e] = std::get<1>(edges[e]);
      wp.dst[e] = std::get<2>(edges[e]);
    }
    for (int32_t r = 0; r < num_rel; ++r) wp.rel_ptr[static_cast<size_t>(r) + 1] += wp.rel_ptr[static_cast<size_t>(r)];
    wp.labels.resize(static_cast<size_t>(wp.num_owned));
    wp.train_mask.resize(static_cast<size_t>(wp.num_owned));
    wp.val_mask.resize(static_cast<size_t>(wp.num_owned));
    wp.test_mask.resize(static_cast<size_t>(wp.num_owned));
    for (size_t i = 0; i < static_cast<size_t>(wp.num_owned); ++i) {
      wp.labels[i] = in.nodes[i].label;
      wp.train_mask[i] = in.nodes[i].train;
      wp.val_mask[i] = in.nodes[i].val;
      wp.test_mask[i] = in.nodes[i].test;
    }
    in.nodes = {};
    in.features = {};
    wp.type_offsets = layout.type_offsets;
    wp.total_nodes = n;
    wp.num_classes = num_classes;
    wp.total_train = total_train;
    wp.total_test = total_test;
    wp.graph_hash = graph_hash;
  }
  Status valid;
  for (const WorkerPartition& wp : out.parts) {
    valid = storage::ValidatePartition(wp);
    if (!valid.ok()) break;
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(valid));
  out.build_seconds = Since(build_start);

  // 12. The manifest, the same on every rank.
  constexpr size_t kSizeFields = 6;
  std::vector<int64_t> part_sizes(static_cast<size_t>(k) * kSizeFields, 0);
  for (const WorkerPartition& wp : out.parts) {
    const storage::PartSizes s = storage::SizesOf(wp);
    const int64_t fields[kSizeFields] = {s.owned, s.halo, s.edges, s.pairs, s.train, s.features};
    std::copy(fields, fields + kSizeFields, part_sizes.begin() + static_cast<ptrdiff_t>(wp.part * kSizeFields));
  }
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
  m.relations = num_rel;
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
  for (const int64_t* field : {&mine.home_nodes, &mine.in_edges, &mine.peak_rss_bytes}) {
    TESSEL_ASSIGN_OR_RETURN(const std::vector<int64_t> all, group.AllGather(*field));
    out.ranks.resize(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (field == &mine.home_nodes) out.ranks[r].home_nodes = all[r];
      if (field == &mine.in_edges) out.ranks[r].in_edges = all[r];
      if (field == &mine.peak_rss_bytes) out.ranks[r].peak_rss_bytes = all[r];
    }
  }
  return out;
}

}  // namespace tessel::orchestrator
