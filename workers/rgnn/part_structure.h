// PartStructure: a worker's share of a graph's structure for sampled training with data.structure =
// "partitioned" (the default with data.partitions): the in-edges of the nodes it owns, and nothing of the
// rest of the graph but its shape. It is built from the worker's WorkerPartition (its part file, or the
// part the coordinator sent): owned rows and their in-edges, whose sources are owned or halo rows.
//
// Each owned node's in-edges are in the order SampledGraph gives them, (relation, source) by global id,
// so a sampler drawing from either picks the same neighbours (sampler.h). Each source carries the worker
// that owns it, from the partition's range book: a node drawn into a batch always comes with its owner,
// so nothing maps a global id to its owner (no per-node array of the whole graph on any worker).
//
// Memory: 16 bytes an in-edge (source 8, relation 4, owner 4) and 26 bytes an owned node (id, edge
// offset, label, two masks), against SampledGraph's 8 bytes an edge and 22 a node of the whole graph.
// Thread safety: immutable once built. Failure: kBadData naming the part on an inconsistent partition.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "storage/partition.h"

namespace tessel::workers {

struct PartStructure {
  int32_t worker = 0, num_workers = 1;
  int64_t num_nodes = 0;  // of the whole graph
  int32_t num_relations = 0;
  int64_t num_classes = 0;
  std::vector<int64_t> type_offsets;           // [types + 1], the whole graph's
  std::vector<int64_t> owned;                  // [owned] global ids, ascending
  std::vector<int64_t> in_ptr;                 // [owned + 1]: owned[i]'s in-edges are [in_ptr[i], in_ptr[i + 1])
  std::vector<int64_t> in_src;                 // [edges] source, global id
  std::vector<int32_t> in_rel;                 // [edges] relation
  std::vector<int32_t> in_owner;               // [edges] the worker that owns the source
  std::vector<int64_t> labels;                 // [owned] -1 = unlabelled
  std::vector<uint8_t> train_mask, test_mask;  // [owned] 0/1

  // From a validated partition (storage::ValidatePartition): its owned rows by global id, their in-edges
  // sorted by (relation, source id) within a node.
  static Result<PartStructure> FromPartition(const storage::WorkerPartition& p);

  int64_t num_edges() const { return static_cast<int64_t>(in_src.size()); }
  // The index of `node` among the owned nodes, or -1 when this worker does not own it. O(log owned).
  int64_t LocalOf(int64_t node) const;
  int64_t Bytes() const;
};

// The node type of global id `node`, from type offsets [types + 1] (0 for a single type).
int32_t NodeTypeOf(const std::vector<int64_t>& type_offsets, int64_t node);

}  // namespace tessel::workers
