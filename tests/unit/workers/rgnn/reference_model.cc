// The RGNN reference: the shared helpers, the loss, Adam and the public entry points. The models
// themselves are in reference_rgcn.cc, reference_rgat.cc and reference_hgt.cc.
#include "tests/unit/workers/rgnn/reference_model.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "tests/unit/workers/rgnn/reference_internal.h"

namespace tessel::testing {
namespace internal {

Mat MatMul(const Mat& x, const Mat& y) {
  Require(x.cols == y.rows, "MatMul: inner dimensions differ");
  Mat out(x.rows, y.cols);
  for (int64_t i = 0; i < x.rows; ++i) {
    for (int64_t k = 0; k < x.cols; ++k) {
      for (int64_t j = 0; j < y.cols; ++j) out(i, j) += x(i, k) * y(k, j);
    }
  }
  return out;
}

Mat MatMulTN(const Mat& x, const Mat& y) {
  Require(x.rows == y.rows, "MatMulTN: inner dimensions differ");
  Mat out(x.cols, y.cols);
  for (int64_t k = 0; k < x.rows; ++k) {
    for (int64_t i = 0; i < x.cols; ++i) {
      for (int64_t j = 0; j < y.cols; ++j) out(i, j) += x(k, i) * y(k, j);
    }
  }
  return out;
}

Mat MatMulNT(const Mat& x, const Mat& y) {
  Require(x.cols == y.cols, "MatMulNT: inner dimensions differ");
  Mat out(x.rows, y.rows);
  for (int64_t i = 0; i < x.rows; ++i) {
    for (int64_t j = 0; j < y.rows; ++j) {
      for (int64_t k = 0; k < x.cols; ++k) out(i, j) += x(i, k) * y(j, k);
    }
  }
  return out;
}

void AddInPlace(const Mat& x, Mat* y) {
  Require(x.rows == y->rows && x.cols == y->cols, "AddInPlace: shapes differ");
  for (size_t i = 0; i < x.a.size(); ++i) y->a[i] += x.a[i];
}

void Require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("RGNN reference: " + what);
}

const RefTensor& Param(const RefParams& params, const std::string& name) {
  auto it = params.find(name);
  Require(it != params.end(), "missing parameter " + name);
  return it->second;
}

RefTensor& Param(RefParams* params, const std::string& name) {
  auto it = params->find(name);
  Require(it != params->end(), "missing parameter " + name);
  return it->second;
}

RefTensor Zeros(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  RefTensor t;
  t.shape = std::move(shape);
  t.data.assign(static_cast<size_t>(n), 0.0);
  return t;
}

Mat Slice(const RefTensor& t, int64_t index) {
  Require(t.shape.size() >= 2, "Slice of a tensor with fewer than two dimensions");
  const int64_t rows = t.shape[t.shape.size() - 2];
  const int64_t cols = t.shape[t.shape.size() - 1];
  Require(static_cast<int64_t>(t.data.size()) >= (index + 1) * rows * cols, "Slice out of range");
  Mat m(rows, cols);
  const size_t offset = static_cast<size_t>(index * rows * cols);
  for (size_t i = 0; i < m.a.size(); ++i) m.a[i] = t.data[offset + i];
  return m;
}

void AddToSlice(const Mat& m, int64_t index, RefTensor* t) {
  Require(t->shape.size() >= 2, "AddToSlice of a tensor with fewer than two dimensions");
  const int64_t rows = t->shape[t->shape.size() - 2];
  const int64_t cols = t->shape[t->shape.size() - 1];
  Require(m.rows == rows && m.cols == cols, "AddToSlice: shapes differ");
  Require(static_cast<int64_t>(t->data.size()) >= (index + 1) * rows * cols, "AddToSlice out of range");
  const size_t offset = static_cast<size_t>(index * rows * cols);
  for (size_t i = 0; i < m.a.size(); ++i) t->data[offset + i] += m.a[i];
}

int64_t InputWidth(const RefGraph& graph) { return graph.features.empty() ? graph.num_nodes : graph.feature_dim; }

Mat InputMatrix(const RefGraph& graph) {
  const int64_t n = graph.num_nodes;
  if (graph.features.empty()) {
    Mat x(n, n);
    for (int64_t i = 0; i < n; ++i) x(i, i) = 1.0;
    return x;
  }
  Mat x(n, graph.feature_dim);
  x.a = graph.features;
  return x;
}

int32_t NodeType(const RefGraph& graph, int64_t node) {
  return graph.node_type.empty() ? 0 : graph.node_type[static_cast<size_t>(node)];
}

std::vector<std::vector<size_t>> InEdges(const RefGraph& graph) {
  std::vector<std::vector<size_t>> in(static_cast<size_t>(graph.num_nodes));
  for (size_t e = 0; e < graph.edges.size(); ++e) in[static_cast<size_t>(graph.edges[e].dst)].push_back(e);
  return in;
}

std::vector<int64_t> LayerWidths(const RefGraph& graph, const RefConfig& config) {
  std::vector<int64_t> d(static_cast<size_t>(config.layers) + 1, config.hidden);
  d.front() = InputWidth(graph);
  d.back() = graph.num_classes;
  return d;
}

std::string LayerName(int32_t layer, const std::string& what) { return "layer" + std::to_string(layer) + "." + what; }

LossResult CrossEntropy(const RefGraph& graph, const Mat& logits, Mat* dlogits) {
  LossResult r;
  std::vector<int64_t> nodes;
  for (int64_t i = 0; i < graph.num_nodes; ++i) {
    const bool train = graph.train_mask.empty() || graph.train_mask[static_cast<size_t>(i)] != 0;
    if (train && graph.labels[static_cast<size_t>(i)] >= 0) nodes.push_back(i);
  }
  r.count = static_cast<int64_t>(nodes.size());
  if (dlogits != nullptr) *dlogits = Mat(logits.rows, logits.cols);
  if (r.count == 0) return r;
  for (int64_t i : nodes) {
    const int64_t label = graph.labels[static_cast<size_t>(i)];
    int64_t argmax = 0;
    for (int64_t c = 1; c < logits.cols; ++c) {
      if (logits(i, c) > logits(i, argmax)) argmax = c;  // strictly greater: the first maximum wins
    }
    if (argmax == label) ++r.correct;
    const double max = logits(i, argmax);
    double sum = 0;
    for (int64_t c = 0; c < logits.cols; ++c) sum += std::exp(logits(i, c) - max);
    const double log_sum = std::log(sum) + max;
    r.loss += log_sum - logits(i, label);
    if (dlogits != nullptr) {
      for (int64_t c = 0; c < logits.cols; ++c) {
        const double p = std::exp(logits(i, c) - log_sum);
        (*dlogits)(i, c) = (p - (c == label ? 1.0 : 0.0)) / static_cast<double>(r.count);
      }
    }
  }
  r.loss /= static_cast<double>(r.count);
  return r;
}

}  // namespace internal

namespace {

using internal::Require;

void Validate(const RefGraph& g, const RefConfig& c) {
  Require(g.num_nodes > 0, "no nodes");
  Require(g.num_types >= 1, "num_types < 1");
  Require(g.node_type.empty() || static_cast<int64_t>(g.node_type.size()) == g.num_nodes, "node_type size");
  for (int32_t t : g.node_type) Require(t >= 0 && t < g.num_types, "node type out of range");
  Require(g.num_relations >= 1, "no relations");
  for (const RefEdge& e : g.edges) {
    Require(e.src >= 0 && e.src < g.num_nodes && e.dst >= 0 && e.dst < g.num_nodes, "edge node out of range");
    Require(e.rel >= 0 && e.rel < g.num_relations, "edge relation out of range");
  }
  if (!g.features.empty()) {
    Require(g.feature_dim > 0 && static_cast<int64_t>(g.features.size()) == g.num_nodes * g.feature_dim,
            "features size");
  }
  Require(g.num_classes >= 1, "no classes");
  Require(static_cast<int64_t>(g.labels.size()) == g.num_nodes, "labels size");
  for (int64_t y : g.labels) Require(y >= -1 && y < g.num_classes, "label out of range");
  Require(g.train_mask.empty() || static_cast<int64_t>(g.train_mask.size()) == g.num_nodes, "train_mask size");
  Require(c.layers >= 1 && c.hidden >= 1 && c.heads >= 1, "layers, hidden and heads must be positive");
  Require(c.num_bases >= 0 && c.num_blocks >= 0, "negative num_bases or num_blocks");
  if (c.model != RefModel::kRgcn) {
    Require(c.num_bases == 0 && c.num_blocks == 0, "bases and blocks are RGCN-only");
  } else {
    Require(c.num_bases == 0 || c.num_blocks == 0, "bases and blocks together");
  }
}

}  // namespace

RefParams RefParamShapes(const RefGraph& graph, const RefConfig& config) {
  Validate(graph, config);
  RefParams params;
  switch (config.model) {
    case RefModel::kRgcn:
      internal::AddRgcnShapes(graph, config, &params);
      break;
    case RefModel::kRgat:
      internal::AddRgatShapes(graph, config, &params);
      break;
    case RefModel::kHgt:
      internal::AddHgtShapes(graph, config, &params);
      break;
  }
  return params;
}

namespace {

internal::ModelResult Run(const RefGraph& g, const RefConfig& c, const RefParams& params, RefParams* grads) {
  for (const auto& [name, t] : RefParamShapes(g, c)) {
    const RefTensor& p = internal::Param(params, name);
    Require(p.shape == t.shape && p.data.size() == t.data.size(), "wrong shape for parameter " + name);
  }
  switch (c.model) {
    case RefModel::kRgcn:
      return internal::RunRgcn(g, c, params, grads);
    case RefModel::kRgat:
      return internal::RunRgat(g, c, params, grads);
    case RefModel::kHgt:
      return internal::RunHgt(g, c, params, grads);
  }
  throw std::invalid_argument("RGNN reference: unknown model");
}

// SplitMix64 (Steele et al. 2014): a fixed stream, unlike std::uniform_real_distribution.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

RefParams RefRandomParams(const RefGraph& graph, const RefConfig& config, uint64_t seed) {
  RefParams params = RefParamShapes(graph, config);
  uint64_t state = seed;
  for (auto& [name, t] : params) {  // std::map: a fixed name order
    for (double& x : t.data) x = static_cast<double>(SplitMix64(&state) >> 11) * 0x1.0p-53 - 0.5;
  }
  return params;
}

std::vector<double> RefForward(const RefGraph& graph, const RefConfig& config, const RefParams& params) {
  return Run(graph, config, params, nullptr).logits.a;
}

double RefLoss(const RefGraph& graph, const RefConfig& config, const RefParams& params) {
  return Run(graph, config, params, nullptr).loss.loss;
}

void RefAdamStep(const RefParams& grads, int64_t step, double lr, double l2, RefParams* params, RefParams* m,
                 RefParams* v) {
  Require(step >= 1, "Adam step is 1-based");
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  for (const auto& [name, g] : grads) {
    RefTensor& p = internal::Param(params, name);
    Require(p.data.size() == g.data.size(), "Adam: gradient size differs for " + name);
    RefTensor& mt = (*m)[name];
    RefTensor& vt = (*v)[name];
    if (mt.data.empty()) mt = internal::Zeros(p.shape);
    if (vt.data.empty()) vt = internal::Zeros(p.shape);
    Require(mt.data.size() == p.data.size() && vt.data.size() == p.data.size(), "Adam: moment size for " + name);
    // The gradient of the penalty l2 * sum(p^2).
    const double decay = name.rfind("layer0.", 0) == 0 ? 2.0 * l2 : 0.0;
    for (size_t i = 0; i < p.data.size(); ++i) {
      const double gi = g.data[i] + decay * p.data[i];
      mt.data[i] = beta1 * mt.data[i] + (1.0 - beta1) * gi;
      vt.data[i] = beta2 * vt.data[i] + (1.0 - beta2) * gi * gi;
      const double denom = std::sqrt(vt.data[i]) / std::sqrt(bias2) + eps;
      p.data[i] -= lr / bias1 * mt.data[i] / denom;
    }
  }
}

RefStep RefTrainStep(const RefGraph& graph, const RefConfig& config, const RefParams& params, const RefParams& m,
                     const RefParams& v, int64_t step) {
  RefStep out;
  out.grads = RefParamShapes(graph, config);
  const internal::ModelResult r = Run(graph, config, params, &out.grads);
  out.loss = r.loss.loss;
  out.correct = r.loss.correct;
  out.count = r.loss.count;
  out.params = params;
  out.m = m;
  out.v = v;
  RefAdamStep(out.grads, step, config.lr, config.l2, &out.params, &out.m, &out.v);
  return out;
}

}  // namespace tessel::testing
