// The HGT reference (MODELS.md "HGT", as PyG's HGTConv; its biases with RefConfig::bias): per-node-type
// K/Q/V and output linears (+ a per-type bias row), per-relation rel_att / rel_msg / rel_prior, one softmax per head
// over all edges into a node, exact (erf) GELU, the gated skip sigmoid(skip) when K == D (not from a one-hot input),
// and a linear classifier after the last layer.
#include <cmath>
#include <string>
#include <vector>

#include "tests/unit/workers/rgnn/reference_internal.h"

namespace tessel::testing::internal {
namespace {

double Gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

double GeluGrad(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * pi);
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

int64_t LayerInput(const RefGraph& g, const RefConfig& c, int32_t l) { return l == 0 ? InputWidth(g) : c.hidden; }

// Y(i, :) = X(i, :) W[tau(i)] (+ b[tau(i)]): a per-node-type linear, W = [T, K, D], b = [T, D] or none.
Mat TypedLinear(const RefGraph& g, const Mat& x, const RefTensor& w, const RefTensor* b) {
  Mat y(x.rows, w.shape.back());
  for (int32_t t = 0; t < g.num_types; ++t) {
    const Mat yt = MatMul(x, Slice(w, t));
    for (int64_t i = 0; i < x.rows; ++i) {
      if (NodeType(g, i) != t) continue;
      for (int64_t q = 0; q < y.cols; ++q) {
        y(i, q) = yt(i, q) + (b != nullptr ? b->data[static_cast<size_t>(t * y.cols + q)] : 0.0);
      }
    }
  }
  return y;
}

// The backward of TypedLinear: dW[t] += X_t^T dY_t, db[t] += the column sums of dY_t, and
// dX += dY_t W[t]^T, over the rows of type t.
void TypedLinearBackward(const RefGraph& g, const Mat& x, const RefTensor& w, const Mat& dy, RefTensor* dw,
                         RefTensor* db, Mat* dx) {
  for (int64_t i = 0; db != nullptr && i < dy.rows; ++i) {
    for (int64_t q = 0; q < dy.cols; ++q) db->data[static_cast<size_t>(NodeType(g, i) * dy.cols + q)] += dy(i, q);
  }
  for (int32_t t = 0; t < g.num_types; ++t) {
    Mat dyt = dy;
    for (int64_t i = 0; i < x.rows; ++i) {
      if (NodeType(g, i) == t) continue;
      for (int64_t q = 0; q < dy.cols; ++q) dyt(i, q) = 0.0;
    }
    AddToSlice(MatMulTN(x, dyt), t, dw);
    AddInPlace(MatMulNT(dyt, Slice(w, t)), dx);
  }
}

// The gated skip: when the layer's input and output widths match, except from a one-hot input (MODELS.md).
bool HasSkip(const RefGraph& g, int32_t layer, int64_t k, int64_t dmodel) {
  return k == dmodel && !(layer == 0 && g.features.empty());
}

}  // namespace

void AddHgtShapes(const RefGraph& g, const RefConfig& c, RefParams* params) {
  Require(c.hidden % c.heads == 0, "HGT: hidden is not divisible by heads");
  const int64_t num_t = g.num_types, num_r = g.num_relations, heads = c.heads;
  const int64_t dmodel = c.hidden, dh = c.hidden / c.heads;
  for (int32_t l = 0; l < c.layers; ++l) {
    const int64_t k = LayerInput(g, c, l);
    (*params)[LayerName(l, "k")] = Zeros({num_t, k, dmodel});
    (*params)[LayerName(l, "q")] = Zeros({num_t, k, dmodel});
    (*params)[LayerName(l, "v")] = Zeros({num_t, k, dmodel});
    (*params)[LayerName(l, "out")] = Zeros({num_t, dmodel, dmodel});
    if (c.bias) {
      for (const char* name : {"k_bias", "q_bias", "v_bias", "out_bias"})
        (*params)[LayerName(l, name)] = Zeros({num_t, dmodel});
    }
    if (HasSkip(g, l, k, dmodel)) (*params)[LayerName(l, "skip")] = Zeros({num_t});
    (*params)[LayerName(l, "rel_att")] = Zeros({num_r, heads, dh, dh});
    (*params)[LayerName(l, "rel_msg")] = Zeros({num_r, heads, dh, dh});
    (*params)[LayerName(l, "rel_prior")] = Zeros({num_r, heads});
  }
  (*params)["classifier.weight"] = Zeros({dmodel, g.num_classes});
}

ModelResult RunHgt(const RefGraph& g, const RefConfig& c, const RefParams& p, RefParams* grads) {
  const int64_t n = g.num_nodes;
  const int64_t heads = c.heads, dmodel = c.hidden, dh = c.hidden / c.heads;
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(dh));
  const size_t num_layers = static_cast<size_t>(c.layers);
  const std::vector<std::vector<size_t>> in_edges = InEdges(g);
  const size_t num_edges = g.edges.size();
  auto at = [&](size_t e, int64_t h) { return e * static_cast<size_t>(heads) + static_cast<size_t>(h); };
  // A linear's bias and its gradient, or none.
  auto bias = [&](int32_t layer, const std::string& linear) -> const RefTensor* {
    return c.bias ? &Param(p, LayerName(layer, linear + "_bias")) : nullptr;
  };
  auto dbias = [&](int32_t layer, const std::string& linear) -> RefTensor* {
    return c.bias ? &Param(grads, LayerName(layer, linear + "_bias")) : nullptr;
  };

  // What the backward needs of each layer. Per (edge, head): kr = k_{j,h} rel_att[r,h] and
  // msg = v_{j,h} rel_msg[r,h] (d values each), dot = kr . q_{i,h}, alpha.
  struct Saved {
    Mat input, kk, qq, vv;
    std::vector<std::vector<double>> kr, msg;
    std::vector<double> dot, alpha;
    Mat agg, gel, o;
  };
  std::vector<Saved> saved(num_layers);

  Mat x = InputMatrix(g);
  for (size_t l = 0; l < num_layers; ++l) {
    const int32_t layer = static_cast<int32_t>(l);
    Saved& sv = saved[l];
    sv.input = x;
    sv.kk = TypedLinear(g, x, Param(p, LayerName(layer, "k")), bias(layer, "k"));
    sv.qq = TypedLinear(g, x, Param(p, LayerName(layer, "q")), bias(layer, "q"));
    sv.vv = TypedLinear(g, x, Param(p, LayerName(layer, "v")), bias(layer, "v"));
    const RefTensor& rel_att = Param(p, LayerName(layer, "rel_att"));
    const RefTensor& rel_msg = Param(p, LayerName(layer, "rel_msg"));
    const RefTensor& rel_prior = Param(p, LayerName(layer, "rel_prior"));
    sv.kr.assign(num_edges * static_cast<size_t>(heads), std::vector<double>(static_cast<size_t>(dh)));
    sv.msg.assign(num_edges * static_cast<size_t>(heads), std::vector<double>(static_cast<size_t>(dh)));
    sv.dot.assign(num_edges * static_cast<size_t>(heads), 0.0);
    sv.alpha.assign(num_edges * static_cast<size_t>(heads), 0.0);
    sv.agg = Mat(n, dmodel);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<size_t>& into = in_edges[static_cast<size_t>(i)];
      if (into.empty()) continue;  // agg stays 0
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> score(into.size());
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const size_t eh = at(into[k], h);
          const Mat att = Slice(rel_att, e.rel * heads + h);
          const Mat mmsg = Slice(rel_msg, e.rel * heads + h);
          for (int64_t b = 0; b < dh; ++b) {
            for (int64_t a = 0; a < dh; ++a) {
              sv.kr[eh][static_cast<size_t>(b)] += sv.kk(e.src, h * dh + a) * att(a, b);
              sv.msg[eh][static_cast<size_t>(b)] += sv.vv(e.src, h * dh + a) * mmsg(a, b);
            }
          }
          for (int64_t b = 0; b < dh; ++b) sv.dot[eh] += sv.kr[eh][static_cast<size_t>(b)] * sv.qq(i, h * dh + b);
          score[k] = sv.dot[eh] * rel_prior.data[static_cast<size_t>(e.rel * heads + h)] * inv_sqrt_d;
        }
        double max = score[0];
        for (double v : score) max = v > max ? v : max;
        double sum = 0;
        for (double v : score) sum += std::exp(v - max);
        for (size_t k = 0; k < into.size(); ++k) {
          const size_t eh = at(into[k], h);
          sv.alpha[eh] = std::exp(score[k] - max) / sum;
          for (int64_t b = 0; b < dh; ++b) sv.agg(i, h * dh + b) += sv.alpha[eh] * sv.msg[eh][static_cast<size_t>(b)];
        }
      }
    }
    sv.gel = sv.agg;
    for (double& v : sv.gel.a) v = Gelu(v);
    sv.o = TypedLinear(g, sv.gel, Param(p, LayerName(layer, "out")), bias(layer, "out"));
    if (HasSkip(g, layer, x.cols, dmodel)) {
      const RefTensor& skip = Param(p, LayerName(layer, "skip"));
      Mat next(n, dmodel);
      for (int64_t i = 0; i < n; ++i) {
        const double beta = Sigmoid(skip.data[static_cast<size_t>(NodeType(g, i))]);
        for (int64_t q = 0; q < dmodel; ++q) next(i, q) = beta * sv.o(i, q) + (1.0 - beta) * x(i, q);
      }
      x = next;
    } else {
      x = sv.o;
    }
  }
  const Mat classifier = Slice(Param(p, "classifier.weight"), 0);

  ModelResult result;
  result.logits = MatMul(x, classifier);
  Mat dlogits;
  result.loss = CrossEntropy(g, result.logits, grads != nullptr ? &dlogits : nullptr);
  if (grads == nullptr) return result;

  AddToSlice(MatMulTN(x, dlogits), 0, &Param(grads, "classifier.weight"));
  Mat dx = MatMulNT(dlogits, classifier);  // d loss / d (the output of the layer below)
  for (size_t l = num_layers; l-- > 0;) {
    const int32_t layer = static_cast<int32_t>(l);
    const Saved& sv = saved[l];
    const Mat dh_out = dx;
    dx = Mat(n, sv.input.cols);
    Mat d_o(n, dmodel);
    if (HasSkip(g, layer, sv.input.cols, dmodel)) {
      const RefTensor& skip = Param(p, LayerName(layer, "skip"));
      RefTensor& dskip = Param(grads, LayerName(layer, "skip"));
      for (int64_t i = 0; i < n; ++i) {
        const int32_t t = NodeType(g, i);
        const double beta = Sigmoid(skip.data[static_cast<size_t>(t)]);
        double dbeta = 0;
        for (int64_t q = 0; q < dmodel; ++q) {
          d_o(i, q) = beta * dh_out(i, q);
          dx(i, q) += (1.0 - beta) * dh_out(i, q);
          dbeta += dh_out(i, q) * (sv.o(i, q) - sv.input(i, q));
        }
        dskip.data[static_cast<size_t>(t)] += dbeta * beta * (1.0 - beta);
      }
    } else {
      d_o = dh_out;
    }
    Mat dgel(n, dmodel);
    TypedLinearBackward(g, sv.gel, Param(p, LayerName(layer, "out")), d_o, &Param(grads, LayerName(layer, "out")),
                        dbias(layer, "out"), &dgel);
    Mat dagg = dgel;
    for (size_t k = 0; k < dagg.a.size(); ++k) dagg.a[k] *= GeluGrad(sv.agg.a[k]);

    const RefTensor& rel_att = Param(p, LayerName(layer, "rel_att"));
    const RefTensor& rel_msg = Param(p, LayerName(layer, "rel_msg"));
    const RefTensor& rel_prior = Param(p, LayerName(layer, "rel_prior"));
    RefTensor& drel_att = Param(grads, LayerName(layer, "rel_att"));
    RefTensor& drel_msg = Param(grads, LayerName(layer, "rel_msg"));
    RefTensor& drel_prior = Param(grads, LayerName(layer, "rel_prior"));
    Mat dk(n, dmodel), dq(n, dmodel), dv(n, dmodel);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<size_t>& into = in_edges[static_cast<size_t>(i)];
      for (int64_t h = 0; h < heads; ++h) {
        // agg_{i,h} = sum_e alpha_e msg_e.
        std::vector<double> dalpha(into.size());
        double weighted = 0;  // sum_e alpha_e dalpha_e
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const size_t eh = at(into[k], h);
          const Mat mmsg = Slice(rel_msg, e.rel * heads + h);
          Mat dmmsg(dh, dh);
          for (int64_t b = 0; b < dh; ++b) {
            const double dmsg_b = sv.alpha[eh] * dagg(i, h * dh + b);
            dalpha[k] += dagg(i, h * dh + b) * sv.msg[eh][static_cast<size_t>(b)];
            // msg = v_{j,h} rel_msg[r,h].
            for (int64_t a = 0; a < dh; ++a) {
              dmmsg(a, b) += sv.vv(e.src, h * dh + a) * dmsg_b;
              dv(e.src, h * dh + a) += dmsg_b * mmsg(a, b);
            }
          }
          AddToSlice(dmmsg, e.rel * heads + h, &drel_msg);
          weighted += sv.alpha[eh] * dalpha[k];
        }
        // Softmax, then score = (kr . q) * prior / sqrt(d) with kr = k_{j,h} rel_att[r,h].
        for (size_t k = 0; k < into.size(); ++k) {
          const RefEdge& e = g.edges[into[k]];
          const size_t eh = at(into[k], h);
          const size_t rh = static_cast<size_t>(e.rel * heads + h);
          const double dscore = sv.alpha[eh] * (dalpha[k] - weighted);
          drel_prior.data[rh] += dscore * sv.dot[eh] * inv_sqrt_d;
          const double ddot = dscore * rel_prior.data[rh] * inv_sqrt_d;
          const Mat att = Slice(rel_att, e.rel * heads + h);
          Mat datt(dh, dh);
          for (int64_t b = 0; b < dh; ++b) {
            const double dkr_b = ddot * sv.qq(i, h * dh + b);
            dq(i, h * dh + b) += ddot * sv.kr[eh][static_cast<size_t>(b)];
            for (int64_t a = 0; a < dh; ++a) {
              datt(a, b) += sv.kk(e.src, h * dh + a) * dkr_b;
              dk(e.src, h * dh + a) += dkr_b * att(a, b);
            }
          }
          AddToSlice(datt, e.rel * heads + h, &drel_att);
        }
      }
    }
    for (const auto& [name, d] : {std::pair<std::string, const Mat*>{"k", &dk}, {"q", &dq}, {"v", &dv}}) {
      TypedLinearBackward(g, sv.input, Param(p, LayerName(layer, name)), *d, &Param(grads, LayerName(layer, name)),
                          dbias(layer, name), &dx);
    }
    // No activation between HGT layers: dx is already d loss / d (the output of layer l - 1).
  }
  return result;
}

}  // namespace tessel::testing::internal
