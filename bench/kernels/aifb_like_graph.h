// A synthetic graph with the shape of AIFB as an RGCN sees it (8285 nodes, 45 relations plus their
// inverses plus a self-loop relation = 91, about 66k edges with skewed relation sizes), in the worker
// layout of plugins/rgnn/rgnn_ops.h. Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::bench {

struct WorkerGraph {
  int64_t num_nodes = 0;
  int64_t num_relations = 0;
  std::vector<int64_t> uniq_ptr, uniq_src, edge_uniq, uniq_edge_ptr, dst, dst_ptr, dst_edges;
  std::vector<double> norm;  // 1 / in-degree of the destination
  int64_t num_edges() const { return static_cast<int64_t>(dst.size()); }
  int64_t num_uniq() const { return static_cast<int64_t>(uniq_src.size()); }
};

WorkerGraph AifbLikeGraph(uint64_t seed = 42);

}  // namespace tessel::bench
