#include "aifb_like_graph.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

namespace tessel::bench {

WorkerGraph AifbLikeGraph(uint64_t seed) {
  constexpr int64_t kNodes = 8285, kBaseRelations = 45, kBaseEdges = 29043;
  WorkerGraph g;
  g.num_nodes = kNodes;
  g.num_relations = 2 * kBaseRelations + 1;
  std::mt19937_64 rng(seed);
  // Relation sizes follow a Zipf-like law, as in the RDF datasets (a few relations carry most edges).
  std::vector<double> weight(kBaseRelations);
  for (int64_t r = 0; r < kBaseRelations; ++r) weight[r] = 1.0 / std::pow(r + 1.0, 1.1);
  std::discrete_distribution<int64_t> pick_rel(weight.begin(), weight.end());
  // Sources and destinations are skewed too: hubs reuse (relation, source) pairs.
  std::geometric_distribution<int64_t> hub(0.002);
  std::uniform_int_distribution<int64_t> any(0, kNodes - 1);
  auto node = [&] { return rng() % 2 ? std::min(hub(rng), kNodes - 1) : any(rng); };
  std::vector<std::tuple<int64_t, int64_t, int64_t>> edges;  // (relation, src, dst)
  for (int64_t i = 0; i < kBaseEdges; ++i) {
    const int64_t r = pick_rel(rng), s = node(), d = node();
    edges.emplace_back(r, s, d);
    edges.emplace_back(r + kBaseRelations, d, s);  // the inverse relation
  }
  for (int64_t v = 0; v < kNodes; ++v) edges.emplace_back(2 * kBaseRelations, v, v);  // self-loops
  std::sort(edges.begin(), edges.end());

  const int64_t e = static_cast<int64_t>(edges.size());
  std::vector<int64_t> in_degree(kNodes, 0);
  for (const auto& [r, s, d] : edges) ++in_degree[d];
  g.uniq_ptr.assign(g.num_relations + 1, 0);
  for (int64_t i = 0; i < e; ++i) {
    const auto& [r, s, d] = edges[i];
    if (i == 0 || std::get<0>(edges[i - 1]) != r || std::get<1>(edges[i - 1]) != s) {
      g.uniq_src.push_back(s);
      g.uniq_edge_ptr.push_back(i);
      ++g.uniq_ptr[r + 1];
    }
    g.edge_uniq.push_back(g.num_uniq() - 1);
    g.dst.push_back(d);
    g.norm.push_back(1.0 / static_cast<double>(in_degree[d]));
  }
  g.uniq_edge_ptr.push_back(e);
  for (int64_t r = 0; r < g.num_relations; ++r) g.uniq_ptr[r + 1] += g.uniq_ptr[r];
  g.dst_ptr.assign(kNodes + 1, 0);
  for (int64_t d : g.dst) ++g.dst_ptr[d + 1];
  for (int64_t v = 0; v < kNodes; ++v) g.dst_ptr[v + 1] += g.dst_ptr[v];
  g.dst_edges.assign(e, 0);
  std::vector<int64_t> cursor(g.dst_ptr.begin(), g.dst_ptr.end() - 1);
  for (int64_t i = 0; i < e; ++i) g.dst_edges[cursor[g.dst[i]]++] = i;
  return g;
}

}  // namespace tessel::bench
