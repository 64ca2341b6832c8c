// Random graphs in the compact worker layout of <tessel/ops/rgnn.h>, for the rgnn kernel tests. The
// layout is built here from the raw edge list by plain loops, independently of the kernels.
#pragma once

#include "../kernel_test_util.h"

namespace tessel::kernel_test {

// A random multi-relational graph, with the worker layout built from its raw edges.
struct GraphSpec {
  int64_t num_src_rows = 12;     // M: rows of the layer input (local + halo nodes)
  int64_t num_dst = 9;           // N: destination rows
  int64_t num_relations = 5;     // R; relation 1 is always empty
  int64_t num_edges = 40;        // E
  int64_t distinct_sources = 6;  // sources are drawn from this many rows, so pairs repeat
};

struct Graph {
  int64_t m = 0, n = 0, r = 0;
  // Raw edges, sorted by (relation, source, destination).
  std::vector<int64_t> rel, src, dst;
  std::vector<double> norm;
  // The worker layout (plugins/rgnn/rgnn_ops.h).
  std::vector<int64_t> uniq_ptr, uniq_src, edge_uniq, uniq_edge_ptr, dst_ptr, dst_edges;
  int64_t num_edges() const { return static_cast<int64_t>(src.size()); }
  int64_t num_uniq() const { return static_cast<int64_t>(uniq_src.size()); }
};

Graph RandomGraph(const GraphSpec& spec, uint64_t seed);

// The relation of compact row u, by scanning uniq_ptr (independent of the kernels' blocking).
int64_t RelationOfUniq(const Graph& g, int64_t u);

// The worker-layout tensors of a graph.
struct GraphTensors {
  Tensor uniq_ptr, uniq_src, edge_uniq, uniq_edge_ptr, dst, dst_ptr, dst_edges;
  Tensor norm;  // in the dtype of the test
};

template <typename T>
GraphTensors ToTensors(const Graph& g) {
  GraphTensors t;
  t.uniq_ptr = MakeTensor<int64_t>({g.r + 1}, g.uniq_ptr);
  t.uniq_src = MakeTensor<int64_t>({g.num_uniq()}, g.uniq_src);
  t.edge_uniq = MakeTensor<int64_t>({g.num_edges()}, g.edge_uniq);
  t.uniq_edge_ptr = MakeTensor<int64_t>({g.num_uniq() + 1}, g.uniq_edge_ptr);
  t.dst = MakeTensor<int64_t>({g.num_edges()}, g.dst);
  t.dst_ptr = MakeTensor<int64_t>({g.n + 1}, g.dst_ptr);
  t.dst_edges = MakeTensor<int64_t>({g.num_edges()}, g.dst_edges);
  t.norm = MakeTensor<T>({g.num_edges()}, Cast<T>(g.norm));
  return t;
}

}  // namespace tessel::kernel_test
