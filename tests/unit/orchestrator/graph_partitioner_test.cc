#include "orchestrator/graph_partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "storage/edges_import.h"
#include "storage/graph.h"
#include "storage/partition.h"
#include "tests/unit/test_data.h"

namespace tessel::orchestrator {
namespace {

using storage::HeteroGraph;
using storage::NodeType;
using storage::Relation;
using storage::RelationKind;

Relation MakeRelation(const std::string& name, int32_t src_type, int32_t dst_type, std::vector<int64_t> src,
                      std::vector<int64_t> dst) {
  Relation r;
  r.name = name;
  r.src_type = src_type;
  r.dst_type = dst_type;
  r.src = std::move(src);
  r.dst = std::move(dst);
  return r;
}

// Adds the inverse of every relation, as importers do with --add-inverse.
void AddInverses(HeteroGraph& g) {
  const size_t base = g.relations.size();
  for (size_t r = 0; r < base; ++r) {
    Relation inv;
    inv.name = "rev-" + g.relations[r].name;
    inv.src_type = g.relations[r].dst_type;
    inv.dst_type = g.relations[r].src_type;
    inv.kind = RelationKind::kInverse;
    inv.src = g.relations[r].dst;
    inv.dst = g.relations[r].src;
    g.relations.push_back(std::move(inv));
  }
}

// A graph of `communities` dense clusters joined by a few random edges. Community membership is
// scattered over the id space so that contiguous id ranges do not line up with it. Out-degrees are
// skewed (1 .. 2 * avg_degree) so that balancing edges is a different problem from balancing nodes.
HeteroGraph PlantedGraph(int communities, int per_community, int avg_degree, double inter_fraction, uint64_t seed,
                         bool labelled) {
  std::mt19937_64 rng(seed);
  const int64_t n = int64_t{communities} * per_community;
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  // members[c] = the nodes of community c; community_of[v] = c.
  std::vector<std::vector<int64_t>> members(communities);
  std::vector<int> community_of(n);
  for (int64_t i = 0; i < n; ++i) {
    community_of[perm[i]] = static_cast<int>(i % communities);
    members[i % communities].push_back(perm[i]);
  }
  HeteroGraph g;
  g.name = "planted";
  NodeType t;
  t.name = "node";
  t.count = n;
  if (labelled) {
    g.num_classes = 4;
    t.labels.resize(n);
    t.train_mask.assign(n, 0);
    t.val_mask.assign(n, 0);
    t.test_mask.assign(n, 0);
    for (int64_t v = 0; v < n; ++v) {
      t.labels[v] = community_of[v] % 4;
      const uint64_t r = rng() % 10;
      if (r == 0)
        t.train_mask[v] = 1;
      else if (r == 1)
        t.val_mask[v] = 1;
      else if (r == 2)
        t.test_mask[v] = 1;
    }
  }
  g.node_types.push_back(std::move(t));
  Relation link;
  link.name = "link";
  std::uniform_real_distribution<double> coin(0, 1);
  for (int64_t v = 0; v < n; ++v) {
    const int deg = 1 + static_cast<int>(rng() % (2 * avg_degree));
    for (int j = 0; j < deg; ++j) {
      int64_t u;
      if (coin(rng) < inter_fraction) {
        u = static_cast<int64_t>(rng() % n);
      } else {
        const auto& m = members[community_of[v]];
        u = m[rng() % m.size()];
      }
      link.src.push_back(v);
      link.dst.push_back(u);
    }
  }
  g.relations.push_back(std::move(link));
  AddInverses(g);
  return g;
}

// The per-constraint imbalance, recomputed here from the definitions, not from the partitioner.
std::map<std::string, double> IndependentImbalance(const HeteroGraph& g, const std::vector<int32_t>& part_of, int k) {
  const NodeType& t = g.node_types[0];
  std::vector<int64_t> indeg(g.num_nodes(), 0);
  for (const Relation& r : g.relations) {
    for (int64_t d : r.dst) ++indeg[g.NodeOffset(r.dst_type) + d];
  }
  std::map<std::string, std::vector<double>> per_part;
  std::map<std::string, double> total;
  for (const char* name : {"train", "edges", "nodes"}) per_part[name].assign(k, 0);
  for (int64_t v = 0; v < g.num_nodes(); ++v) {
    const double train = (!t.labels.empty() && t.labels[v] >= 0 && t.train_mask[v]) ? 1 : 0;
    per_part["train"][part_of[v]] += train;
    per_part["edges"][part_of[v]] += static_cast<double>(indeg[v]);
    per_part["nodes"][part_of[v]] += 1;
    total["train"] += train;
    total["edges"] += static_cast<double>(indeg[v]);
    total["nodes"] += 1;
  }
  std::map<std::string, double> imb;
  for (const auto& [name, w] : per_part) {
    if (total[name] == 0) continue;
    imb[name] = *std::max_element(w.begin(), w.end()) / (total[name] / k);
  }
  return imb;
}

TEST(EdgeCut, CountsEachUndirectedEdgeOnceIgnoringSelfLoopsAndDirection) {
  // Two node types: A = {a0, a1, a2} (global 0..2), B = {b0, b1} (global 3, 4).
  HeteroGraph g;
  g.node_types.resize(2);
  g.node_types[0].name = "A";
  g.node_types[0].count = 3;
  g.node_types[1].name = "B";
  g.node_types[1].count = 2;
  g.relations = {
      MakeRelation("ab", 0, 1, {0, 0, 1, 2}, {0, 0, 1, 1}),  // a0-b0 twice, a1-b1, a2-b1
      MakeRelation("ba", 1, 0, {0, 1}, {0, 0}),              // b0-a0 (same pair as a0-b0), b1-a0
      MakeRelation("aa", 0, 0, {2, 2, 1}, {2, 0, 2}),        // self loop a2, a2-a0, a1-a2
  };
  // Undirected distinct pairs: {0,3} {1,4} {2,4} {0,4} {0,2} {1,2}  (self loop dropped).
  EXPECT_EQ(EdgeCut(g, {0, 0, 0, 0, 0}), 0);
  // {a0, a1, a2} | {b0, b1}: cut = {0,3} {1,4} {2,4} {0,4}.
  EXPECT_EQ(EdgeCut(g, {0, 0, 0, 1, 1}), 4);
  // {a0, b0} | {a1, a2, b1}: cut = {0,4} {0,2}.
  EXPECT_EQ(EdgeCut(g, {0, 1, 1, 0, 1}), 2);
  // Every node alone: all 6 distinct pairs.
  EXPECT_EQ(EdgeCut(g, {0, 1, 2, 3, 4}), 6);
  EXPECT_EQ(EdgeCut(g, {0, 1}), -1);  // wrong length
}

TEST(PartitionGraph, MetisBeatsRandomByAWideMarginOnPlantedCommunities) {
  const HeteroGraph g = PlantedGraph(8, 250, 6, 0.05, 42, /*labelled=*/false);
  auto metis = PartitionGraph(g, 8, PartitionMethod::kMetis, 1);
  auto random = PartitionGraph(g, 8, PartitionMethod::kRandom, 1);
  ASSERT_TRUE(metis.ok()) << metis.status().ToString();
  ASSERT_TRUE(random.ok()) << random.status().ToString();
  EXPECT_EQ(metis->edge_cut, EdgeCut(g, metis->part_of));
  EXPECT_EQ(random->edge_cut, EdgeCut(g, random->part_of));
  // About 5% of edges cross communities, while a random 8-way split cuts about 7/8 of them.
  EXPECT_LT(metis->edge_cut, random->edge_cut / 5) << "metis " << metis->edge_cut << " random " << random->edge_cut;
  EXPECT_EQ(metis->method, "metis");
}

TEST(PartitionGraph, EveryConstraintWithinFivePercentForSeveralPartCounts) {
  const HeteroGraph g = PlantedGraph(12, 300, 5, 0.1, 7, /*labelled=*/true);
  for (int k : {2, 3, 4, 5, 8, 16}) {
    auto r = PartitionGraph(g, k, PartitionMethod::kMetis, 3);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->part_of.size(), static_cast<size_t>(g.num_nodes()));
    for (int32_t p : r->part_of) ASSERT_TRUE(p >= 0 && p < k);
    const auto imb = IndependentImbalance(g, r->part_of, k);
    ASSERT_EQ(imb.size(), 3u);
    for (const auto& [name, value] : imb) {
      EXPECT_LE(value, 1.05) << name << " with " << k << " parts";
    }
    ASSERT_EQ(r->constraint_names, (std::vector<std::string>{"train", "edges", "nodes"}));
    for (size_t c = 0; c < r->constraint_names.size(); ++c) {
      EXPECT_NEAR(r->imbalance[c], imb.at(r->constraint_names[c]), 1e-9);
    }
  }
}

TEST(PartitionGraph, DropsConstraintsWithZeroTotal) {
  const HeteroGraph g = PlantedGraph(4, 100, 4, 0.1, 5, /*labelled=*/false);
  auto r = PartitionGraph(g, 4, PartitionMethod::kMetis, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->constraint_names, (std::vector<std::string>{"edges", "nodes"}));
  ASSERT_EQ(r->imbalance.size(), 2u);
}

TEST(PartitionGraph, ReportsImbalanceHonestlyWhenOneNodeOutweighsAPart) {
  // A star: every edge points into the hub, so whichever part owns it holds all the "edges" weight.
  HeteroGraph g;
  g.name = "star";
  NodeType t;
  t.name = "node";
  t.count = 101;
  g.node_types.push_back(t);
  Relation in = MakeRelation("in", 0, 0, {}, {});
  for (int64_t leaf = 1; leaf <= 100; ++leaf) {
    in.src.push_back(leaf);
    in.dst.push_back(0);
  }
  g.relations.push_back(in);
  auto r = PartitionGraph(g, 2, PartitionMethod::kMetis, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->constraint_names, (std::vector<std::string>{"edges", "nodes"}));
  EXPECT_DOUBLE_EQ(r->imbalance[0], 2.0);
  EXPECT_LE(r->imbalance[1], 1.05);
}

TEST(PartitionGraph, EdgelessGraphBalancesNodes) {
  HeteroGraph g;
  g.name = "dust";
  NodeType t;
  t.name = "node";
  t.count = 1000;
  g.node_types.push_back(t);
  auto r = PartitionGraph(g, 4, PartitionMethod::kMetis, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->edge_cut, 0);
  ASSERT_EQ(r->constraint_names, (std::vector<std::string>{"nodes"}));
  EXPECT_LE(r->imbalance[0], 1.05);
}

TEST(PartitionGraph, DeterministicForASeed) {
  const HeteroGraph g = PlantedGraph(6, 200, 5, 0.1, 11, /*labelled=*/true);
  for (PartitionMethod m : {PartitionMethod::kMetis, PartitionMethod::kRandom, PartitionMethod::kRange}) {
    auto a = PartitionGraph(g, 5, m, 99);
    auto b = PartitionGraph(g, 5, m, 99);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->part_of, b->part_of) << NameOf(m);
    EXPECT_EQ(a->edge_cut, b->edge_cut);
  }
  auto c = PartitionGraph(g, 5, PartitionMethod::kRandom, 100);
  auto a = PartitionGraph(g, 5, PartitionMethod::kRandom, 99);
  EXPECT_NE(a->part_of, c->part_of) << "the seed must matter";
}

TEST(PartitionGraph, RangeIsContiguousAndBalancedOnNodes) {
  const HeteroGraph g = PlantedGraph(1, 1003, 3, 0.0, 3, false);
  auto r = PartitionGraph(g, 7, PartitionMethod::kRange, 0);
  ASSERT_TRUE(r.ok());
  std::vector<int64_t> sizes(7, 0);
  for (size_t i = 0; i < r->part_of.size(); ++i) {
    ++sizes[r->part_of[i]];
    if (i > 0) {
      EXPECT_GE(r->part_of[i], r->part_of[i - 1]);
    }
  }
  for (int64_t s : sizes) EXPECT_TRUE(s == 143 || s == 144) << s;
}

TEST(PartitionGraph, OnePartIsTrivial) {
  const HeteroGraph g = PlantedGraph(2, 50, 3, 0.1, 3, true);
  auto r = PartitionGraph(g, 1, PartitionMethod::kMetis, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->edge_cut, 0);
  for (int32_t p : r->part_of) EXPECT_EQ(p, 0);
  for (double v : r->imbalance) EXPECT_DOUBLE_EQ(v, 1.0);
}

TEST(PartitionGraph, RefusesBadPartCounts) {
  const HeteroGraph g = PlantedGraph(2, 5, 2, 0.1, 3, false);
  EXPECT_EQ(PartitionGraph(g, 0, PartitionMethod::kMetis, 0).status().code(), Code::kUsage);
  EXPECT_EQ(PartitionGraph(g, 11, PartitionMethod::kMetis, 0).status().code(), Code::kUsage);
  EXPECT_FALSE(ChoiceNamed<PartitionMethod>("kahip").has_value());
}

TEST(PartitionGraph, RefusesGraphsBeyondMetisIdxWithoutAllocating) {
  HeteroGraph g;
  g.name = "huge";
  NodeType t;
  t.name = "node";
  t.count = int64_t{3} << 30;  // 3.2e9 nodes: only the count, no per-node arrays
  g.node_types.push_back(t);
  auto r = PartitionGraph(g, 4, PartitionMethod::kMetis, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUsage);
  EXPECT_NE(r.status().message().find("idx_t"), std::string::npos) << r.status().message();
}

// ---- FB15k-237 -------------------------------------------------------------------------------------

// FB15k-237 (train + valid + test triples) with inverse relations, as
// `tessel import edges --input FB15k-237.tar.gz --add-inverse` builds it. A missing tarball skips the
// test (fails under TESSEL_REQUIRE_DATA=1); one that is present but does not import fails it.
TEST(PartitionGraph, Fb15k237FourPartsCutsFarLessThanRandomAndBalances) {
  const std::string tarball = test_data::DataDir() + "/fb15k-237/FB15k-237.tar.gz";
  TESSEL_NEED_DATA_FILE(tarball);
  storage::EdgesImportOptions options;
  options.inputs = {tarball};
  options.add_inverse = true;
  Result<HeteroGraph> imported = storage::ImportEdges(options);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const HeteroGraph& g = *imported;
  ASSERT_EQ(g.num_nodes(), 14541);
  ASSERT_EQ(g.num_edges(), 2 * 310116);  // distinct triples of train + valid + test, and their inverses
  auto metis = PartitionGraph(g, 4, PartitionMethod::kMetis, 1);
  auto random = PartitionGraph(g, 4, PartitionMethod::kRandom, 1);
  ASSERT_TRUE(metis.ok()) << metis.status().ToString();
  ASSERT_TRUE(random.ok());
  const double ratio = static_cast<double>(metis->edge_cut) / static_cast<double>(random->edge_cut);
  EXPECT_LE(ratio, 0.5) << "metis " << metis->edge_cut << " random " << random->edge_cut;
  for (const auto& [name, value] : IndependentImbalance(g, metis->part_of, 4)) {
    EXPECT_LE(value, 1.05) << name;
  }

  auto parts = storage::BuildWorkerPartitions(g, metis->part_of, 4);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  int64_t edges = 0, owned = 0;
  for (const auto& p : *parts) {
    edges += static_cast<int64_t>(p.src.size());
    owned += p.num_owned;
  }
  EXPECT_EQ(edges, g.num_edges());
  EXPECT_EQ(owned, g.num_nodes());
}

}  // namespace
}  // namespace tessel::orchestrator
