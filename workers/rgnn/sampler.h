// Neighbour sampling for mini-batch RGNN training (DGL's NeighborSampler, PyG's NeighborLoader).
//
// Two ways to hold the structure (data.structure):
// - replicated: every worker holds the whole graph's in-edges (SampledGraph: 8 bytes an edge plus 22 a
//   node), so a neighbour owned by another rank is sampled locally, with no round trip per hop. The
//   default where the coordinator loaded the graph: it fits one machine, and 128 features are 512 bytes
//   a node against ~100 bytes of structure at degree 10, so the features (which stay partitioned: the
//   feature store and the batched fetch of sampled_source.h) are what does not fit.
// - partitioned: a worker holds only the in-edges of the nodes it owns (PartStructure), and the owner of
//   a node draws its neighbours, answering one batched request per layer and batch, as DistDGL does.
//   The default with data.partitions, where no rank may hold the whole graph.
//
// Determinism: the neighbours drawn for node v in layer l depend only on (key, l, v), where the key
// names the job seed, the epoch and the global batch. A node's draw is therefore the same whichever
// worker makes it and whatever else is in that worker's share of the batch, so a sampled batch (and the
// loss of every seed) does not depend on the number of workers.
//
// Thread safety: SampledGraph is immutable once built; a Sampler is used by one thread at a time.
// Failure: kBadData on an inconsistent SampledGraph, or a request for a node its worker does not own;
// kRankFailed from the exchanges.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/byte_io.h"
#include "core/choices.h"
#include "core/status.h"
#include "storage/graph.h"
#include "workers/comm/comm.h"
#include "workers/rgnn/part_structure.h"

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
  int32_t TypeOf(int64_t node) const { return NodeTypeOf(type_offsets, node); }
  Status Validate(int32_t num_workers) const;
  void Encode(ByteWriter& out) const;
  static Result<SampledGraph> Decode(ByteReader& in);
};

// One layer of a sampled batch (DGL's "block"): `num_dst` output rows, which are the first `num_dst` of
// the input rows `src_ids` (global ids: the destinations, then the sampled sources that are not
// destinations, grouped by node type), the worker that owns each input row, and the sampled edges
// sorted by (relation, source row, destination row).
struct SampledBlock {
  int64_t num_dst = 0;
  std::vector<int64_t> src_ids;
  std::vector<int32_t> src_owner;  // [src_ids]
  std::vector<int64_t> rel_ptr;    // [relations + 1]
  std::vector<int64_t> src, dst;   // rows
};

// splitmix64: the key of a batch from its parts, and a node's draw from the key.
uint64_t MixKey(uint64_t a, uint64_t b);

class Sampler {
 public:
  // fanouts: per layer, input layer first; -1 = every neighbour. per = kRelation: each fanout applies to
  // each relation of a node separately.
  // Replicated structure: every draw is made here.
  Sampler(const SampledGraph& graph, std::vector<int32_t> fanouts, FanoutPer per);
  // Partitioned structure: this worker draws for the nodes it owns; the neighbours of a node owned
  // elsewhere are drawn by its owner, in one batched request per layer (an AllToAll of node ids, and one
  // of the drawn (source, relation, owner) lists back). The owner draws exactly what the replicated
  // sampler would, so the blocks are the same.
  Sampler(const PartStructure& part, std::vector<int32_t> fanouts, FanoutPer per);

  // The blocks of `seeds` (sorted, distinct global ids; with partitioned structure, nodes this worker
  // owns), input layer first: blocks.back()'s destinations are the seeds, and layer l's destinations are
  // layer l + 1's input rows (blocks[l + 1].src_ids == the first blocks[l].num_dst of blocks[l].src_ids).
  // With partitioned structure on more than one worker, collective over `comm`: every worker calls it
  // for every batch, in the same order, with its own seeds (possibly none), and answers its peers'
  // requests even when its own seeds are bad (kBadData, returned after the exchanges).
  Result<std::vector<SampledBlock>> Sample(std::span<const int64_t> seeds, uint64_t key, WorkerComm& comm);
  // Replicated structure, no communicator needed.
  std::vector<SampledBlock> Sample(std::span<const int64_t> seeds, uint64_t key);

 private:
  // A drawn in-edge: relation, source (global id) and the worker that owns the source.
  struct Drawn {
    int32_t rel = 0, owner = 0;
    int64_t src = 0;
  };
  // Positions in [begin, end) of the edge arrays (in_rel grouped by relation) that the draw of a node
  // with key `node_key` picks, in increasing order.
  void Pick(const int32_t* rel, int64_t begin, int64_t end, int32_t fanout, uint64_t node_key,
            std::vector<int64_t>* positions);
  // Appends the drawn in-edges of a node held here (global id; with partitioned structure, its index
  // among the owned nodes) for a layer of `fanout` and key `layer_key`.
  void DrawHeld(int64_t node, int32_t fanout, uint64_t layer_key, std::vector<Drawn>* out);
  // The drawn in-edges of every destination, in destination order, with edge_dst the destination of
  // each; asks the owners of the destinations not held here (partitioned structure).
  Status DrawLayer(const std::vector<int64_t>& dst, const std::vector<int32_t>& dst_owner, int32_t fanout,
                   uint64_t layer_key, WorkerComm* comm, std::vector<Drawn>* edges, std::vector<int64_t>* edge_dst);
  // A node's input row in the block being built, or -1 (dense over the replicated graph's nodes; a map
  // over the batch's nodes with partitioned structure).
  int32_t SlotOf(int64_t node) const;
  void SetSlot(int64_t node, int32_t slot);
  void ClearSlots(const std::vector<int64_t>& nodes);

  const SampledGraph* graph_ = nullptr;  // one of the two
  const PartStructure* part_ = nullptr;
  const std::vector<int64_t>& type_offsets_;
  int32_t num_relations_ = 0;
  std::vector<int32_t> fanouts_;
  FanoutPer per_;
  std::vector<int32_t> slot_;                      // [nodes], replicated
  std::unordered_map<int64_t, int32_t> slot_map_;  // partitioned
  std::vector<int64_t> picked_, positions_;        // scratch
};

// The permutation of `items` for epoch `key` (Fisher-Yates over splitmix64; the same on every worker).
void Shuffle(std::vector<int64_t>& items, uint64_t key);

}  // namespace tessel::workers
