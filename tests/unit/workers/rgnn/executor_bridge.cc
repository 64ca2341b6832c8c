#include "tests/unit/workers/rgnn/executor_bridge.h"

#include <algorithm>

#include "workers/rgnn/layers/hgt_layer.h"

namespace tessel::workers {

::tessel::testing::RefGraph ToRefGraph(const storage::HeteroGraph& g, bool one_hot) {
  ::tessel::testing::RefGraph r;
  r.num_nodes = g.num_nodes();
  r.num_types = static_cast<int32_t>(g.node_types.size());
  r.num_relations = static_cast<int32_t>(g.relations.size());
  r.num_classes = static_cast<int32_t>(g.num_classes);
  for (int32_t t = 0; t < r.num_types; ++t) {
    const storage::NodeType& nt = g.node_types[static_cast<size_t>(t)];
    for (int64_t i = 0; i < nt.count; ++i) {
      r.node_type.push_back(t);
      r.labels.push_back(nt.labels.empty() ? -1 : nt.labels[static_cast<size_t>(i)]);
      r.train_mask.push_back(nt.train_mask.empty() ? 0 : nt.train_mask[static_cast<size_t>(i)]);
      if (!one_hot) {
        r.feature_dim = nt.feature_dim;
        for (int64_t f = 0; f < nt.feature_dim; ++f)
          r.features.push_back(nt.features[static_cast<size_t>(i * nt.feature_dim + f)]);
      }
    }
  }
  for (size_t rel = 0; rel < g.relations.size(); ++rel) {
    const storage::Relation& e = g.relations[rel];
    for (size_t k = 0; k < e.src.size(); ++k) {
      r.edges.push_back(
          {g.NodeOffset(e.src_type) + e.src[k], g.NodeOffset(e.dst_type) + e.dst[k], static_cast<int32_t>(rel)});
    }
  }
  return r;
}

::tessel::testing::RefTensor ToRef(const Tensor& t) {
  ::tessel::testing::RefTensor r;
  r.shape = t.shape();
  if (t.dtype() == DType::kF64) {
    r.data.assign(t.data<double>(), t.data<double>() + t.numel());
  } else {
    r.data.assign(t.data<float>(), t.data<float>() + t.numel());
  }
  return r;
}

::tessel::testing::RefConfig RefConfigOf(const RgnnSettings& s) {
  namespace ref = ::tessel::testing;
  ref::RefConfig config;
  config.model = s.model == "rgcn"   ? ref::RefModel::kRgcn
                 : s.model == "rgat" ? ref::RefModel::kRgat
                                     : ref::RefModel::kHgt;
  config.layers = s.layers;
  config.hidden = s.hidden;
  config.heads = s.heads;
  config.head_merge = s.head_merge == HeadMerge::kMean ? ref::RefHeadMerge::kMean : ref::RefHeadMerge::kConcat;
  config.num_bases = s.num_bases;
  config.num_blocks = s.num_blocks;
  config.bias = kHgtBias.Of<bool>(s.options);
  config.lr = s.lr;
  config.l2 = s.l2;
  return config;
}

Tensor DenseGradient(const ParameterStore& params, size_t i) {
  const ParameterSpec& spec = params.spec(i);
  if (!spec.row_gradient()) return params.grad(i);
  Tensor dense = Tensor::Empty(params.dtype(), spec.shape).value();
  const int64_t d = spec.shape.back();
  const auto fill = [&](auto* out, const auto* grad) {
    std::fill_n(out, dense.numel(), 0);
    for (size_t p = 0; p < spec.row_of.size(); ++p) {
      if (spec.row_of[p] >= 0) std::copy_n(grad + spec.row_of[p] * d, d, out + p * d);
    }
  };
  if (params.dtype() == DType::kF64) {
    fill(dense.data<double>(), params.grad(i).data<double>());
  } else {
    fill(dense.data<float>(), params.grad(i).data<float>());
  }
  return dense;
}

}  // namespace tessel::workers
