#include "workers/rgnn/layers/rgat_layer.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/rgnn.h>

namespace tessel::workers {

RgatLayer::RgatLayer(const Shape& shape, const GraphView& graph, const KernelSet& kernels, ParameterStore& params)
    : shape_(shape), k_(kernels), params_(params) {
  const Decay decay = shape.index == 0 ? Decay::kL2 : Decay::kNone;
  const std::string prefix = StrCat("layer", shape.index, ".");
  const int64_t R = graph.relations, F = shape.heads * shape.head_dim;
  weight_ = params.Add({prefix + "weight", {R, shape.in_dim, F}, ParamInit::kWeight, decay});
  att_src_ = params.Add({prefix + "att_src", {R, shape.heads, shape.head_dim}, ParamInit::kWeight, decay});
  att_dst_ = params.Add({prefix + "att_dst", {R, shape.heads, shape.head_dim}, ParamInit::kWeight, decay});
}

std::vector<const tessel_op_decl*> RgatLayer::Ops(const Shape& shape) {
  if (shape.one_hot) return {&tessel_op_rgnn_rgat_embed_fwd, &tessel_op_rgnn_rgat_embed_bwd};
  return {&tessel_op_rgnn_rgat_fwd, &tessel_op_rgnn_rgat_bwd};
}

Status RgatLayer::Bind(const GraphView& graph) {
  graph_ = &graph;
  Allocator& alloc = *params_.device().allocator;
  const SegmentLayout& g = graph.segments;
  const int64_t H = shape_.heads, F = H * shape_.head_dim, N = graph.owned;
  const int64_t head_rows = shape_.merge == HeadMerge::kMean ? N : 0;
  TESSEL_ASSIGN_OR_RETURN(heads_, heads_buf_.View({head_rows, F}, params_.dtype(), alloc));
  TESSEL_ASSIGN_OR_RETURN(s_src_, s_src_buf_.View({g.num_pairs, H}, params_.dtype(), alloc));
  TESSEL_ASSIGN_OR_RETURN(s_dst_, s_dst_buf_.View({g.num_segs, H}, params_.dtype(), alloc));
  TESSEL_ASSIGN_OR_RETURN(row_max_, row_max_buf_.View({N, H}, params_.dtype(), alloc));
  TESSEL_ASSIGN_OR_RETURN(row_sum_, row_sum_buf_.View({N, H}, params_.dtype(), alloc));
  return Status();
}

namespace {

tessel_rgat_params Params(const RgatLayer::Shape& s) {
  return tessel_rgat_params{sizeof(tessel_rgat_params), s.heads, s.merge == HeadMerge::kMean ? 1 : 0,
                            s.reordering == Reordering::kOn ? 1 : 0, 0.2f};
}

}  // namespace

Status RgatLayer::Forward(const Tensor& x, Tensor& out) {
  const SegmentLayout& g = graph_->segments;
  const Tensor &w = params_.value(weight_), &as = params_.value(att_src_), &ad = params_.value(att_dst_);
  std::vector<const Tensor*> in = shape_.one_hot ? std::vector<const Tensor*>{&w, &graph_->row_id, &as, &ad}
                                                 : std::vector<const Tensor*>{&x, &w, &as, &ad};
  g.AppendDst(in);
  in.push_back(&g.dedge_pair);
  g.AppendSrc(in);
  if (shape_.merge == HeadMerge::kConcat) out_copy_ = out;  // the heads, for backward
  return k_.Call(shape_.one_hot ? tessel_op_rgnn_rgat_embed_fwd : tessel_op_rgnn_rgat_fwd, in,
                 {&out, &heads_, &s_src_, &s_dst_, &row_max_, &row_sum_}, Params(shape_));
}

Status RgatLayer::Backward(Tensor& dout, const Tensor& x, Tensor* dx) {
  const SegmentLayout& g = graph_->segments;
  const Tensor &w = params_.value(weight_), &as = params_.value(att_src_), &ad = params_.value(att_dst_);
  // The per-head outputs: their own buffer with mean merge, the layer's output (still intact: the
  // executor keeps each layer's output until its backward) with concat.
  const Tensor& heads = shape_.merge == HeadMerge::kMean ? heads_ : out_copy_;
  std::vector<const Tensor*> in = shape_.one_hot ? std::vector<const Tensor*>{&dout, &w, &graph_->row_id, &as, &ad}
                                                 : std::vector<const Tensor*>{&dout, &x, &w, &as, &ad};
  for (const Tensor* t : std::initializer_list<const Tensor*>{&heads, &s_src_, &s_dst_, &row_max_, &row_sum_}) {
    in.push_back(t);
  }
  g.AppendDst(in);
  in.push_back(&g.dedge_pair);
  g.AppendSrc(in);
  Tensor &dw = params_.grad(weight_), &das = params_.grad(att_src_), &dad = params_.grad(att_dst_);
  if (shape_.one_hot) return k_.Call(tessel_op_rgnn_rgat_embed_bwd, in, {&dw, &das, &dad}, Params(shape_));
  Tensor no_dx = Tensor::Borrow(nullptr, params_.dtype(), {0, shape_.in_dim}, params_.device().device);
  return k_.Call(tessel_op_rgnn_rgat_bwd, in, {dx != nullptr ? dx : &no_dx, &dw, &das, &dad}, Params(shape_));
}

std::vector<RgatLayer::Shape> RgatLayer::Shapes(const RgnnSettings& settings, const ModelShape& model) {
  std::vector<Shape> shapes;
  for (int l = 0; l < settings.layers; ++l) {
    Shape s;
    s.index = l;
    s.in_dim = l == 0 ? model.input_dim : shapes.back().out_dim();
    s.heads = settings.heads;
    const bool last = l == settings.layers - 1;
    s.merge = last ? HeadMerge::kMean : settings.head_merge;
    s.head_dim = last
                     ? model.classes
                     : (settings.head_merge == HeadMerge::kConcat ? settings.hidden / settings.heads : settings.hidden);
    s.one_hot = l == 0 && settings.input == ModelInput::kOneHot;
    s.reordering = settings.reordering;
    shapes.push_back(s);
  }
  return shapes;
}

namespace {

class Rgat final : public RgnnModel {
 public:
  std::string_view name() const override { return "rgat"; }

  std::vector<SettingProblem> Check(const RgnnSettings& s, const ModelShape&) const override {
    std::vector<SettingProblem> problems = DecompositionProblems(s, name());
    if (s.head_merge == HeadMerge::kConcat && s.layers > 1 && s.hidden % s.heads != 0) {
      problems.push_back({"model.heads", "model.hidden",
                          StrCat("model.hidden = ", s.hidden, " is not divisible by model.heads = ", s.heads,
                                 ": \"rgat\" with head_merge = \"concat\" splits the hidden width across the heads")});
    }
    return problems;
  }

  std::vector<const tessel_op_decl*> Ops(const RgnnSettings& s, const ModelShape& model) const override {
    std::vector<const tessel_op_decl*> ops;
    for (const RgatLayer::Shape& shape : RgatLayer::Shapes(s, model)) {
      for (const tessel_op_decl* op : RgatLayer::Ops(shape)) ops.push_back(op);
    }
    ops.push_back(&tessel_op_nn_relu_fwd);
    ops.push_back(&tessel_op_nn_relu_bwd);
    return ops;
  }

  Result<ModelLayers> Build(const RgnnSettings& s, const ModelShape& model, const GraphView& graph, KernelSet& kernels,
                            ParameterStore& params) const override {
    ModelLayers out;
    for (const RgatLayer::Shape& shape : RgatLayer::Shapes(s, model)) {
      out.layers.push_back(std::make_unique<RgatLayer>(shape, graph, kernels, params));
    }
    return out;
  }
};

}  // namespace

const RgnnModel& RgatModel() {
  static const Rgat model;
  return model;
}

}  // namespace tessel::workers
