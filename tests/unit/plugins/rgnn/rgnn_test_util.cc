#include "rgnn_test_util.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace tessel::kernel_test {

Graph RandomGraph(const GraphSpec& spec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Graph g;
  g.m = spec.num_src_rows;
  g.n = spec.num_dst;
  g.r = spec.num_relations;
  // Sources come from a few rows (repeated (relation, source) pairs); the last destination is
  // isolated; relation 1 is empty.
  std::vector<int64_t> sources(static_cast<size_t>(g.m));
  std::iota(sources.begin(), sources.end(), 0);
  std::shuffle(sources.begin(), sources.end(), rng);
  sources.resize(static_cast<size_t>(std::min(spec.distinct_sources, g.m)));
  std::uniform_int_distribution<int64_t> pick_rel(0, g.r - 1), pick_src(0, static_cast<int64_t>(sources.size()) - 1),
      pick_dst(0, std::max<int64_t>(0, g.n - 2));
  std::uniform_real_distribution<double> pick_norm(0.1, 1.0);
  std::vector<std::tuple<int64_t, int64_t, int64_t, double>> edges;
  for (int64_t i = 0; i < spec.num_edges; ++i) {
    int64_t rel = pick_rel(rng);
    if (rel == 1 && g.r > 2) rel = 0;
    edges.emplace_back(rel, sources[pick_src(rng)], pick_dst(rng), pick_norm(rng));
  }
  std::sort(edges.begin(), edges.end());
  for (const auto& [rel, src, dst, norm] : edges) {
    g.rel.push_back(rel);
    g.src.push_back(src);
    g.dst.push_back(dst);
    g.norm.push_back(norm);
  }
  const int64_t e = g.num_edges();
  g.uniq_ptr.assign(static_cast<size_t>(g.r + 1), 0);
  for (int64_t i = 0; i < e; ++i) {
    const bool new_pair = i == 0 || g.rel[i] != g.rel[i - 1] || g.src[i] != g.src[i - 1];
    if (new_pair) {
      g.uniq_src.push_back(g.src[i]);
      g.uniq_edge_ptr.push_back(i);
      ++g.uniq_ptr[g.rel[i] + 1];
    }
    g.edge_uniq.push_back(g.num_uniq() - 1);
  }
  g.uniq_edge_ptr.push_back(e);
  for (int64_t r = 0; r < g.r; ++r) g.uniq_ptr[r + 1] += g.uniq_ptr[r];
  g.dst_ptr.assign(static_cast<size_t>(g.n + 1), 0);
  for (int64_t i = 0; i < e; ++i) ++g.dst_ptr[g.dst[i] + 1];
  for (int64_t i = 0; i < g.n; ++i) g.dst_ptr[i + 1] += g.dst_ptr[i];
  g.dst_edges.assign(static_cast<size_t>(e), 0);
  std::vector<int64_t> cursor(g.dst_ptr.begin(), g.dst_ptr.end() - 1);
  for (int64_t i = 0; i < e; ++i) g.dst_edges[cursor[g.dst[i]]++] = i;
  return g;
}

int64_t RelationOfUniq(const Graph& g, int64_t u) {
  for (int64_t r = 0; r < g.r; ++r) {
    if (u >= g.uniq_ptr[r] && u < g.uniq_ptr[r + 1]) return r;
  }
  ADD_FAILURE() << "compact row " << u << " is in no relation";
  return 0;
}

}  // namespace tessel::kernel_test
