#include "workers/plugin_host/random_graph.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

namespace tessel::workers {
namespace {

// One side of the layout: edges grouped by (block of `row`, relation, row[, edge when not compact]).
struct Side {
  std::vector<int64_t> blk_row, blk_run, run_item, item_edge, edge_raw;
  std::vector<int32_t> run_rel, item_row;
  std::vector<int64_t> raw_item;  // the item of each raw edge
};

Side BuildSide(const std::vector<RawEdge>& edges, int64_t rows, int64_t block_rows, bool by_dst, bool compact) {
  Side side;
  const auto row_of = [&](const RawEdge& e) { return by_dst ? e.dst : e.src; };
  const auto other_of = [&](const RawEdge& e) { return by_dst ? e.src : e.dst; };
  std::vector<int64_t> order(edges.size());
  std::iota(order.begin(), order.end(), 0);
  // Sort by (block, relation, row, the other end, raw index): a fixed, deterministic edge order.
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const RawEdge &x = edges[static_cast<size_t>(a)], &y = edges[static_cast<size_t>(b)];
    return std::make_tuple(row_of(x) / block_rows, x.rel, row_of(x), other_of(x), a) <
           std::make_tuple(row_of(y) / block_rows, y.rel, row_of(y), other_of(y), b);
  });
  side.raw_item.assign(edges.size(), -1);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  size_t k = 0;
  for (int64_t b = 0; b < std::max<int64_t>(blocks, 1); ++b) {
    side.blk_row.push_back(std::min(rows, b * block_rows));
    side.blk_run.push_back(static_cast<int64_t>(side.run_rel.size()));
    while (k < order.size() && row_of(edges[static_cast<size_t>(order[k])]) / block_rows == b) {
      const int32_t rel = edges[static_cast<size_t>(order[k])].rel;
      side.run_rel.push_back(rel);
      side.run_item.push_back(static_cast<int64_t>(side.item_row.size()));
      while (k < order.size() && row_of(edges[static_cast<size_t>(order[k])]) / block_rows == b &&
             edges[static_cast<size_t>(order[k])].rel == rel) {
        const int64_t row = row_of(edges[static_cast<size_t>(order[k])]);
        side.item_row.push_back(static_cast<int32_t>(row));
        side.item_edge.push_back(static_cast<int64_t>(side.edge_raw.size()));
        do {
          side.raw_item[static_cast<size_t>(order[k])] = static_cast<int64_t>(side.item_row.size()) - 1;
          side.edge_raw.push_back(order[k]);
          ++k;
        } while (compact && k < order.size() && edges[static_cast<size_t>(order[k])].rel == rel &&
                 row_of(edges[static_cast<size_t>(order[k])]) == row);
      }
    }
  }
  side.blk_row.push_back(rows);
  side.blk_run.push_back(static_cast<int64_t>(side.run_rel.size()));
  side.run_item.push_back(static_cast<int64_t>(side.item_row.size()));
  side.item_edge.push_back(static_cast<int64_t>(side.edge_raw.size()));
  return side;
}

}  // namespace

SegmentGraph BuildSegmentGraph(int64_t m, int64_t n, int64_t r, std::vector<RawEdge> edges,
                               const SegmentOptions& options) {
  SegmentGraph g;
  g.m = m;
  g.n = n;
  g.r = r;
  g.edges = std::move(edges);
  const Side dst = BuildSide(g.edges, n, options.dst_block_rows, /*by_dst=*/true, options.compact);
  const Side src = BuildSide(g.edges, m, options.src_block_rows, /*by_dst=*/false, options.compact);
  g.dblk_row = dst.blk_row;
  g.dblk_run = dst.blk_run;
  g.drun_rel = dst.run_rel;
  g.drun_seg = dst.run_item;
  g.seg_dst = dst.item_row;
  g.seg_edge = dst.item_edge;
  g.dedge_raw = dst.edge_raw;
  g.sblk_row = src.blk_row;
  g.sblk_run = src.blk_run;
  g.srun_rel = src.run_rel;
  g.srun_pair = src.run_item;
  g.pair_src = src.item_row;
  g.pair_edge = src.item_edge;
  g.sedge_raw = src.edge_raw;
  for (int64_t raw : g.dedge_raw) {
    g.dedge_src.push_back(static_cast<int32_t>(g.edges[static_cast<size_t>(raw)].src));
    g.dedge_pair.push_back(static_cast<int32_t>(src.raw_item[static_cast<size_t>(raw)]));
  }
  for (int64_t raw : g.sedge_raw) g.sedge_seg.push_back(static_cast<int32_t>(dst.raw_item[static_cast<size_t>(raw)]));
  // |N_r(i)|, counted over the raw edges (parallel edges count).
  std::map<std::pair<int32_t, int64_t>, int64_t> degree;
  for (const RawEdge& e : g.edges) ++degree[{e.rel, e.dst}];
  for (int64_t s = 0; s < g.num_segs(); ++s) {
    const RawEdge& first =
        g.edges[static_cast<size_t>(g.dedge_raw[static_cast<size_t>(g.seg_edge[static_cast<size_t>(s)])])];
    g.seg_norm.push_back(1.0 / static_cast<double>(degree[{first.rel, first.dst}]));
  }
  return g;
}

SegmentGraph RandomSegmentGraph(int64_t m, int64_t n, int64_t r, int64_t num_edges, int64_t distinct_sources,
                                uint64_t seed, const SegmentOptions& options) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> sources(static_cast<size_t>(m));
  std::iota(sources.begin(), sources.end(), 0);
  std::shuffle(sources.begin(), sources.end(), rng);
  sources.resize(static_cast<size_t>(std::min(distinct_sources, m)));
  std::uniform_int_distribution<int64_t> pick_rel(0, r - 1), pick_src(0, static_cast<int64_t>(sources.size()) - 1),
      pick_dst(0, std::max<int64_t>(0, n - 2));
  std::vector<RawEdge> edges;
  for (int64_t i = 0; i < num_edges; ++i) {
    int32_t rel = static_cast<int32_t>(pick_rel(rng));
    if (rel == 1 && r > 2) rel = 0;
    edges.push_back({sources[static_cast<size_t>(pick_src(rng))], pick_dst(rng), rel});
    if (i % 5 == 0) edges.push_back(edges.back());  // a parallel edge of the same relation
  }
  return BuildSegmentGraph(m, n, r, std::move(edges), options);
}

}  // namespace tessel::workers
