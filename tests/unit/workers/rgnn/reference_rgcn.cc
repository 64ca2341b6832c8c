// The RGCN reference (MODELS.md "RGCN"): h_i = sum_r sum_{j in N_r(i)} 1/|N_r(i)| X_j W_r, no bias, no root
// weight, ReLU between layers; W_r full, from bases, or block-diagonal.
#include <cmath>
#include <string>
#include <vector>

#include "tests/unit/workers/rgnn/reference_internal.h"

namespace tessel::testing::internal {
namespace {

enum class Decomposition { kFull, kBases, kBlocks };

// Which form layer l (K -> D) takes: bases apply to every layer, blocks only where B divides K and D.
Decomposition LayerDecomposition(const RefConfig& c, int64_t k, int64_t d) {
  if (c.num_bases > 0) return Decomposition::kBases;
  if (c.num_blocks > 0 && k % c.num_blocks == 0 && d % c.num_blocks == 0) return Decomposition::kBlocks;
  return Decomposition::kFull;
}

// W_r (K x D) of layer l for every relation r.
std::vector<Mat> RelationWeights(const RefGraph& g, const RefConfig& c, const RefParams& p, int32_t l, int64_t k,
                                 int64_t d) {
  const int32_t num_r = g.num_relations;
  std::vector<Mat> w(static_cast<size_t>(num_r), Mat(k, d));
  switch (LayerDecomposition(c, k, d)) {
    case Decomposition::kFull: {
      const RefTensor& weight = Param(p, LayerName(l, "weight"));
      for (int32_t r = 0; r < num_r; ++r) w[static_cast<size_t>(r)] = Slice(weight, r);
      break;
    }
    case Decomposition::kBases: {
      const int32_t num_b = c.num_bases;
      const RefTensor& bases = Param(p, LayerName(l, "bases"));
      const RefTensor& coef = Param(p, LayerName(l, "coef"));
      for (int32_t r = 0; r < num_r; ++r) {
        for (int32_t b = 0; b < num_b; ++b) {
          const double a = coef.data[static_cast<size_t>(r * num_b + b)];
          const Mat basis = Slice(bases, b);
          for (size_t i = 0; i < basis.a.size(); ++i) w[static_cast<size_t>(r)].a[i] += a * basis.a[i];
        }
      }
      break;
    }
    case Decomposition::kBlocks: {
      const int32_t num_b = c.num_blocks;
      const int64_t kb = k / num_b, db = d / num_b;
      const RefTensor& blocks = Param(p, LayerName(l, "blocks"));
      for (int32_t r = 0; r < num_r; ++r) {
        for (int32_t b = 0; b < num_b; ++b) {
          const Mat block = Slice(blocks, r * num_b + b);
          for (int64_t x = 0; x < kb; ++x) {
            for (int64_t y = 0; y < db; ++y) w[static_cast<size_t>(r)](b * kb + x, b * db + y) = block(x, y);
          }
        }
      }
      break;
    }
  }
  return w;
}

// Adds d loss / d (the parameters of layer l), given dW_r for every r.
void AccumulateWeightGrads(const RefGraph& g, const RefConfig& c, const RefParams& p, int32_t l, int64_t k, int64_t d,
                           const std::vector<Mat>& dw, RefParams* grads) {
  const int32_t num_r = g.num_relations;
  switch (LayerDecomposition(c, k, d)) {
    case Decomposition::kFull: {
      RefTensor& dweight = Param(grads, LayerName(l, "weight"));
      for (int32_t r = 0; r < num_r; ++r) AddToSlice(dw[static_cast<size_t>(r)], r, &dweight);
      break;
    }
    case Decomposition::kBases: {
      // W_r = sum_b coef[r,b] bases[b]: dbases[b] = sum_r coef[r,b] dW_r, dcoef[r,b] = <bases[b], dW_r>.
      const int32_t num_b = c.num_bases;
      const RefTensor& bases = Param(p, LayerName(l, "bases"));
      const RefTensor& coef = Param(p, LayerName(l, "coef"));
      RefTensor& dbases = Param(grads, LayerName(l, "bases"));
      RefTensor& dcoef = Param(grads, LayerName(l, "coef"));
      for (int32_t r = 0; r < num_r; ++r) {
        const Mat& dwr = dw[static_cast<size_t>(r)];
        for (int32_t b = 0; b < num_b; ++b) {
          const double a = coef.data[static_cast<size_t>(r * num_b + b)];
          const Mat basis = Slice(bases, b);
          Mat scaled(k, d);
          double dot = 0;
          for (size_t i = 0; i < dwr.a.size(); ++i) {
            scaled.a[i] = a * dwr.a[i];
            dot += basis.a[i] * dwr.a[i];
          }
          AddToSlice(scaled, b, &dbases);
          dcoef.data[static_cast<size_t>(r * num_b + b)] += dot;
        }
      }
      break;
    }
    case Decomposition::kBlocks: {
      // Only the diagonal blocks are parameters; the off-diagonal entries of dW_r are dropped.
      const int32_t num_b = c.num_blocks;
      const int64_t kb = k / num_b, db = d / num_b;
      RefTensor& dblocks = Param(grads, LayerName(l, "blocks"));
      for (int32_t r = 0; r < num_r; ++r) {
        for (int32_t b = 0; b < num_b; ++b) {
          Mat block(kb, db);
          for (int64_t x = 0; x < kb; ++x) {
            for (int64_t y = 0; y < db; ++y) block(x, y) = dw[static_cast<size_t>(r)](b * kb + x, b * db + y);
          }
          AddToSlice(block, r * num_b + b, &dblocks);
        }
      }
      break;
    }
  }
}

}  // namespace

void AddRgcnShapes(const RefGraph& g, const RefConfig& c, RefParams* params) {
  const std::vector<int64_t> width = LayerWidths(g, c);
  const int64_t num_r = g.num_relations;
  bool any_blocks = false;
  for (int32_t l = 0; l < c.layers; ++l) {
    const int64_t k = width[static_cast<size_t>(l)], d = width[static_cast<size_t>(l) + 1];
    switch (LayerDecomposition(c, k, d)) {
      case Decomposition::kFull:
        (*params)[LayerName(l, "weight")] = Zeros({num_r, k, d});
        break;
      case Decomposition::kBases:
        (*params)[LayerName(l, "bases")] = Zeros({c.num_bases, k, d});
        (*params)[LayerName(l, "coef")] = Zeros({num_r, c.num_bases});
        break;
      case Decomposition::kBlocks:
        any_blocks = true;
        (*params)[LayerName(l, "blocks")] = Zeros({num_r, c.num_blocks, k / c.num_blocks, d / c.num_blocks});
        break;
    }
  }
  Require(c.num_blocks == 0 || any_blocks, "no layer's widths are divisible by num_blocks");
}

ModelResult RunRgcn(const RefGraph& g, const RefConfig& c, const RefParams& p, RefParams* grads) {
  const std::vector<int64_t> width = LayerWidths(g, c);
  const int64_t n = g.num_nodes;
  const int32_t num_r = g.num_relations;
  const size_t num_layers = static_cast<size_t>(c.layers);

  // |N_r(i)|, counting parallel edges.
  std::vector<std::vector<double>> in_count(static_cast<size_t>(num_r), std::vector<double>(static_cast<size_t>(n)));
  for (const RefEdge& e : g.edges) in_count[static_cast<size_t>(e.rel)][static_cast<size_t>(e.dst)] += 1.0;
  auto norm = [&](const RefEdge& e) { return 1.0 / in_count[static_cast<size_t>(e.rel)][static_cast<size_t>(e.dst)]; };

  std::vector<Mat> input(num_layers);  // X_l
  std::vector<Mat> pre(num_layers);    // h of layer l, before the ReLU
  std::vector<std::vector<Mat>> weights(num_layers);
  input[0] = InputMatrix(g);
  for (size_t l = 0; l < num_layers; ++l) {
    const int64_t k = width[l], d = width[l + 1];
    weights[l] = RelationWeights(g, c, p, static_cast<int32_t>(l), k, d);
    std::vector<Mat> y(static_cast<size_t>(num_r));  // Y_r = X_l W_r
    for (size_t r = 0; r < y.size(); ++r) y[r] = MatMul(input[l], weights[l][r]);
    pre[l] = Mat(n, d);
    for (const RefEdge& e : g.edges) {
      for (int64_t x = 0; x < d; ++x) pre[l](e.dst, x) += norm(e) * y[static_cast<size_t>(e.rel)](e.src, x);
    }
    if (l + 1 < num_layers) {
      input[l + 1] = pre[l];
      for (double& v : input[l + 1].a) v = v > 0 ? v : 0.0;
    }
  }

  ModelResult out;
  out.logits = pre.back();
  Mat dh;
  out.loss = CrossEntropy(g, out.logits, grads != nullptr ? &dh : nullptr);
  if (grads == nullptr) return out;

  for (size_t l = num_layers; l-- > 0;) {
    const int64_t k = width[l], d = width[l + 1];
    std::vector<Mat> dy(static_cast<size_t>(num_r), Mat(n, d));
    for (const RefEdge& e : g.edges) {
      for (int64_t x = 0; x < d; ++x) dy[static_cast<size_t>(e.rel)](e.src, x) += norm(e) * dh(e.dst, x);
    }
    std::vector<Mat> dw(static_cast<size_t>(num_r));
    for (int32_t r = 0; r < num_r; ++r) dw[static_cast<size_t>(r)] = MatMulTN(input[l], dy[static_cast<size_t>(r)]);
    AccumulateWeightGrads(g, c, p, static_cast<int32_t>(l), k, d, dw, grads);
    if (l == 0) break;
    Mat dx(n, k);
    for (int32_t r = 0; r < num_r; ++r) {
      AddInPlace(MatMulNT(dy[static_cast<size_t>(r)], weights[l][static_cast<size_t>(r)]), &dx);
    }
    for (size_t i = 0; i < dx.a.size(); ++i) dx.a[i] = pre[l - 1].a[i] > 0 ? dx.a[i] : 0.0;  // ReLU
    dh = dx;
  }
  return out;
}

}  // namespace tessel::testing::internal
