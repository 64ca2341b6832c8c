// The last steps of the distributed partitioner (chunked_partition.h): once every home node has a part
// and a new id, the parts this rank owns (part % ranks == rank) are built from what the homes send them:
// their in-edges (sources resolved to new ids at their homes), their nodes with supervision, and their
// halo's original ids from the halo nodes' own builders. The layout is exactly BuildWorkerPartitions'
// (storage/partition.h): owned rows in new-id order, then the halo sorted by new id; each relation's edges
// sorted by (source row, destination row); features for the owned rows only. The features are not held
// by anyone: once the parts' files are open (storage::PartitionFileWriter), StreamOwnedFeatures reads
// each home's rows from the chunk files a slab at a time and sends them to their builders, which write
// them in place.
// Memory: the in-edges are converted and sorted in place and become the part's edges before any row is
// made, and every buffer is freed as soon as the next step has what it needs, so a rank's peak is about
// its edges twice (the received 16 bytes, then the part's 16) or its part's edges and rows; the features
// take a slab each way (kFeatureSlabBytes; a builder may receive a slab from every home at once).
// Thread safety: collectives over the group's ranks.
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

// Consumes `in_edges` (this rank's home in-edges). The parts have feature_dim set and no features.
Result<std::vector<storage::WorkerPartition>> BuildOwnedParts(const RankGroup& group, const Layout& layout,
                                                              const Home& home, std::vector<Edge> in_edges,
                                                              const std::vector<Placed>& placed,
                                                              const PartFacts& facts);

// The home rows' features read and sent per round (about this many bytes of rows a rank).
inline constexpr int64_t kFeatureSlabBytes = int64_t{32} << 20;

// Every home node's features, from the chunk files (`o.features`; a NaN or an infinity is kBadData naming
// the chunk's key and the node) to the file of its part, `writers[j]` being that of this rank's j-th part
// (parts me, me + ranks, ...). Collective, agreed each slab.
Status StreamOwnedFeatures(const RankGroup& group, const storage::ChunkedGraph& cg,
                           const storage::ChunkedImportOptions& o, const Layout& layout, const Home& home,
                           const std::vector<Placed>& placed, const std::vector<int64_t>& offsets,
                           std::vector<storage::PartitionFileWriter>& writers);

}  // namespace tessel::orchestrator
