// Neighbour sampling for mini-batch RGNN training (DGL's NeighborSampler, PyG's NeighborLoader).
//
// Structure is replicated: every worker holds the whole graph's in-edges (SampledGraph: 8 bytes an edge
// plus 22 bytes a node), so a neighbour owned by another rank is sampled locally, with no round trip per
// hop. The features are what does not fit: 128 floats are 512 bytes a node against ~100 bytes of
// structure at degree 10, and they stay partitioned (the feature store and the batched fetch of
// sampled_source.h). DistDGL samples remotely because its structure outgrows one machine as well.
//
// Determinism: the neighbours drawn for node v in layer l depend only on (key, l, v), where the key
// names the job seed, the epoch and the global batch. A node's draw is therefore the same whichever
// worker makes it and whatever else is in that worker's share of the batch, so a sampled batch (and the
// loss of every seed) does not depend on the number of workers.
//
// Thread safety: SampledGraph is immutable once built; a Sampler is used by one thread at a time.
// Failure: kBadData on an inconsistent SampledGraph.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/byte_io.h"
#include "core/choices.h"
#include "core/status.h"
#include "storage/graph.h"

namespace tessel::workers {

// The replicated graph: in-edges by destination, node ownership and supervision, in the graph file's
// global id space (node types concatenated).
struct SampledGraph {
  int64_t num_nodes = 0;
  int32_t num_relations = 0;
  int64_t num_classes = 0;
  std::vector<int64_t> type_offsets;           // [types + 1]
  std::vector<int64_t> in_ptr;                 // [nodes + 1]: node v's in-edges are [in_ptr[v], in_ptr[v + 1])
  std::vector<int32_t> in_src;                 // [edges] source node, sorted by (relation, source) within a node
  std::vector<int32_t> in_rel;                 // [edges] relation
  std::vector<int32_t> part_of;                // [nodes] owning worker
  std::vector<int64_t> labels;                 // [nodes] -1 = unlabelled
  std::vector<uint8_t> train_mask, test_mask;  // [nodes] 0/1

  // From a whole graph and each node's worker: in-edges sorted by (relation, source) within a node.
  static SampledGraph FromGraph(const storage::HeteroGraph& graph, const std::vector<int32_t>& part_of);

  int64_t num_edges() const { return static_cast<int64_t>(in_src.size()); }
  // The bytes of its arrays.
  int64_t Bytes() const;
  int32_t TypeOf(int64_t node) const;
  Status Validate(int32_t num_workers) const;
  void Encode(ByteWriter& out) const;
  static Result<SampledGraph> Decode(ByteReader& in);
};

// One layer of a sampled batch (DGL's "block"): `num_dst` output rows, which are the first `num_dst` of
// the input rows `src_ids` (global ids: the destinations, then the sampled sources that are not
// destinations, in id order), and the sampled edges sorted by (relation, source row, destination row).
struct SampledBlock {
  int64_t num_dst = 0;
  std::vector<int64_t> src_ids;
  std::vector<int64_t> rel_ptr;   // [relations + 1]
  std::vector<int64_t> src, dst;  // rows
};

// splitmix64: the key of a batch from its parts, and a node's draw from the key.
uint64_t MixKey(uint64_t a, uint64_t b);

class Sampler {
 public:
  // fanouts: per layer, input layer first; -1 = every neighbour. per = kRelation: each fanout applies to
  // each relation of a node separately.
  Sampler(const SampledGraph& graph, std::vector<int32_t> fanouts, FanoutPer per);

  // The blocks of `seeds` (sorted, distinct global ids), input layer first: blocks.back()'s
  // destinations are the seeds, and layer l's destinations are layer l + 1's input rows
  // (blocks[l + 1].src_ids == the first blocks[l].num_dst of blocks[l].src_ids).
  std::vector<SampledBlock> Sample(std::span<const int64_t> seeds, uint64_t key);

 private:
  // Appends the drawn in-edges of `node` for layer `layer` as (relation, source) pairs.
  void Draw(int64_t node, int32_t fanout, uint64_t key, std::vector<std::pair<int32_t, int32_t>>* out);

  const SampledGraph& graph_;
  std::vector<int32_t> fanouts_;
  FanoutPer per_;
  std::vector<int32_t> slot_;    // [nodes]: a node's input row in the block being built, or -1
  std::vector<int64_t> picked_;  // Draw's scratch
};

// The permutation of `items` for epoch `key` (Fisher-Yates over splitmix64; the same on every worker).
void Shuffle(std::vector<int64_t>& items, uint64_t key);

}  // namespace tessel::workers
