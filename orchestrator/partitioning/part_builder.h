// The last step of the distributed partitioner (chunked_partition.h): once every home node has a part and
// a new id, the parts this rank owns (part % ranks == rank) are built from what the homes send them:
// their in-edges (sources resolved to new ids at their homes), their nodes with features and supervision,
// and their halo's original ids from the halo nodes' own builders. The layout is exactly
// BuildWorkerPartitions' (storage/partition.h): owned rows in new-id order, then the halo sorted by new id;
// each relation's edges sorted by (source row, destination row); features for the owned rows only.
// Memory: the in-edges are converted and sorted in place and become the part's edges before any row is
// made, and every buffer is freed as soon as the next step has what it needs, so a rank's peak is about
// its edges twice (the received 16 bytes, then the part's 16) or its part's edges, rows and owned features.
// Thread safety: a collective over the group's ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "orchestrator/partitioning/home_graph.h"
#include "orchestrator/partitioning/rank_group.h"
#include "storage/partition.h"

namespace tessel::orchestrator {

// The rank that builds and writes part `part`.
inline int OwnerOfPart(int32_t part, int ranks) { return part % ranks; }

// What every part carries of the whole graph.
struct PartFacts {
  int32_t parts = 1;
  std::vector<int64_t> offsets;  // [parts + 1]: the range book
  std::vector<std::string> relation_names;
  std::vector<int64_t> type_offsets;
  int64_t total_nodes = 0, num_classes = 0, total_train = 0, total_test = 0;
  std::string graph_hash;
};

// Consumes `in_edges` (this rank's home in-edges) and the home's features.
Result<std::vector<storage::WorkerPartition>> BuildOwnedParts(const RankGroup& group, const Layout& layout, Home& home,
                                                              std::vector<Edge> in_edges,
                                                              const std::vector<Placed>& placed,
                                                              const PartFacts& facts);

}  // namespace tessel::orchestrator
