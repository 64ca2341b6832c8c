// The RGAT reference (MODELS.md "RGAT"): per-relation projections and attention vectors, LeakyReLU(0.2)
// scores, one softmax per head over ALL edges into a node (across relations), heads concatenated or
// averaged (the last layer always averages, with D' = C), no bias, ReLU between layers.
#include <cmath>
#include <string>
#include <vector>

#include "tests/unit/workers/rgnn/reference_internal.h"

namespace tessel::testing::internal {
namespace {

// The slope as the kernels get it: rgnn.rgat.*'s negative_slope is a float (<tessel/ops/rgnn.h>), so Tessel
// computes LeakyReLU(0.2f), 3e-9 above 0.2. The float executor cannot tell; the fp64 one (1e-10) can.
constexpr double kNegativeSlope = static_cast<double>(0.2f);

struct LayerShape {
  int64_t in = 0;        // K
  int64_t head_dim = 0;  // D'
  int64_t out = 0;       // Hh * D' (concat) or D' (mean)
  bool concat = false;
};

LayerShape RgatLayerShape(const RefGraph& g, const RefConfig& c, int32_t l) {
  LayerShape s;
  s.in = LayerWidths(g, c)[static_cast<size_t>(l)];
  if (l == c.layers - 1) {
    s.head_dim = g.num_classes;
  } else if (c.head_merge == RefHeadMerge::kConcat) {
    Require(c.hidden % c.heads == 0, "RGAT concat: hidden is not divisible by heads");
    s.head_dim = c.hidden / c.heads;
    s.concat = true;
  } else {
    s.head_dim = c.hidden;
  }
  s.out = s.concat ? c.heads * s.head_dim : s.head_dim;
  return s;
}

}  // namespace

void AddRgatShapes(const RefGraph& g, const RefConfig& c, RefParams* params) {
  const int64_t num_r = g.num_relations, heads = c.heads;
  for (int32_t l = 0; l < c.layers; ++l) {
    const LayerShape s = RgatLayerShape(g, c, l);
    (*params)[LayerName(l, "weight")] = Zeros({num_r, s.in, heads * s.head_dim});
    (*params)[LayerName(l, "att_src")] = Zeros({num_r, heads, s.head_dim});
    (*params)[LayerName(l, "att_dst")] = Zeros({num_r, heads, s.head_dim});
  }
}

ModelResult RunRgat(const RefGraph& g, const RefConfig& c, const RefParams& p, RefParams* grads) {
  const int64_t n = g.num_nodes;
  const int32_t num_r = g.num_relations;
  const int64_t heads = c.heads;
  const size_t num_layers = static_cast<size_t>(c.layers);
  const size_t num_edges = g.edges.size();
  const std::vector<std::vector<size_t>> in_edges = InEdges(g);
  auto at = [&](size_t e, int64_t h) { return e * static_cast<size_t>(heads) + static_cast<size_t>(h); };

  // What the backward needs of each layer.
  struct Saved {
    Mat input;                  // X_l
    std::vector<Mat> w, z;      // W_r and Z_r = X_l W_r, per relation
    Mat att_src, att_dst;       // per relation r: rows r*Hh + h, i.e. the [R*Hh, D'] view
    std::vector<double> raw;    // [E, Hh]
    std::vector<double> alpha;  // [E, Hh]
    Mat out;                    // before the ReLU
  };
  std::vector<Saved> saved(num_layers);

  Mat x = InputMatrix(g);
  for (size_t l = 0; l < num_layers; ++l) {
    const int32_t layer = static_cast<int32_t>(l);
    const LayerShape s = RgatLayerShape(g, c, layer);
    const int64_t dh = s.head_dim;
    Saved& sv = saved[l];
    sv.input = x;
    const RefTensor& weight = Param(p, LayerName(layer, "weight"));
    const RefTensor& att_src = Param(p, LayerName(layer, "att_src"));
    const RefTensor& att_dst = Param(p, LayerName(layer, "att_dst"));
    sv.att_src = Mat(num_r * heads, dh);
    sv.att_src.a = att_src.data;
    sv.att_dst = Mat(num_r * heads, dh);
    sv.att_dst.a = att_dst.data;
    for (int32_t r = 0; r < num_r; ++r) {
      sv.w.push_back(Slice(weight, r));
      sv.z.push_back(MatMul(x, sv.w.back()));
    }
    sv.raw.assign(num_edges * static_cast<size_t>(heads), 0.0);
    sv.alpha.assign(num_edges * static_cast<size_t>(heads), 0.0);
    sv.out = Mat(n, s.out);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<size_t>& into = in_edges[static_cast<size_t>(i)];
      if (into.empty()) continue;  // no incoming edge: the output stays 0
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> score(into.size());
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const Mat& z = sv.z[static_cast<size_t>(e.rel)];
          double raw = 0;
          for (int64_t q = 0; q < dh; ++q) {
            raw += sv.att_src(e.rel * heads + h, q) * z(e.src, h * dh + q);
            raw += sv.att_dst(e.rel * heads + h, q) * z(e.dst, h * dh + q);
          }
          sv.raw[at(into[k], h)] = raw;
          score[k] = raw > 0 ? raw : kNegativeSlope * raw;
        }
        double max = score[0];
        for (double v : score) max = v > max ? v : max;
        double sum = 0;
        for (double v : score) sum += std::exp(v - max);
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const double alpha = std::exp(score[k] - max) / sum;
          sv.alpha[at(into[k], h)] = alpha;
          const Mat& z = sv.z[static_cast<size_t>(e.rel)];
          for (int64_t q = 0; q < dh; ++q) {
            const double msg = alpha * z(e.src, h * dh + q);
            if (s.concat) {
              sv.out(i, h * dh + q) += msg;
            } else {
              sv.out(i, q) += msg / static_cast<double>(heads);
            }
          }
        }
      }
    }
    if (l + 1 < num_layers) {
      x = sv.out;
      for (double& v : x.a) v = v > 0 ? v : 0.0;
    }
  }

  ModelResult result;
  result.logits = saved.back().out;
  Mat dout;
  result.loss = CrossEntropy(g, result.logits, grads != nullptr ? &dout : nullptr);
  if (grads == nullptr) return result;

  for (size_t l = num_layers; l-- > 0;) {
    const int32_t layer = static_cast<int32_t>(l);
    const LayerShape s = RgatLayerShape(g, c, layer);
    const int64_t dh = s.head_dim;
    const Saved& sv = saved[l];
    std::vector<Mat> dz(static_cast<size_t>(num_r), Mat(n, heads * dh));
    Mat datt_src(num_r * heads, dh), datt_dst(num_r * heads, dh);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<size_t>& into = in_edges[static_cast<size_t>(i)];
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> dhead(static_cast<size_t>(dh));  // d loss / d out_{i,h}
        for (int64_t q = 0; q < dh; ++q) {
          dhead[static_cast<size_t>(q)] = s.concat ? dout(i, h * dh + q) : dout(i, q) / static_cast<double>(heads);
        }
        // out_{i,h} = sum_e alpha_e z_e: d alpha_e and the message part of d z.
        std::vector<double> dalpha(into.size());
        double weighted = 0;  // sum_e alpha_e dalpha_e
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const double alpha = sv.alpha[at(into[k], h)];
          for (int64_t q = 0; q < dh; ++q) {
            dalpha[k] += dhead[static_cast<size_t>(q)] * sv.z[static_cast<size_t>(e.rel)](e.src, h * dh + q);
            dz[static_cast<size_t>(e.rel)](e.src, h * dh + q) += alpha * dhead[static_cast<size_t>(q)];
          }
          weighted += alpha * dalpha[k];
        }
        // Softmax, then LeakyReLU, then raw = att_src . z_src + att_dst . z_dst.
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const double alpha = sv.alpha[at(into[k], h)];
          const double dscore = alpha * (dalpha[k] - weighted);
          const double draw = dscore * (sv.raw[at(into[k], h)] > 0 ? 1.0 : kNegativeSlope);
          const Mat& z = sv.z[static_cast<size_t>(e.rel)];
          Mat& dzr = dz[static_cast<size_t>(e.rel)];
          const int64_t row = e.rel * heads + h;
          for (int64_t q = 0; q < dh; ++q) {
            datt_src(row, q) += draw * z(e.src, h * dh + q);
            datt_dst(row, q) += draw * z(e.dst, h * dh + q);
            dzr(e.src, h * dh + q) += draw * sv.att_src(row, q);
            dzr(e.dst, h * dh + q) += draw * sv.att_dst(row, q);
          }
        }
      }
    }
    RefTensor& gsrc = Param(grads, LayerName(layer, "att_src"));
    RefTensor& gdst = Param(grads, LayerName(layer, "att_dst"));
    for (size_t k = 0; k < gsrc.data.size(); ++k) {
      gsrc.data[k] += datt_src.a[k];
      gdst.data[k] += datt_dst.a[k];
    }
    RefTensor& gweight = Param(grads, LayerName(layer, "weight"));
    for (int32_t r = 0; r < num_r; ++r) AddToSlice(MatMulTN(sv.input, dz[static_cast<size_t>(r)]), r, &gweight);
    if (l == 0) break;
    Mat dx(n, s.in);
    for (size_t r = 0; r < dz.size(); ++r) AddInPlace(MatMulNT(dz[r], sv.w[r]), &dx);
    const Mat& prev_out = saved[l - 1].out;
    for (size_t k = 0; k < dx.a.size(); ++k) dx.a[k] = prev_out.a[k] > 0 ? dx.a[k] : 0.0;  // ReLU
    dout = dx;
  }
  return result;
}

}  // namespace tessel::testing::internal
