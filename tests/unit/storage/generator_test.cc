// Tests for storage/generator.cc: determinism, validity, and that the planted structure is really there.
// The expectations are computed from the generated arrays with the test's own estimators, not from the
// generator's internals.
#include "storage/generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;

GenerateOptions Small() {
  GenerateOptions o;
  o.nodes = 6000;
  return o;
}

TEST(Generator, SameSeedGivesIdenticalGraph) {
  Result<HeteroGraph> a = GenerateGraph(Small());
  Result<HeteroGraph> b = GenerateGraph(Small());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->relations.size(), b->relations.size());
  for (size_t r = 0; r < a->relations.size(); ++r) {
    EXPECT_EQ(a->relations[r].src, b->relations[r].src);
    EXPECT_EQ(a->relations[r].dst, b->relations[r].dst);
  }
  for (size_t t = 0; t < a->node_types.size(); ++t) {
    EXPECT_EQ(a->node_types[t].features, b->node_types[t].features);
    EXPECT_EQ(a->node_types[t].labels, b->node_types[t].labels);
    EXPECT_EQ(a->node_types[t].train_mask, b->node_types[t].train_mask);
  }
  EXPECT_EQ(a->source_fingerprint, b->source_fingerprint);
}

TEST(Generator, DifferentSeedGivesDifferentGraph) {
  GenerateOptions o = Small();
  Result<HeteroGraph> a = GenerateGraph(o);
  o.seed = 2;
  Result<HeteroGraph> b = GenerateGraph(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->relations[0].dst, b->relations[0].dst);
  EXPECT_NE(a->node_types[0].labels, b->node_types[0].labels);
  EXPECT_NE(a->source_fingerprint, b->source_fingerprint);
}

TEST(Generator, DefaultsGiveAValidDemoGraph) {
  const GenerateOptions o;
  Result<HeteroGraph> g = GenerateGraph(o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->Validate().ok());
  EXPECT_EQ(g->num_nodes(), 20000);
  ASSERT_EQ(g->node_types.size(), 3u);
  EXPECT_EQ(g->node_types[0].count, 6667);
  EXPECT_EQ(g->node_types[2].count, 6666);
  EXPECT_EQ(g->num_classes, 4);
  ASSERT_EQ(g->relations.size(), 6u + 6u + 3u);
  int64_t base_edges = 0;
  std::set<std::pair<int32_t, int32_t>> type_pairs;
  for (int r = 0; r < 6; ++r) {
    const Relation& rel = g->relations[r];
    EXPECT_EQ(rel.kind, RelationKind::kBase);
    base_edges += static_cast<int64_t>(rel.src.size());
    type_pairs.insert({rel.src_type, rel.dst_type});
    const Relation& inv = g->relations[6 + r];
    EXPECT_EQ(inv.kind, RelationKind::kInverse);
    EXPECT_EQ(inv.name, rel.name + "^-1");
    EXPECT_EQ(inv.src, rel.dst);
    EXPECT_EQ(inv.dst, rel.src);
  }
  EXPECT_EQ(type_pairs.size(), 6u);  // six distinct (src, dst) type pairs
  // 20000 * 8 / 2 = 80000 edges before dropping the few duplicates.
  EXPECT_LE(base_edges, 80000);
  EXPECT_GE(base_edges, 79000);
  for (int t = 0; t < 3; ++t) {
    const Relation& self = g->relations[12 + t];
    EXPECT_EQ(self.kind, RelationKind::kSelfLoop);
    EXPECT_EQ(self.src_type, t);
    EXPECT_EQ(static_cast<int64_t>(self.src.size()), g->node_types[t].count);
  }
  int64_t train = 0, val = 0, test = 0;
  for (const auto& t : g->node_types) {
    EXPECT_EQ(t.feature_dim, 32);
    for (size_t i = 0; i < t.labels.size(); ++i) {
      EXPECT_GE(t.labels[i], 0);
      EXPECT_LE(t.train_mask[i] + t.val_mask[i] + t.test_mask[i], 1) << "splits overlap at " << i;
    }
    train += std::accumulate(t.train_mask.begin(), t.train_mask.end(), int64_t{0});
    val += std::accumulate(t.val_mask.begin(), t.val_mask.end(), int64_t{0});
    test += std::accumulate(t.test_mask.begin(), t.test_mask.end(), int64_t{0});
  }
  EXPECT_NEAR(train, 2000, 200);
  EXPECT_NEAR(val, 2000, 200);
  EXPECT_NEAR(test, 4000, 250);
}

TEST(Generator, InverseAndSelfLoopCanBeDisabled) {
  GenerateOptions o = Small();
  o.add_inverse = false;
  o.add_self_loop = false;
  Result<HeteroGraph> g = GenerateGraph(o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->relations.size(), 6u);
  o.node_types = 1;
  o.add_self_loop = true;
  g = GenerateGraph(o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->relations.back().name, "self_loop");
}

TEST(Generator, BadOptionsAreUsageErrors) {
  GenerateOptions o;
  o.train_fraction = 0.7;
  o.test_fraction = 0.5;
  Result<HeteroGraph> g = GenerateGraph(o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kUsage);
  EXPECT_THAT(g.status().message(), HasSubstr("exceeds 1"));
  o = GenerateOptions();
  o.nodes = 2;
  EXPECT_EQ(GenerateGraph(o).status().code(), Code::kUsage);
  o = GenerateOptions();
  o.planted_fraction = 1.5;
  EXPECT_EQ(GenerateGraph(o).status().code(), Code::kUsage);
}

// Per base relation, the class-pair counts must show a permutation followed by a fraction p + (1-p)/C
// of the edges (planted edges, plus random ones that land in the right class by chance).
TEST(Generator, EdgesFollowAPerRelationClassPermutation) {
  GenerateOptions o;
  o.nodes = 30000;
  o.planted_fraction = 0.8;
  Result<HeteroGraph> g = GenerateGraph(o);
  ASSERT_TRUE(g.ok());
  const int c = o.classes;
  const double expected = o.planted_fraction + (1 - o.planted_fraction) / c;
  std::set<std::vector<int>> perms;
  for (int r = 0; r < o.relations; ++r) {
    const Relation& rel = g->relations[r];
    const auto& src_labels = g->node_types[rel.src_type].labels;
    const auto& dst_labels = g->node_types[rel.dst_type].labels;
    std::vector<std::vector<double>> m(c, std::vector<double>(c, 0));
    for (size_t e = 0; e < rel.src.size(); ++e) m[src_labels[rel.src[e]]][dst_labels[rel.dst[e]]] += 1;
    std::vector<int> perm(c);
    for (int k = 0; k < c; ++k) {
      const double row = std::accumulate(m[k].begin(), m[k].end(), 0.0);
      perm[k] = static_cast<int>(std::max_element(m[k].begin(), m[k].end()) - m[k].begin());
      EXPECT_NEAR(m[k][perm[k]] / row, expected, 0.03) << "relation " << r << " class " << k;
    }
    EXPECT_EQ(std::set<int>(perm.begin(), perm.end()).size(), static_cast<size_t>(c)) << "not a permutation";
    std::vector<int> identity(c);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_NE(perm, identity) << "relation " << r;
    perms.insert(perm);
  }
  EXPECT_GT(perms.size(), 1u) << "all relations share one permutation";
}

// Nearest-class-mean classifiers on the test split, with class means, the noise variance and each
// relation's class permutation estimated from the training split only.
struct Accuracies {
  double own = 0;    // a node's own features
  double mixed = 0;  // own + the mean of all neighbours, relation-blind
  double typed = 0;  // own + per-relation neighbour means matched through the estimated permutation
};

Accuracies Measure(const HeteroGraph& g) {
  const int64_t c = g.num_classes;
  const int64_t d = g.node_types[0].feature_dim;
  auto feat = [&](int t, int64_t i) { return g.node_types[t].features.data() + i * d; };
  // Class means and pooled noise variance from the training split.
  std::vector<std::vector<double>> mean(c, std::vector<double>(d, 0));
  std::vector<double> n(c, 0);
  for (size_t t = 0; t < g.node_types.size(); ++t) {
    const NodeType& nt = g.node_types[t];
    for (int64_t i = 0; i < nt.count; ++i) {
      if (!nt.train_mask[i]) continue;
      for (int64_t k = 0; k < d; ++k) mean[nt.labels[i]][k] += feat(t, i)[k];
      n[nt.labels[i]] += 1;
    }
  }
  for (int64_t k = 0; k < c; ++k)
    for (auto& x : mean[k]) x /= n[k];
  // Each base relation's permutation and purity, estimated from edges between training nodes.
  struct Rel {
    std::vector<int64_t> perm;
    double purity;
  };
  std::vector<Rel> rels;
  for (const auto& rel : g.relations) {
    if (rel.kind != RelationKind::kBase) continue;
    std::vector<std::vector<double>> m(c, std::vector<double>(c, 0));
    const NodeType& s = g.node_types[rel.src_type];
    const NodeType& t = g.node_types[rel.dst_type];
    for (size_t e = 0; e < rel.src.size(); ++e) {
      if (s.train_mask[rel.src[e]] && t.train_mask[rel.dst[e]]) m[s.labels[rel.src[e]]][t.labels[rel.dst[e]]] += 1;
    }
    Rel r{std::vector<int64_t>(c), 0};
    double hit = 0, all = 0;
    for (int64_t k = 0; k < c; ++k) {
      r.perm[k] = std::max_element(m[k].begin(), m[k].end()) - m[k].begin();
      hit += m[k][r.perm[k]];
      all += std::accumulate(m[k].begin(), m[k].end(), 0.0);
    }
    r.purity = hit / all;
    rels.push_back(r);
  }
  std::vector<double> grand(d, 0);
  for (int64_t k = 0; k < c; ++k)
    for (int64_t j = 0; j < d; ++j) grand[j] += mean[k][j] / c;
  auto dist2 = [&](const float* x, const std::vector<double>& mu) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += (x[j] - mu[j]) * (x[j] - mu[j]);
    return s;
  };
  // Expected feature of a neighbour reached through a relation with purity p whose class is `k`.
  auto blend = [&](int64_t k, double p) {
    std::vector<double> v(d);
    for (int64_t j = 0; j < d; ++j) v[j] = p * mean[k][j] + (1 - p) * grand[j];
    return v;
  };
  // Scores accumulate squared distances: own features plus one term per neighbour.
  std::vector<std::vector<std::vector<double>>> own(g.node_types.size()), typed(g.node_types.size()),
      mixed_sum(g.node_types.size());
  std::vector<std::vector<double>> mixed_n(g.node_types.size());
  for (size_t t = 0; t < g.node_types.size(); ++t) {
    const auto cnt = static_cast<size_t>(g.node_types[t].count);
    own[t].assign(cnt, std::vector<double>(c, 0));
    for (size_t i = 0; i < cnt; ++i) {
      for (int64_t k = 0; k < c; ++k) own[t][i][k] = dist2(feat(static_cast<int>(t), static_cast<int64_t>(i)), mean[k]);
    }
    typed[t] = own[t];
    mixed_sum[t].assign(cnt, std::vector<double>(d, 0));
    mixed_n[t].assign(cnt, 0);
  }
  size_t ri = 0;
  for (const auto& rel : g.relations) {
    if (rel.kind != RelationKind::kBase) continue;
    const Rel& r = rels[ri++];
    std::vector<int64_t> inv(c);
    for (int64_t k = 0; k < c; ++k) inv[r.perm[k]] = k;
    std::vector<std::vector<double>> fwd(c), back(c);
    for (int64_t k = 0; k < c; ++k) fwd[k] = blend(r.perm[k], r.purity), back[k] = blend(inv[k], r.purity);
    for (size_t e = 0; e < rel.src.size(); ++e) {
      const int64_t u = rel.src[e], v = rel.dst[e];
      for (int64_t k = 0; k < c; ++k) {
        typed[rel.src_type][u][k] += dist2(feat(rel.dst_type, v), fwd[k]);   // u of class k sees pi(k)
        typed[rel.dst_type][v][k] += dist2(feat(rel.src_type, u), back[k]);  // v of class k sees pi^-1(k)
      }
      for (int64_t j = 0; j < d; ++j) {
        mixed_sum[rel.src_type][u][j] += feat(rel.dst_type, v)[j];
        mixed_sum[rel.dst_type][v][j] += feat(rel.src_type, u)[j];
      }
      mixed_n[rel.src_type][u] += 1;
      mixed_n[rel.dst_type][v] += 1;
    }
  }
  // Relation-blind: own features averaged with the neighbour mean, with class means of that average
  // fitted on the training split (the best a relation-blind linear mean aggregator can do per class).
  std::vector<std::vector<std::vector<float>>> agg(g.node_types.size());
  std::vector<std::vector<double>> agg_mean(c, std::vector<double>(2 * d, 0));
  std::vector<double> agg_n(c, 0);
  for (size_t t = 0; t < g.node_types.size(); ++t) {
    const NodeType& nt = g.node_types[t];
    agg[t].resize(nt.count);
    for (int64_t i = 0; i < nt.count; ++i) {
      auto& a = agg[t][i];
      a.resize(2 * d);
      for (int64_t j = 0; j < d; ++j) {
        a[j] = feat(static_cast<int>(t), i)[j];
        a[d + j] = mixed_n[t][i] > 0 ? static_cast<float>(mixed_sum[t][i][j] / mixed_n[t][i]) : 0.f;
      }
      if (!nt.train_mask[i]) continue;
      for (int64_t j = 0; j < 2 * d; ++j) agg_mean[nt.labels[i]][j] += a[j];
      agg_n[nt.labels[i]] += 1;
    }
  }
  for (int64_t k = 0; k < c; ++k)
    for (auto& x : agg_mean[k]) x /= agg_n[k];
  Accuracies acc;
  double total = 0;
  for (size_t t = 0; t < g.node_types.size(); ++t) {
    const NodeType& nt = g.node_types[t];
    for (int64_t i = 0; i < nt.count; ++i) {
      if (!nt.test_mask[i]) continue;
      auto argmin = [](const std::vector<double>& s) { return std::min_element(s.begin(), s.end()) - s.begin(); };
      std::vector<double> ms(c);
      for (int64_t k = 0; k < c; ++k) {
        double s = 0;
        for (int64_t j = 0; j < 2 * d; ++j) s += (agg[t][i][j] - agg_mean[k][j]) * (agg[t][i][j] - agg_mean[k][j]);
        ms[k] = s;
      }
      acc.own += argmin(own[t][i]) == nt.labels[i];
      acc.typed += argmin(typed[t][i]) == nt.labels[i];
      acc.mixed += argmin(ms) == nt.labels[i];
      total += 1;
    }
  }
  acc.own /= total;
  acc.typed /= total;
  acc.mixed /= total;
  return acc;
}

TEST(Generator, LabelsNeedRelationTypedNeighbourhoods) {
  Result<HeteroGraph> g = GenerateGraph(GenerateOptions{});
  ASSERT_TRUE(g.ok());
  const Accuracies acc = Measure(*g);
  std::printf("accuracy: own features %.3f, relation-blind neighbours %.3f, relation-typed neighbours %.3f\n", acc.own,
              acc.mixed, acc.typed);
  // With the defaults this prints about 0.47, 0.48 and 0.82 (chance is 0.25).
  EXPECT_LT(acc.own, 0.55);                // own features alone: poor
  EXPECT_GT(acc.typed, 0.78);              // one hop of relation-typed evidence: good
  EXPECT_GT(acc.typed, acc.mixed + 0.20);  // and far better than mixing relations
}

// How fast is measured by bench/run.sh graph (case generate_1m, the same options), not here.
TEST(Generator, ScalesToAMillionNodes) {
  GenerateOptions o;
  o.nodes = 1000000;
  o.avg_degree = 20;  // 10M base edges
  o.feature_dim = 16;
  Result<HeteroGraph> g = GenerateGraph(o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_nodes(), 1000000);
  EXPECT_GT(g->num_edges(), 2 * 9900000);
}

}  // namespace
}  // namespace tessel::storage
