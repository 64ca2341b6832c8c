// The distributed partitioner: `mpirun -np P tessel partition --input DIR --parts K --out PARTS` over a
// graph in DGL's chunked format (storage/chunked_import.h), with no rank ever holding the whole graph.
//
// The global id space is ImportChunked's (node types concatenated in metadata order), and every rank
// is the "home" of one contiguous 1/P of it. Each rank reads the node data of its home range (only those
// rows of each .npy chunk) and every P-th edge chunk; edges travel to the home of their destination, the
// symmetric adjacency is built at the homes, and the method assigns each home node a part:
//   ptscotch: PT-Scotch's k-way partition of the distributed graph (its int64 build), one vertex weight
//             combining the training-node and in-edge constraints, then the same balance repair rounds;
//   stream: linear deterministic greedy in rounds (stream_parts.h), memory linear in a rank's share;
//   random / range: the baselines of `tessel partition GRAPH`, the same function of the node id.
// New ids order nodes by (part, original id), as BuildWorkerPartitions does. Part k is built by rank
// k % P from what the homes send it (its nodes with their labels, its in-edges) and written into `dir`
// (part-K.h5); then the homes read their nodes' features from the chunk files a slab at a time and send
// them to the parts' builders, which write them into the files in place, so no rank holds features beyond
// a slab. The parts are exactly those `tessel import chunked` followed by `tessel partition GRAPH` builds
// from the same assignment (tests/cluster partition_chunked.sh compares them), apart from graph_hash,
// which here digests the input files.
//
// Failure: every step ends with RankGroup::Agree, so a rank's error (kBadData naming the chunk file and
// the row, or metadata.json and the key; kStorage for a directory a rank cannot read) is every rank's,
// prefixed with its rank. A part file is renamed into `dir` only once whole; the caller owns `dir` (a
// temporary directory it removes on failure, cli_partition.cc) and writes partition.json.
// Thread safety: one call per rank, on the rank's thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "orchestrator/partitioning/rank_group.h"
#include "storage/chunked_import.h"
#include "storage/partition.h"
#include "storage/partition_manifest.h"

namespace tessel::orchestrator {

enum class ShardedMethod { kPtScotch, kStream, kRandom, kRange };
const char* ShardedMethodName(ShardedMethod m);

struct ChunkedPartitionOptions {
  storage::ChunkedImportOptions input;  // the directory, the node_data keys, the derived relations
  int32_t parts = 0;
  ShardedMethod method = ShardedMethod::kPtScotch;
  uint64_t seed = 0;
  int64_t memory_budget_bytes = 0;  // per rank: refused before any data is read when predicted above; 0: none
};

// The model of one rank's peak resident memory, from what metadata.json and the chunk headers say, before
// anything is read: the largest of its phases (reading; partitioning; building its parts; streaming the
// features into them, three slabs whatever the width: no phase holds a rank's features), each the sum of
// the arrays it holds, in bytes per item, with its home's share of the in-edges (in-edges x home nodes /
// nodes). The halo of a part is taken as half its in-edges, at most the nodes it does not own; PT-Scotch's
// own copies on 2 or more ranks as 35 bytes an in-edge of the graph plus 150 of the rank's (measured at 10M
// edges: about 2.2, 1.4 and 1.2 GB on 2, 4 and 8 ranks; its sequential path on one rank stays below the
// build phase). Measured against the peaks in bench/partition/README.md.
struct RankShare {
  int64_t nodes = 0;          // of the whole graph
  int64_t home_nodes = 0;     // this rank's
  int64_t in_edges = 0;       // of the whole graph, derived relations included
  int64_t feature_bytes = 0;  // a node's features
  int32_t parts = 1, ranks = 1;
};
int64_t PredictRankPeakBytes(ShardedMethod method, const RankShare& share);

struct RankFigures {
  int64_t home_nodes = 0;       // nodes whose data it read
  int64_t in_edges = 0;         // edges it held at their destination's home
  int64_t peak_rss_bytes = 0;   // the process's peak resident set once its parts were written
  int64_t predicted_bytes = 0;  // PredictRankPeakBytes
};

struct ChunkedPartition {
  storage::PartitionManifest manifest;  // the same on every rank, per_part included
  std::vector<RankFigures> ranks;       // every rank's
  std::vector<std::string> ignored;     // node or edge data the graph has no place for
  double read_seconds = 0, partition_seconds = 0, build_seconds = 0;
};

Result<ChunkedPartition> PartitionChunked(const RankGroup& group, const ChunkedPartitionOptions& options,
                                          const std::filesystem::path& dir);

}  // namespace tessel::orchestrator
