// Tests of the RGNN reference (reference_model.h), independent of Tessel's kernels: every analytic gradient
// against central finite differences of RefLoss, hand-computed RGCN, RGAT and HGT forwards that pin the
// semantics of MODELS.md, the parameter names and shapes, and Adam against its formula.
#include "tests/unit/workers/rgnn/reference_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::testing {
namespace {

// 8 nodes, 3 relations (2 = self-loops), 2 node types when types == 2. Node 7 has no incoming edge;
// 0 -> 1 is there in relations 0 and 1, and twice in relation 1. Node 3 is unlabelled, node 5 is not a
// train node. feature_dim == 0 means one-hot input.
RefGraph SmallGraph(int64_t feature_dim, int32_t classes, int32_t types) {
  RefGraph g;
  g.num_nodes = 8;
  g.num_types = types;
  for (int64_t i = 0; i < g.num_nodes; ++i) g.node_type.push_back(types == 2 ? static_cast<int32_t>(i % 2) : 0);
  g.num_relations = 3;
  g.edges = {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {3, 4, 0}, {4, 5, 0}, {5, 6, 0}, {6, 0, 0}, {7, 3, 0},
             {0, 2, 0}, {1, 0, 1}, {2, 1, 1}, {3, 2, 1}, {0, 1, 1}, {0, 1, 1}, {5, 4, 1}, {7, 6, 1}};
  for (int64_t i = 0; i < 7; ++i) g.edges.push_back({i, i, 2});
  g.feature_dim = feature_dim;
  uint32_t state = 12345;
  for (int64_t k = 0; k < g.num_nodes * feature_dim; ++k) {
    state = state * 1664525u + 1013904223u;
    g.features.push_back(static_cast<double>(state >> 8) / static_cast<double>(1u << 24) * 2.0 - 1.0);
  }
  g.num_classes = classes;
  for (int64_t i = 0; i < g.num_nodes; ++i) g.labels.push_back(i % classes);
  g.labels[3] = -1;
  g.train_mask.assign(static_cast<size_t>(g.num_nodes), 1);
  g.train_mask[5] = 0;
  return g;
}

// ---------------------------------------------------------------------------------------------------------
// 1. Analytic gradients against central finite differences.

struct GradCase {
  std::string name;
  RefConfig config;
  int64_t feature_dim;  // 0 = one-hot input (N = 8)
  int32_t classes;
  int32_t types;
  double param_scale;  // of RefRandomParams' (-0.5, 0.5)
};

std::vector<GradCase> GradCases() {
  struct Variant {
    std::string name;
    RefConfig config;
    int64_t feature_dim;
    int32_t classes;
    int32_t types;
    double param_scale;
    bool two_layers_only;
  };
  RefConfig rgcn;
  rgcn.model = RefModel::kRgcn;
  rgcn.hidden = 4;
  RefConfig bases = rgcn;
  bases.num_bases = 2;
  RefConfig blocks = rgcn;
  blocks.num_blocks = 2;
  RefConfig rgat;
  rgat.model = RefModel::kRgat;
  rgat.hidden = 4;
  rgat.heads = 2;
  RefConfig rgat_mean = rgat;
  rgat_mean.head_merge = RefHeadMerge::kMean;
  RefConfig hgt;
  hgt.model = RefModel::kHgt;
  hgt.hidden = 4;
  hgt.heads = 2;
  RefConfig hgt_wide = hgt;
  hgt_wide.hidden = 8;  // == N: K == D also for a one-hot first layer, which still has no skip (MODELS.md)
  RefConfig hgt_bias = hgt;
  hgt_bias.bias = true;
  // clang-format off
  const std::vector<Variant> variants = {
      {"RgcnFull", rgcn, 4, 3, 2, 2, false},
      {"RgcnBases", bases, 4, 3, 2, 2, false},
      {"RgcnBlocks", blocks, 4, 2, 2, 2, false},      // every layer block-diagonal
      {"RgcnBlocksMixed", blocks, 4, 3, 2, 2, true},  // layer 1 (4 -> 3) keeps a full weight
      {"RgatConcat", rgat, 4, 3, 2, 2, false},
      {"RgatMean", rgat_mean, 4, 3, 2, 2, false},
      {"HgtSkip", hgt, 4, 3, 2, 3, false},            // K == D on every layer
      {"HgtNoSkipFirst", hgt, 5, 3, 2, 3, false},     // K != D on layer 0
      {"HgtOneType", hgt, 5, 2, 1, 3, false},
      {"HgtWide", hgt_wide, 8, 3, 2, 2, false},
      {"HgtBias", hgt_bias, 4, 3, 2, 3, false},
  };
  // clang-format on
  std::vector<GradCase> cases;
  for (const Variant& v : variants) {
    for (int32_t layers : {1, 2}) {
      if (v.two_layers_only && layers == 1) continue;
      for (bool onehot : {false, true}) {
        GradCase c{v.name + (onehot ? "OneHot" : "Features") + std::to_string(layers) + "Layers",
                   v.config,
                   onehot ? 0 : v.feature_dim,
                   v.classes,
                   v.types,
                   v.param_scale};
        c.config.layers = layers;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

class ReferenceGradient : public ::testing::TestWithParam<GradCase> {};

TEST_P(ReferenceGradient, MatchesCentralFiniteDifferences) {
  const GradCase& tc = GetParam();
  const RefGraph g = SmallGraph(tc.feature_dim, tc.classes, tc.types);
  // Scaled up from (-0.5, 0.5): with the small values a two-layer HGT's upper attention gradients
  // shrink to ~1e-10, below what the finite differences resolve.
  RefParams params = RefRandomParams(g, tc.config, 7);
  for (auto& [name, t] : params) {
    for (double& x : t.data) x *= tc.param_scale;
  }
  const RefStep step = RefTrainStep(g, tc.config, params, {}, {}, 1);
  EXPECT_DOUBLE_EQ(step.loss, RefLoss(g, tc.config, params));
  EXPECT_EQ(step.count, 6);  // node 3 is unlabelled, node 5 not a train node
  ASSERT_EQ(step.grads.size(), params.size());

  // Central differences err by ~h^2 |f'''| + eps |loss| / h: the absolute floor covers the second term.
  const double h = 1e-6;
  const double floor = 1e-9 * std::max(1.0, std::abs(step.loss));
  for (const auto& [name, tensor] : params) {
    const RefTensor& grad = step.grads.at(name);
    ASSERT_EQ(grad.shape, tensor.shape) << name;
    double largest = 0;
    for (size_t i = 0; i < tensor.data.size(); ++i) {
      RefParams plus = params, minus = params;
      plus[name].data[i] += h;
      minus[name].data[i] -= h;
      const double fd = (RefLoss(g, tc.config, plus) - RefLoss(g, tc.config, minus)) / (2 * h);
      const double analytic = grad.data[i];
      EXPECT_NEAR(analytic, fd, 1e-6 * std::max(std::abs(analytic), std::abs(fd)) + floor) << name << "[" << i << "]";
      largest = std::max(largest, std::abs(analytic));
    }
    // Every parameter must matter, or the check above proves nothing about it.
    EXPECT_GT(largest, 1e-4) << name << " has a (nearly) zero gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, ReferenceGradient, ::testing::ValuesIn(GradCases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------------------
// 2. RGCN by hand: mean over N_r(i), no root weight, no self term, first-maximum argmax.

TEST(ReferenceRgcn, OneLayerByHand) {
  RefGraph g;
  g.num_nodes = 3;
  g.num_relations = 2;
  g.edges = {{0, 2, 0}, {1, 2, 0}, {1, 2, 1}, {2, 0, 1}};  // node 1 has no incoming edge
  g.feature_dim = 2;
  g.features = {1, 0, /**/ 0, 1, /**/ 1, 1};
  g.num_classes = 2;
  g.labels = {1, 1, 0};
  g.train_mask = {1, 1, 1};
  RefConfig c;
  c.model = RefModel::kRgcn;
  c.layers = 1;
  RefParams p = RefParamShapes(g, c);
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(p["layer0.weight"].shape, (std::vector<int64_t>{2, 2, 2}));
  // W_0 = [[1, 2], [3, 4]], W_1 = [[0, 1], [2, 0]].
  p["layer0.weight"].data = {1, 2, 3, 4, /**/ 0, 1, 2, 0};

  // h_0 = X_2 W_1 = [1, 1] W_1 = [2, 1]
  // h_1 = 0 (no incoming edge, no root weight)
  // h_2 = 1/2 (X_0 W_0 + X_1 W_0) + X_1 W_1 = 1/2 ([1, 2] + [3, 4]) + [2, 0] = [4, 3]
  const std::vector<double> logits = RefForward(g, c, p);
  const std::vector<double> expected = {2, 1, 0, 0, 4, 3};
  ASSERT_EQ(logits.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(logits[k], expected[k], 1e-15) << k;

  // CE(label 1 | [2, 1]) = log(1 + e), CE(1 | [0, 0]) = log 2, CE(0 | [4, 3]) = log(1 + 1/e).
  const double loss = (std::log(1 + std::exp(1.0)) + std::log(2.0) + std::log(1 + std::exp(-1.0))) / 3;
  EXPECT_NEAR(RefLoss(g, c, p), loss, 1e-15);
  const RefStep step = RefTrainStep(g, c, p, {}, {}, 1);
  EXPECT_NEAR(step.loss, loss, 1e-15);
  EXPECT_EQ(step.count, 3);
  EXPECT_EQ(step.correct, 1);  // node 2 only: node 1's tie [0, 0] predicts class 0

  // Unlabelled and non-train nodes drop out of the mean.
  g.labels[1] = -1;
  g.train_mask[0] = 0;
  EXPECT_NEAR(RefLoss(g, c, p), std::log(1 + std::exp(-1.0)), 1e-15);
}

// ---------------------------------------------------------------------------------------------------------
// 3. RGAT by hand: one softmax over the edges of both relations, LeakyReLU slope 0.2, mean of the heads.

RefGraph TwoEdgesIntoNodeTwo() {
  RefGraph g;
  g.num_nodes = 3;
  g.num_relations = 2;
  g.edges = {{0, 2, 0}, {1, 2, 1}};  // nodes 0 and 1 have no incoming edge
  g.feature_dim = 2;
  g.features = {1, 0, /**/ 0, 2, /**/ 1, 1};
  g.num_classes = 2;
  g.labels = {0, 1, 0};
  return g;
}

// The LeakyReLU slope as the RGAT kernels get it (a float parameter: 0.2f) and so as the reference uses it.
constexpr double kSlope = static_cast<double>(0.2f);

TEST(ReferenceRgat, SoftmaxAcrossRelationsWithLeakyRelu) {
  const RefGraph g = TwoEdgesIntoNodeTwo();
  RefConfig c;
  c.model = RefModel::kRgat;
  c.layers = 1;
  c.heads = 1;
  RefParams p = RefParamShapes(g, c);
  ASSERT_EQ(p["layer0.weight"].shape, (std::vector<int64_t>{2, 2, 2}));
  ASSERT_EQ(p["layer0.att_src"].shape, (std::vector<int64_t>{2, 1, 2}));
  p["layer0.weight"].data = {1, 0, 0, 1, /**/ 1, 0, 0, 1};  // W_0 = W_1 = I, so z_{v,r} = X_v
  p["layer0.att_src"].data = {1, 0, /**/ 0, -1};
  p["layer0.att_dst"].data = {0, 0, /**/ 0.5, 0};

  // Edge 0 -> 2 (r 0): raw = [1, 0].[1, 0] + [0, 0].[1, 1] = 1, score 1.
  // Edge 1 -> 2 (r 1): raw = [0, -1].[0, 2] + [0.5, 0].[1, 1] = -1.5, score 0.2f * -1.5 = -0.3 (+ 4e-9).
  const double a0 = std::exp(1.0) / (std::exp(1.0) + std::exp(kSlope * -1.5));
  const double a1 = std::exp(kSlope * -1.5) / (std::exp(1.0) + std::exp(kSlope * -1.5));
  // out_2 = a0 [1, 0] + a1 [0, 2]; a per-relation softmax would give [1, 2].
  const std::vector<double> expected = {0, 0, 0, 0, a0, 2 * a1};
  const std::vector<double> logits = RefForward(g, c, p);
  ASSERT_EQ(logits.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(logits[k], expected[k], 1e-15) << k;
}

TEST(ReferenceRgat, LastLayerAveragesHeads) {
  const RefGraph g = TwoEdgesIntoNodeTwo();
  RefConfig c;
  c.model = RefModel::kRgat;
  c.layers = 1;
  c.heads = 2;
  c.head_merge = RefHeadMerge::kConcat;  // the last layer averages all the same
  RefParams p = RefParamShapes(g, c);
  ASSERT_EQ(p["layer0.weight"].shape, (std::vector<int64_t>{2, 2, 4}));
  ASSERT_EQ(p["layer0.att_src"].shape, (std::vector<int64_t>{2, 2, 2}));
  // W_r = [I | 2I]: head 0 sees X_v, head 1 sees 2 X_v.
  p["layer0.weight"].data = {1, 0, 2, 0, 0, 1, 0, 2, /**/ 1, 0, 2, 0, 0, 1, 0, 2};
  // Head 0 as in the test above; head 1 has zero attention vectors, so both its scores are 0.
  p["layer0.att_src"].data = {1, 0, 0, 0, /**/ 0, -1, 0, 0};
  p["layer0.att_dst"].data = {0, 0, 0, 0, /**/ 0.5, 0, 0, 0};

  const double a0 = std::exp(1.0) / (std::exp(1.0) + std::exp(kSlope * -1.5));
  const double a1 = 1 - a0;
  // Head 0: [a0, 2 a1]. Head 1: 1/2 [2, 0] + 1/2 [0, 4] = [1, 2]. The mean of the two.
  const std::vector<double> expected = {0, 0, 0, 0, (a0 + 1) / 2, (2 * a1 + 2) / 2};
  const std::vector<double> logits = RefForward(g, c, p);
  ASSERT_EQ(logits.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(logits[k], expected[k], 1e-15) << k;
}

// ---------------------------------------------------------------------------------------------------------
// HGT by hand: the score (k rel_att) . q * prior / sqrt(d), exact GELU, the gated skip, the classifier.

TEST(ReferenceHgt, OneLayerByHand) {
  RefGraph g = TwoEdgesIntoNodeTwo();
  g.features = {1, -1, /**/ 2, 0, /**/ 1, 0.5};
  RefConfig c;
  c.model = RefModel::kHgt;
  c.layers = 1;
  c.hidden = 2;
  c.heads = 1;
  RefParams p = RefParamShapes(g, c);
  ASSERT_EQ(p["layer0.skip"].shape, (std::vector<int64_t>{1}));
  const std::vector<double> eye = {1, 0, 0, 1};
  for (const char* name : {"layer0.k", "layer0.q", "layer0.v", "layer0.out", "classifier.weight"}) {
    p[name].data = eye;
  }
  p["layer0.rel_att"].data = {1, 0, 0, 1, /**/ 0, 1, 1, 0};  // relation 1 swaps the two entries
  p["layer0.rel_msg"].data = {1, 0, 0, 1, /**/ 1, 0, 0, 1};
  p["layer0.rel_prior"].data = {1, 2};
  p["layer0.skip"].data = {0.3};

  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  const double beta = 1 / (1 + std::exp(-0.3));
  // Edge 0 -> 2 (r 0): k_0 rel_att_0 = [1, -1], q_2 = [1, 0.5], dot 0.5, score 0.5 * 1 / sqrt 2.
  // Edge 1 -> 2 (r 1): k_1 rel_att_1 = [0, 2], dot 1, score 1 * 2 / sqrt 2.
  const double s0 = 0.5 / std::sqrt(2.0), s1 = 2 / std::sqrt(2.0);
  const double a0 = std::exp(s0) / (std::exp(s0) + std::exp(s1)), a1 = 1 - a0;
  const double agg[2] = {a0 * 1 + a1 * 2, a0 * -1 + a1 * 0};
  // Nodes 0 and 1 have no incoming edge: agg = 0, GELU(0) = 0, h = (1 - beta) X.
  const std::vector<double> expected = {(1 - beta) * 1,
                                        (1 - beta) * -1,
                                        (1 - beta) * 2,
                                        0,
                                        beta * gelu(agg[0]) + (1 - beta) * 1,
                                        beta * gelu(agg[1]) + (1 - beta) * 0.5};
  const std::vector<double> logits = RefForward(g, c, p);
  ASSERT_EQ(logits.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(logits[k], expected[k], 1e-15) << k;
}

// ---------------------------------------------------------------------------------------------------------
// Names and shapes, as MODELS.md gives them.

using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes ShapesOf(const RefParams& params) {
  Shapes s;
  for (const auto& [name, t] : params) {
    s[name] = t.shape;
    int64_t size = 1;
    for (int64_t d : t.shape) size *= d;
    EXPECT_EQ(static_cast<int64_t>(t.data.size()), size) << name;
  }
  return s;
}

TEST(ReferenceShapes, RgcnDecompositions) {
  const RefGraph g = SmallGraph(4, 3, 1);
  RefConfig c;
  c.model = RefModel::kRgcn;
  c.hidden = 4;
  EXPECT_EQ(ShapesOf(RefParamShapes(g, c)), (Shapes{{"layer0.weight", {3, 4, 4}}, {"layer1.weight", {3, 4, 3}}}));
  c.num_bases = 2;
  EXPECT_EQ(
      ShapesOf(RefParamShapes(g, c)),
      (Shapes{
          {"layer0.bases", {2, 4, 4}}, {"layer0.coef", {3, 2}}, {"layer1.bases", {2, 4, 3}}, {"layer1.coef", {3, 2}}}));
  c.num_bases = 0;
  c.num_blocks = 2;  // 4 -> 4 qualifies, 4 -> 3 does not
  EXPECT_EQ(ShapesOf(RefParamShapes(g, c)), (Shapes{{"layer0.blocks", {3, 2, 2, 2}}, {"layer1.weight", {3, 4, 3}}}));
  c.layers = 1;  // 4 -> 3 only: no layer qualifies
  EXPECT_THROW(RefParamShapes(g, c), std::invalid_argument);
  c.num_blocks = 0;
  EXPECT_EQ(ShapesOf(RefParamShapes(SmallGraph(0, 3, 1), c)), (Shapes{{"layer0.weight", {3, 8, 3}}}));  // one-hot
}

TEST(ReferenceShapes, RgatWidths) {
  const RefGraph g = SmallGraph(5, 3, 1);
  RefConfig c;
  c.model = RefModel::kRgat;
  c.hidden = 4;
  c.heads = 2;
  EXPECT_EQ(ShapesOf(RefParamShapes(g, c)), (Shapes{{"layer0.weight", {3, 5, 4}},
                                                    {"layer0.att_src", {3, 2, 2}},
                                                    {"layer0.att_dst", {3, 2, 2}},
                                                    {"layer1.weight", {3, 4, 6}},
                                                    {"layer1.att_src", {3, 2, 3}},
                                                    {"layer1.att_dst", {3, 2, 3}}}));
  c.head_merge = RefHeadMerge::kMean;
  EXPECT_EQ(ShapesOf(RefParamShapes(g, c)), (Shapes{{"layer0.weight", {3, 5, 8}},
                                                    {"layer0.att_src", {3, 2, 4}},
                                                    {"layer0.att_dst", {3, 2, 4}},
                                                    {"layer1.weight", {3, 4, 6}},
                                                    {"layer1.att_src", {3, 2, 3}},
                                                    {"layer1.att_dst", {3, 2, 3}}}));
  c.head_merge = RefHeadMerge::kConcat;
  c.hidden = 5;  // not divisible by 2 heads
  EXPECT_THROW(RefParamShapes(g, c), std::invalid_argument);
}

TEST(ReferenceShapes, HgtSkipOnlyWhenWidthsMatch) {
  const RefGraph g = SmallGraph(5, 3, 2);
  RefConfig c;
  c.model = RefModel::kHgt;
  c.hidden = 4;
  c.heads = 2;
  Shapes expected;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    const int64_t k = l == 0 ? 5 : 4;
    expected[p + "k"] = {2, k, 4};
    expected[p + "q"] = {2, k, 4};
    expected[p + "v"] = {2, k, 4};
    expected[p + "out"] = {2, 4, 4};
    expected[p + "rel_att"] = {3, 2, 2, 2};
    expected[p + "rel_msg"] = {3, 2, 2, 2};
    expected[p + "rel_prior"] = {3, 2};
  }
  expected["layer1.skip"] = {2};  // layer 0 is 5 -> 4: no skip
  expected["classifier.weight"] = {4, 3};
  EXPECT_EQ(ShapesOf(RefParamShapes(g, c)), expected);
  // With biases: one row per node type on K, Q, V and out (PyG's kqv_lin and out_lin), none elsewhere.
  c.bias = true;
  for (int l = 0; l < 2; ++l) {
    for (const char* b : {"k_bias", "q_bias", "v_bias", "out_bias"})
      expected["layer" + std::to_string(l) + "." + b] = {2, 4};
  }
  EXPECT_EQ(ShapesOf(RefParamShapes(g, c)), expected);
}

// ---------------------------------------------------------------------------------------------------------
// 4. Adam, with coupled L2 on layer 0 only.

TEST(ReferenceAdam, StepMatchesTorchFormula) {
  const double lr = 0.05, l2 = 0.1;
  const int64_t t = 3;
  RefParams params = {
      {"layer0.weight", {{2}, {1.0, -2.0}}}, {"layer1.weight", {{1}, {0.5}}}, {"classifier.weight", {{1}, {3.0}}}};
  const RefParams grads = {
      {"layer0.weight", {{2}, {0.1, -0.3}}}, {"layer1.weight", {{1}, {0.2}}}, {"classifier.weight", {{1}, {-0.4}}}};
  RefParams m = {
      {"layer0.weight", {{2}, {0.01, 0.02}}}, {"layer1.weight", {{1}, {-0.03}}}, {"classifier.weight", {{1}, {0.04}}}};
  RefParams v = {{"layer0.weight", {{2}, {0.001, 0.002}}},
                 {"layer1.weight", {{1}, {0.003}}},
                 {"classifier.weight", {{1}, {0.004}}}};
  const RefParams p0 = params, m0 = m, v0 = v;
  RefAdamStep(grads, t, lr, l2, &params, &m, &v);
  for (const auto& [name, g] : grads) {
    // The penalty l2 * sum(w^2) on layer 0: its gradient 2 * l2 * w.
    const double decay = name == "layer0.weight" ? 2 * l2 : 0.0;
    for (size_t i = 0; i < g.data.size(); ++i) {
      const double p = p0.at(name).data[i];
      const double gi = g.data[i] + decay * p;
      const double mi = 0.9 * m0.at(name).data[i] + 0.1 * gi;
      const double vi = 0.999 * v0.at(name).data[i] + 0.001 * gi * gi;
      const double step_size = lr / (1 - std::pow(0.9, 3));
      const double denom = std::sqrt(vi) / std::sqrt(1 - std::pow(0.999, 3)) + 1e-8;
      EXPECT_NEAR(m.at(name).data[i], mi, 1e-15) << name;
      EXPECT_NEAR(v.at(name).data[i], vi, 1e-15) << name;
      EXPECT_NEAR(params.at(name).data[i], p - step_size * mi / denom, 1e-14) << name;
    }
  }
}

TEST(ReferenceAdam, FirstStepMovesByLrAndDecaysLayerZeroOnly) {
  // On step 1 from zero moments, Adam moves every entry by lr * g / (|g| + eps): lr against the sign.
  RefParams params = {{"layer0.weight", {{3}, {1.0, 1.0, -1.0}}},
                      {"layer1.weight", {{2}, {1.0, 1.0}}},
                      {"classifier.weight", {{1}, {1.0}}}};
  const RefParams grads = {{"layer0.weight", {{3}, {0.0, -0.5, 0.0}}},
                           {"layer1.weight", {{2}, {0.0, 0.25}}},
                           {"classifier.weight", {{1}, {0.0}}}};
  RefParams m, v;  // empty: zeros
  RefAdamStep(grads, 1, 0.01, 5e-4, &params, &m, &v);
  // Layer 0: g = 0 still decays (g' = 2 * l2 * p); layers above do not move without a gradient.
  EXPECT_NEAR(params["layer0.weight"].data[0], 1.0 - 0.01, 1e-6);
  EXPECT_NEAR(params["layer0.weight"].data[1], 1.0 + 0.01, 1e-6);
  EXPECT_NEAR(params["layer0.weight"].data[2], -1.0 + 0.01, 1e-6);
  EXPECT_EQ(params["layer1.weight"].data[0], 1.0);
  EXPECT_NEAR(params["layer1.weight"].data[1], 1.0 - 0.01, 1e-6);
  EXPECT_EQ(params["classifier.weight"].data[0], 1.0);
}

TEST(ReferenceAdam, TrainStepAppliesAdamToTheLossGradient) {
  const RefGraph g = SmallGraph(4, 3, 2);
  RefConfig c;
  c.model = RefModel::kHgt;
  c.hidden = 4;
  c.heads = 2;
  c.lr = 0.02;
  c.l2 = 0.01;
  const RefParams p = RefRandomParams(g, c, 3);
  const RefStep first = RefTrainStep(g, c, p, {}, {}, 1);
  RefParams expect_p = p, expect_m, expect_v;
  RefAdamStep(first.grads, 1, c.lr, c.l2, &expect_p, &expect_m, &expect_v);
  for (const auto& [name, t] : p) {
    EXPECT_EQ(first.params.at(name).data, expect_p.at(name).data) << name;
    EXPECT_EQ(first.m.at(name).data, expect_m.at(name).data) << name;
    EXPECT_EQ(first.v.at(name).data, expect_v.at(name).data) << name;
  }
  // The second epoch starts from the first's state, and the step lowers the loss.
  const RefStep second = RefTrainStep(g, c, first.params, first.m, first.v, 2);
  EXPECT_DOUBLE_EQ(second.loss, RefLoss(g, c, first.params));
  EXPECT_LT(second.loss, first.loss);
}

}  // namespace
}  // namespace tessel::testing
