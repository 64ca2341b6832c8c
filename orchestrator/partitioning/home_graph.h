// What one rank of the distributed partitioner holds of a chunked graph: its home range of the global id
// space (node types concatenated, as ImportChunked numbers them) with those nodes' data, the edges whose
// destination it is the home of, and their symmetric adjacency; and Resolve, which asks the homes of any
// ids for a value per node. The pieces of partitioning/chunked_partition.h and stream_parts.h.
// Failure: as chunked_partition.h (kBadData naming the file, agreed over the ranks where a step says so).
// Thread safety: one thread per rank.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "orchestrator/partitioning/rank_group.h"
#include "storage/chunked_import.h"
#include "storage/graph.h"

namespace tessel::orchestrator {

// An edge: source, destination and relation in 16 bytes (the destination's low 48 bits and the relation's
// 16 above them), since edges are most of what a rank holds. Ids are 64-bit values below kMaxPackedId
// (2^48, 281 trillion nodes) and relations below kMaxPackedRelations, both checked before any edge is read.
inline constexpr int64_t kMaxPackedId = int64_t{1} << 48;
inline constexpr int64_t kMaxPackedRelations = int64_t{1} << 16;
struct Edge {
  int64_t src = 0;
  uint64_t dst_rel = 0;
  Edge() = default;
  Edge(int64_t s, int64_t d, int32_t r)
      : src(s), dst_rel(static_cast<uint64_t>(d) | (static_cast<uint64_t>(r) << 48)) {}
  int64_t dst() const { return static_cast<int64_t>(dst_rel & (static_cast<uint64_t>(kMaxPackedId) - 1)); }
  int32_t rel() const { return static_cast<int32_t>(dst_rel >> 48); }
  void set_dst(int64_t d) {
    dst_rel = (dst_rel & ~(static_cast<uint64_t>(kMaxPackedId) - 1)) | static_cast<uint64_t>(d);
  }
};
static_assert(sizeof(Edge) == 16);

// Where a node went: its part and its new id.
struct Placed {
  int64_t new_id = 0;
  int32_t part = 0, pad = 0;
};

// The id space and its home ranges.
struct Layout {
  std::vector<int64_t> type_offsets;  // [types + 1]
  std::vector<int64_t> home;          // [ranks + 1]: rank r is the home of [home[r], home[r + 1])
  int64_t n = 0;
  Layout(const storage::HeteroGraph& skeleton, int ranks) {
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

// What a home rank holds of its nodes [lo, hi): their supervision (their features stay in the chunk files
// until StreamOwnedFeatures sends them to their parts' files).
struct Home {
  int64_t lo = 0, hi = 0;
  int64_t feature_dim = 0;  // the graph's common width (0: featureless or the types disagree)
  std::vector<int64_t> labels;
  std::vector<uint8_t> train, val, test;
  int64_t max_label = -1;
  int64_t size() const { return hi - lo; }
};

// The graph's common feature width (0: featureless, or the node types disagree), from the chunks' headers
// alone. Local.
Result<int64_t> FeatureWidth(const storage::ChunkedGraph& cg, const storage::ChunkedImportOptions& o);

// Reads the labels and masks of the home range (and every type's chunk headers, so every rank agrees on
// the widths). Local: the caller agrees on the result.
Status ReadHome(const storage::ChunkedGraph& cg, const storage::ChunkedImportOptions& o, const Layout& layout, int rank,
                Home* home);

// Reads every ranks-th edge chunk and sends each edge to the home of its destination (and, without
// inverse relations, the reversed pair to the home of its source for the symmetric adjacency). Sets
// *in_edges to the edges whose destination this rank is the home of, self-loops included, and *out_pairs
// to the reversed pairs. Collective, agreed.
Status ReadEdges(const storage::ChunkedGraph& cg, const storage::HeteroGraph& skeleton, const Layout& layout,
                 const RankGroup& group, bool add_inverse, std::vector<Edge>* in_edges, std::vector<Edge>* out_pairs);

// The symmetric, deduplicated, self-loop-free adjacency of the home nodes, in global ids (CSR): the
// sources of their base and inverse in-edges and the reversed pairs.
void BuildAdjacency(const storage::HeteroGraph& skeleton, const Home& home, const std::vector<Edge>& in_edges,
                    const std::vector<Edge>& out_pairs, std::vector<int64_t>* ptr, std::vector<int64_t>* adj);

// The digest of the input: metadata.json's bytes, the reading options, and every chunk file's bytes
// (file i digested by rank i % ranks). Collective, agreed.
Result<std::string> InputHash(const RankGroup& group, const storage::ChunkedGraph& cg, const std::string& options);

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

}  // namespace tessel::orchestrator
