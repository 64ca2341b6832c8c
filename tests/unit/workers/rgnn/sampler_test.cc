#include "workers/rgnn/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

namespace tessel::workers {
namespace {

// A random graph of `n` nodes (two node types), 3 relations, about `degree` in-edges a node.
SampledGraph RandomGraph(int64_t n, int degree, uint64_t seed) {
  std::mt19937_64 rng(seed);
  SampledGraph g;
  g.num_nodes = n;
  g.num_relations = 3;
  g.num_classes = 2;
  g.type_offsets = {0, n / 3, n};
  g.in_ptr.push_back(0);
  for (int64_t v = 0; v < n; ++v) {
    std::vector<std::pair<int32_t, int32_t>> in;
    const int d = static_cast<int>(rng() % static_cast<uint64_t>(2 * degree + 1));
    for (int k = 0; k < d; ++k) in.emplace_back(static_cast<int32_t>(rng() % 3), static_cast<int32_t>(rng() % n));
    std::sort(in.begin(), in.end());
    for (const auto& [r, s] : in) {
      g.in_rel.push_back(r);
      g.in_src.push_back(s);
    }
    g.in_ptr.push_back(static_cast<int64_t>(g.in_src.size()));
  }
  g.part_of.assign(static_cast<size_t>(n), 0);
  g.labels.assign(static_cast<size_t>(n), 0);
  g.train_mask.assign(static_cast<size_t>(n), 1);
  g.test_mask.assign(static_cast<size_t>(n), 0);
  return g;
}

// The drawn in-edges (relation, source node) of every destination of every layer, by global ids.
using Draws = std::map<std::pair<int, int64_t>, std::multiset<std::pair<int32_t, int64_t>>>;
Draws DrawsOf(const std::vector<SampledBlock>& blocks) {
  Draws d;
  for (size_t l = 0; l < blocks.size(); ++l) {
    const SampledBlock& b = blocks[l];
    for (size_t r = 0; r + 1 < b.rel_ptr.size(); ++r) {
      for (int64_t e = b.rel_ptr[r]; e < b.rel_ptr[r + 1]; ++e) {
        const int64_t dst = b.src_ids[static_cast<size_t>(b.dst[static_cast<size_t>(e)])];
        d[{static_cast<int>(l), dst}].insert(
            {static_cast<int32_t>(r), b.src_ids[static_cast<size_t>(b.src[static_cast<size_t>(e)])]});
      }
    }
  }
  return d;
}

TEST(Sampler, BlocksChainAndEdgesAreSortedAndInRange) {
  const SampledGraph g = RandomGraph(500, 8, 1);
  ASSERT_TRUE(g.Validate(1).ok());
  Sampler sampler(g, {4, 3}, FanoutPer::kTotal);
  const std::vector<int64_t> seeds = {3, 17, 40, 41, 200, 499};
  const auto blocks = sampler.Sample(seeds, 11);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[1].num_dst, 6);
  EXPECT_EQ(std::vector<int64_t>(blocks[1].src_ids.begin(), blocks[1].src_ids.begin() + 6), seeds);
  // Layer 0's destinations are layer 1's input rows.
  ASSERT_EQ(blocks[0].num_dst, static_cast<int64_t>(blocks[1].src_ids.size()));
  EXPECT_TRUE(std::equal(blocks[1].src_ids.begin(), blocks[1].src_ids.end(), blocks[0].src_ids.begin()));
  for (const SampledBlock& b : blocks) {
    // Input rows are distinct; the new ones follow the destinations grouped by node type.
    EXPECT_EQ(std::set<int64_t>(b.src_ids.begin(), b.src_ids.end()).size(), b.src_ids.size());
    std::vector<int32_t> types;
    for (auto it = b.src_ids.begin() + b.num_dst; it != b.src_ids.end(); ++it) types.push_back(g.TypeOf(*it));
    EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
    ASSERT_EQ(b.rel_ptr.size(), 4u);
    EXPECT_EQ(b.rel_ptr.back(), static_cast<int64_t>(b.src.size()));
    for (size_t r = 0; r < 3; ++r) {
      for (int64_t e = b.rel_ptr[r]; e < b.rel_ptr[r + 1]; ++e) {
        const auto i = static_cast<size_t>(e);
        EXPECT_GE(b.src[i], 0);
        EXPECT_LT(b.src[i], static_cast<int64_t>(b.src_ids.size()));
        EXPECT_GE(b.dst[i], 0);
        EXPECT_LT(b.dst[i], b.num_dst);
        if (e > b.rel_ptr[r]) {
          EXPECT_LE(std::tie(b.src[i - 1], b.dst[i - 1]), std::tie(b.src[i], b.dst[i]));
        }
      }
    }
  }
}

TEST(Sampler, FanoutBoundsEachNodesDrawAndEveryEdgeExists) {
  const SampledGraph g = RandomGraph(400, 10, 2);
  for (const FanoutPer per : {FanoutPer::kTotal, FanoutPer::kRelation}) {
    const bool per_relation = per == FanoutPer::kRelation;
    Sampler sampler(g, {3, 2}, per);
    std::vector<int64_t> seeds;
    for (int64_t v = 0; v < 400; v += 7) seeds.push_back(v);
    const Draws draws = DrawsOf(sampler.Sample(seeds, 5));
    for (const auto& [where, edges] : draws) {
      const auto [layer, node] = where;
      const int32_t fanout = layer == 0 ? 3 : 2;
      std::multiset<std::pair<int32_t, int64_t>> all;
      for (int64_t e = g.in_ptr[static_cast<size_t>(node)]; e < g.in_ptr[static_cast<size_t>(node) + 1]; ++e) {
        all.insert({g.in_rel[static_cast<size_t>(e)], g.in_src[static_cast<size_t>(e)]});
      }
      for (const auto& edge : edges) EXPECT_GT(all.count(edge), 0u) << "layer " << layer << " node " << node;
      if (per_relation) {
        for (int32_t r = 0; r < 3; ++r) {
          int64_t drawn = 0, have = 0;
          for (const auto& [rel, src] : edges) drawn += rel == r ? 1 : 0;
          for (const auto& [rel, src] : all) have += rel == r ? 1 : 0;
          EXPECT_EQ(drawn, std::min<int64_t>(have, fanout)) << "node " << node << " relation " << r;
        }
      } else {
        EXPECT_EQ(static_cast<int64_t>(edges.size()), std::min<int64_t>(static_cast<int64_t>(all.size()), fanout));
      }
    }
  }
}

TEST(Sampler, AllNeighboursWithFanoutMinusOne) {
  const SampledGraph g = RandomGraph(100, 6, 3);
  Sampler sampler(g, {-1}, FanoutPer::kTotal);
  const auto blocks = sampler.Sample(std::vector<int64_t>{5, 6, 7}, 1);
  EXPECT_EQ(static_cast<int64_t>(blocks[0].src.size()),
            (g.in_ptr[6] - g.in_ptr[5]) + (g.in_ptr[7] - g.in_ptr[6]) + (g.in_ptr[8] - g.in_ptr[7]));
}

// A node's draw depends on the key, the layer and the node only: splitting the seeds across workers
// (each sampling its own share) draws the same edges as one worker sampling them all.
TEST(Sampler, DrawsDoNotDependOnTheOtherSeedsOfTheBatch) {
  const SampledGraph g = RandomGraph(600, 9, 4);
  std::vector<int64_t> seeds;
  for (int64_t v = 1; v < 600; v += 5) seeds.push_back(v);
  Sampler one(g, {4, 4}, FanoutPer::kTotal);
  const Draws whole = DrawsOf(one.Sample(seeds, 77));
  for (const int workers : {2, 3}) {
    Draws merged;
    for (int w = 0; w < workers; ++w) {
      std::vector<int64_t> share;
      for (size_t i = 0; i < seeds.size(); ++i) {
        if (static_cast<int>(i) % workers == w) share.push_back(seeds[i]);
      }
      Sampler s(g, {4, 4}, FanoutPer::kTotal);
      for (const auto& [where, edges] : DrawsOf(s.Sample(share, 77))) {
        auto [it, fresh] = merged.emplace(where, edges);
        if (!fresh) {
          EXPECT_EQ(it->second, edges) << "node " << where.second << " drawn twice, differently";
        }
      }
    }
    // Every draw of the split run is the whole run's draw of that node (the whole run covers them all).
    for (const auto& [where, edges] : merged) {
      ASSERT_TRUE(whole.count(where)) << workers << " workers: layer " << where.first << " node " << where.second;
      EXPECT_EQ(whole.at(where), edges);
    }
  }
  // Another key draws differently somewhere.
  Sampler again(g, {4, 4}, FanoutPer::kTotal);
  EXPECT_NE(DrawsOf(again.Sample(seeds, 78)), whole);
  Sampler same(g, {4, 4}, FanoutPer::kTotal);
  EXPECT_EQ(DrawsOf(same.Sample(seeds, 77)), whole);
}

// Nodes whose in-edges come from a few sources each, in 2 relations, every (relation, source) 1 to 4 times.
SampledGraph ParallelEdgeGraph(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  SampledGraph g;
  g.num_nodes = n;
  g.num_relations = 2;
  g.num_classes = 2;
  g.type_offsets = {0, n};
  g.in_ptr.push_back(0);
  for (int64_t v = 0; v < n; ++v) {
    std::set<std::pair<int32_t, int32_t>> neighbours;
    const int k = static_cast<int>(rng() % 6);
    while (static_cast<int>(neighbours.size()) < k) {
      neighbours.emplace(static_cast<int32_t>(rng() % 2), static_cast<int32_t>(rng() % static_cast<uint64_t>(n)));
    }
    for (const auto& [r, s] : neighbours) {
      for (int copies = 1 + static_cast<int>(rng() % 4); copies > 0; --copies) {
        g.in_rel.push_back(r);
        g.in_src.push_back(s);
      }
    }
    g.in_ptr.push_back(static_cast<int64_t>(g.in_src.size()));
  }
  g.part_of.assign(static_cast<size_t>(n), 0);
  g.labels.assign(static_cast<size_t>(n), 0);
  g.train_mask.assign(static_cast<size_t>(n), 1);
  g.test_mask.assign(static_cast<size_t>(n), 0);
  return g;
}

TEST(SampledGraph, BytesCountsEveryArray) {
  SampledGraph g;
  g.num_nodes = 3;
  g.type_offsets = {0, 3};   // 2 x 8
  g.in_ptr = {0, 1, 2, 2};   // 4 x 8
  g.in_src = {1, 2};         // 2 x 4
  g.in_rel = {0, 0};         // 2 x 4
  g.part_of = {0, 0, 1};     // 3 x 4
  g.labels = {0, -1, 1};     // 3 x 8
  g.train_mask = {1, 0, 0};  // 3 x 1
  g.test_mask = {0, 0, 1};   // 3 x 1
  EXPECT_EQ(g.Bytes(), 16 + 32 + 8 + 8 + 12 + 24 + 3 + 3);
}

// A draw picks distinct edges: an edge that exists m times is drawn at most m times, and with fanout -1
// (or one past the degree) a node's draw is its whole in-edge multiset.
TEST(Sampler, NoNeighbourIsDrawnMoreOftenThanItsEdgesExist) {
  const SampledGraph g = ParallelEdgeGraph(80, 6);
  ASSERT_TRUE(g.Validate(1).ok());
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < 80; v += 4) seeds.push_back(v);
  int64_t checked = 0, repeated = 0;
  for (const bool per_relation : {false, true}) {
    for (const std::vector<int32_t>& fanouts :
         {std::vector<int32_t>{2, 3}, std::vector<int32_t>{5, 1}, std::vector<int32_t>{-1, 30}}) {
      Sampler sampler(g, fanouts, per_relation ? FanoutPer::kRelation : FanoutPer::kTotal);
      for (uint64_t key = 0; key < 50; ++key) {
        for (const auto& [where, edges] : DrawsOf(sampler.Sample(seeds, key))) {
          const auto [layer, node] = where;
          std::multiset<std::pair<int32_t, int64_t>> all;
          for (int64_t e = g.in_ptr[static_cast<size_t>(node)]; e < g.in_ptr[static_cast<size_t>(node) + 1]; ++e) {
            all.insert({g.in_rel[static_cast<size_t>(e)], g.in_src[static_cast<size_t>(e)]});
          }
          for (const auto& edge : edges) {
            ASSERT_LE(edges.count(edge), all.count(edge))
                << "layer " << layer << " node " << node << " drew (relation " << edge.first << ", source "
                << edge.second << ") " << edges.count(edge) << " times; it exists " << all.count(edge) << " times (key "
                << key << ", per_relation " << per_relation << ")";
            repeated += edges.count(edge) > 1 ? 1 : 0;
            ++checked;
          }
          if (fanouts[static_cast<size_t>(layer)] < 0 || fanouts[static_cast<size_t>(layer)] >= 30) {
            ASSERT_EQ(edges, all) << "every neighbour, as often as it exists: layer " << layer << " node " << node
                                  << " (key " << key << ", per_relation " << per_relation << ")";
          }
        }
      }
    }
  }
  EXPECT_GT(repeated, 0) << "parallel edges were drawn together somewhere, or the bound is untested";
  EXPECT_GT(checked, 1000);
}

// Each in-edge of a node is drawn with probability fanout / degree (per relation: fanout / the edges of
// its relation), judged over 3000 keys (epochs and batches) at once on 60 destinations of degree 1 to 12
// per relation (distinct sources, so an edge is a (relation, source)). An edge's count over the keys is
// binomial(K, p), p = f / d; the d counts of one node sum to K f, so with z = (count - K p) / sqrt(K p (1 -
// p)) the sum (d - 1) / d * sum(z^2) over a node's edges is chi-square with d - 1 degrees of freedom, and
// the sum over every node is chi-square with the summed degrees of freedom. The keys are fixed, so the test
// is deterministic; the bounds (chi-square within 6 standard deviations of its mean, every |z| < 5.5) hold
// for any fair draw with a margin (the draws give chi-square / freedom 0.92 to 1.15 and |z| <= 4.1), while
// an off-by-one in Floyd's algorithm (t drawn from [0, j) rather than [0, j]) never draws the last edge at
// fanout 1 (|z| up to 39; chi-square 6,800 to 112,000 against bounds of 300 to 630).
TEST(Sampler, EachEdgeIsDrawnWithProbabilityFanoutOverDegree) {
  const int64_t n = 60;
  SampledGraph g;
  g.num_nodes = n;
  g.num_relations = 2;
  g.num_classes = 2;
  g.type_offsets = {0, n};
  g.in_ptr.push_back(0);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t degree[2] = {1 + v % 12, v % 5};
    for (int32_t r = 0; r < 2; ++r) {
      for (int64_t k = 0; k < degree[r]; ++k) {
        g.in_rel.push_back(r);
        g.in_src.push_back(static_cast<int32_t>((v + 1 + k * 7) % n));  // distinct: 7 is prime to n
      }
    }
    g.in_ptr.push_back(static_cast<int64_t>(g.in_src.size()));
  }
  g.part_of.assign(static_cast<size_t>(n), 0);
  g.labels.assign(static_cast<size_t>(n), 0);
  g.train_mask.assign(static_cast<size_t>(n), 1);
  g.test_mask.assign(static_cast<size_t>(n), 0);
  ASSERT_TRUE(g.Validate(1).ok());
  std::vector<int64_t> seeds(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) seeds[static_cast<size_t>(v)] = v;

  constexpr int64_t kKeys = 3000;
  for (const bool per_relation : {false, true}) {
    for (const int32_t fanout : {1, 2, 3, 5, 8}) {
      Sampler sampler(g, {fanout}, per_relation ? FanoutPer::kRelation : FanoutPer::kTotal);
      // drawn[(node * 2 + relation) * n + source]: how often that edge was drawn.
      std::vector<int64_t> drawn(static_cast<size_t>(n * 2 * n), 0);
      for (int64_t key = 0; key < kKeys; ++key) {
        const SampledBlock b = sampler.Sample(seeds, MixKey(1234, static_cast<uint64_t>(key)))[0];
        for (int64_t r = 0; r < 2; ++r) {
          for (int64_t e = b.rel_ptr[static_cast<size_t>(r)]; e < b.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
            const int64_t dst = b.src_ids[static_cast<size_t>(b.dst[static_cast<size_t>(e)])];
            const int64_t src = b.src_ids[static_cast<size_t>(b.src[static_cast<size_t>(e)])];
            ++drawn[static_cast<size_t>((dst * 2 + r) * n + src)];
          }
        }
      }
      // One line per configuration however many edges are off: the count, and the worst of them.
      const std::string config =
          StrCat("fanout ", fanout, per_relation ? " per relation" : " per node", ", ", kKeys, " keys");
      double chi_square = 0, worst_z = 0;
      int64_t freedom = 0, cells = 0, far = 0, short_of_all = 0;
      std::string worst;
      for (int64_t v = 0; v < n; ++v) {
        const int64_t b = g.in_ptr[static_cast<size_t>(v)], e = g.in_ptr[static_cast<size_t>(v) + 1];
        for (int64_t gb = b; gb < e;) {  // one group: the node's edges, or one relation's
          int64_t ge = gb + 1;
          while (ge < e && (!per_relation || g.in_rel[static_cast<size_t>(ge)] == g.in_rel[static_cast<size_t>(gb)])) {
            ++ge;
          }
          const int64_t d = ge - gb;
          const double p = std::min(1.0, static_cast<double>(fanout) / static_cast<double>(d));
          double sum_z2 = 0;
          for (int64_t k = gb; k < ge; ++k) {
            const int64_t count = drawn[static_cast<size_t>((v * 2 + g.in_rel[static_cast<size_t>(k)]) * n +
                                                            g.in_src[static_cast<size_t>(k)])];
            if (p == 1.0) {  // a degree within the fanout draws every edge every time
              short_of_all += count != kKeys ? 1 : 0;
              continue;
            }
            const double z = (static_cast<double>(count) - kKeys * p) / std::sqrt(kKeys * p * (1 - p));
            sum_z2 += z * z;
            ++cells;
            far += std::abs(z) >= 5.5 ? 1 : 0;
            if (std::abs(z) > worst_z) {
              worst_z = std::abs(z);
              worst = StrCat("node ", v, " edge ", k - gb, " of ", d, ": drawn ", count, " times, expected ", kKeys * p,
                             " (z = ", z, ")");
            }
          }
          if (p < 1.0) {
            chi_square += static_cast<double>(d - 1) / static_cast<double>(d) * sum_z2;
            freedom += d - 1;
          }
          gb = ge;
        }
      }
      ASSERT_GT(freedom, 0);
      EXPECT_EQ(short_of_all, 0) << config << ": edges of nodes within the fanout not drawn every time";
      EXPECT_EQ(far, 0) << config << ": " << far << " of " << cells
                        << " edges drawn more than 5.5 standard deviations off p = fanout / degree; the worst: "
                        << worst;
      EXPECT_LT(chi_square, static_cast<double>(freedom) + 6 * std::sqrt(2.0 * static_cast<double>(freedom)))
          << config << ": chi-square with " << freedom << " degrees of freedom";
      std::ostringstream figures;
      figures << std::setprecision(4) << chi_square << " / " << freedom << ", max |z| " << worst_z;
      RecordProperty("fanout" + std::to_string(fanout) + (per_relation ? "_per_relation" : "") + "_chi_square",
                     figures.str());
    }
  }
}

TEST(Sampler, ShuffleIsADeterministicPermutation) {
  std::vector<int64_t> a(1000);
  for (int64_t i = 0; i < 1000; ++i) a[static_cast<size_t>(i)] = i;
  std::vector<int64_t> b = a, c = a;
  Shuffle(b, 9);
  Shuffle(c, 9);
  EXPECT_EQ(b, c);
  EXPECT_NE(b, a);
  std::sort(c.begin(), c.end());
  EXPECT_EQ(c, a);
  std::vector<int64_t> d = a;
  Shuffle(d, 10);
  EXPECT_NE(d, b);
}

TEST(SampledGraph, EncodeDecodeAndValidate) {
  SampledGraph g = RandomGraph(50, 3, 5);
  ByteWriter out;
  g.Encode(out);
  const std::vector<uint8_t> bytes = out.Take();
  ByteReader in(bytes.data(), bytes.size());
  auto back = SampledGraph::Decode(in);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->in_src, g.in_src);
  EXPECT_EQ(back->in_ptr, g.in_ptr);
  EXPECT_TRUE(back->Validate(1).ok());
  ByteReader truncated(bytes.data(), bytes.size() / 2);
  EXPECT_EQ(SampledGraph::Decode(truncated).status().code(), Code::kBadData);
  g.part_of[3] = 2;
  EXPECT_EQ(g.Validate(2).code(), Code::kBadData);
  g.part_of[3] = 0;
  g.in_src[0] = 50;
  const Status bad = g.Validate(1);
  EXPECT_EQ(bad.code(), Code::kBadData);
  EXPECT_NE(bad.message().find("edge 0"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace tessel::workers
