// partition.json: what `tessel partition` wrote into its output directory, and all a coordinator reads
// of a partitioned graph (jobs/README.md, data.format = "partitions"): the graph's identity, the part
// count, the method and its quality, and each part's sizes, from which the plan predicts every worker's
// memory without opening a part file. Each worker then opens its own part-K.h5 and checks that it was
// cut from the graph partition.json names (WorkerPartition::graph_hash).
// Thread safety: plain values. Failure: a missing or malformed manifest is kBadData naming the file and
// the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "storage/graph.h"
#include "storage/partition.h"

namespace tessel::storage {

inline constexpr const char* kPartitionManifestName = "partition.json";
inline constexpr int64_t kPartitionManifestVersion = 2;  // 2: graph_hash, the graph's widths, per-part pairs

// The sizes of one part that its worker's memory and time scale with.
struct PartSizes {
  int32_t part = 0;
  std::string file;      // part-K.h5, relative to the manifest's directory
  int64_t owned = 0;     // rows [0, owned) of the part
  int64_t halo = 0;      // rows [owned, owned + halo)
  int64_t edges = 0;     // in-edges of the owned nodes
  int64_t pairs = 0;     // distinct (relation, source row) pairs among them
  int64_t train = 0;     // labelled training nodes it owns
  int64_t features = 0;  // feature values it holds, owned x feature_dim (rows x before 2026-12)
};
PartSizes SizesOf(const WorkerPartition& p);

struct PartitionManifest {
  int64_t format_version = kPartitionManifestVersion;
  std::string graph;       // the graph file it was cut from, as given
  std::string graph_name;  // HeteroGraph::name
  std::string graph_hash;  // GraphHash of that graph; every part file carries the same
  int64_t nodes = 0, edges = 0, relations = 0, classes = 0;
  int64_t feature_dim = 0;  // the uniform feature width of every part (0: one-hot input)
  std::string method;
  int32_t parts = 0;
  int64_t seed = 0;
  int64_t edge_cut = 0, random_edge_cut = 0;
  std::vector<std::string> constraints;
  std::vector<double> imbalance;  // one per constraint
  int64_t rebalance_moves = 0;
  double seconds = 0;  // the partitioner's own time
  std::vector<PartSizes> per_part;
  std::vector<std::string> files;  // every file of the directory, this one included

  // The directory's part file of `part`.
  std::string PartFile(const std::string& dir, int32_t part) const;
};

// A 64-bit digest of everything a partition is cut from (name, types, counts, widths, every edge, label,
// mask and feature bit), as 16 hex digits. Reads each array once; equal graphs give equal hashes.
std::string GraphHash(const HeteroGraph& graph);

std::string FormatPartitionManifest(const PartitionManifest& m);
// Reads DIR/partition.json and checks it against itself: parts and per_part agree, every part file is
// listed, the sizes are not negative. kBadData "DIR/partition.json: KEY: why"; an older manifest (no
// graph_hash) is refused with what to do.
Result<PartitionManifest> ReadPartitionManifest(const std::string& dir);

}  // namespace tessel::storage
