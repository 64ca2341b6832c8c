// GraphPartitioner: assigns every node of a HeteroGraph to one of `num_parts` workers (DESIGN.md
// "Partitioning"). METIS k-way runs on the symmetrised homogeneous graph with multi-constraint vertex
// weights (training nodes, incoming edges, nodes), followed by a greedy pass that repairs METIS's
// multi-constraint overshoot; random and range partitions are baselines.
// Thread safety: pure functions of their arguments; any thread may call them (METIS keeps no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/choices.h"
#include "core/status.h"
#include "storage/graph.h"

namespace tessel::orchestrator {

// The largest imbalance the partitioner aims for on every constraint (max part / mean part).
inline constexpr double kMaxImbalance = 1.05;

struct PartitionResult {
  std::vector<int32_t> part_of;  // [num_nodes] part of each global node id (graph-file id space)
  int32_t num_parts = 1;
  int64_t edge_cut = 0;  // EdgeCut() of part_of
  // The balance constraints that were active ("train", "edges", "nodes"; one whose total weight is
  // zero is dropped), and for each the max part weight / (total / num_parts).
  std::vector<std::string> constraint_names;
  std::vector<double> imbalance;
  double seconds = 0;           // wall time of PartitionGraph
  std::string method;           // "metis" | "random" | "range"
  int32_t rebalance_moves = 0;  // nodes moved by the repair pass after METIS
};

// The baselines' part of node `node` (of `n`): range cuts the id space into equal runs; random hashes the
// id with the seed. Pure functions of their arguments, so a rank that holds any share of the nodes
// assigns them as PartitionGraph does.
int32_t RangePartOf(int64_t node, int64_t n, int32_t num_parts);
int32_t RandomPartOf(int64_t node, int32_t num_parts, uint64_t seed);

// Partitions `g` into `num_parts` parts, deterministically for a given seed.
// Fails with kUsage when num_parts < 1 or num_parts > num_nodes (and the graph is not empty), with
// kUsage when METIS is asked for a graph beyond its 32-bit idx_t (nodes or 2 * edges > INT32_MAX),
// and with kInternal when METIS itself reports an error. A partition that cannot meet kMaxImbalance
// (for example one hub node heavier than a part's share) is still returned; `imbalance` says so.
Result<PartitionResult> PartitionGraph(const storage::HeteroGraph& g, int32_t num_parts, PartitionMethod method,
                                       uint64_t seed);

// Number of undirected edges {u, v}, u != v, whose endpoints lie in different parts, counted once
// on the symmetrised, deduplicated, self-loop-free homogeneous graph. `part_of` must have
// g.num_nodes() entries.
int64_t EdgeCut(const storage::HeteroGraph& g, const std::vector<int32_t>& part_of);

// Per-constraint imbalance of `part_of`, with the same weights PartitionGraph balances; returns the
// names of the active constraints in *names.
std::vector<double> PartitionImbalance(const storage::HeteroGraph& g, const std::vector<int32_t>& part_of,
                                       int32_t num_parts, std::vector<std::string>* names);

}  // namespace tessel::orchestrator
