#include "workers/rgnn/layers/rgcn_layer.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>
#include <tessel/ops/rgnn.h>

namespace tessel::workers {

RgcnLayer::Weights RgcnLayer::WeightsFor(const RgnnSettings& settings, int64_t in_dim, int64_t out_dim) {
  if (settings.num_bases > 0) return Weights::kBases;
  if (settings.num_blocks > 0 && in_dim % settings.num_blocks == 0 && out_dim % settings.num_blocks == 0) {
    return Weights::kBlocks;
  }
  return Weights::kFull;
}

namespace {

// For a row gradient: row (r, row_id[j]) of the one-hot weight [R, V, out] takes the gradient of pair
// (r, j), the pair's index in the source-major layout; rows of no pair take none (-1).
Result<std::vector<int32_t>> PairRowMap(const GraphView& graph, int64_t v) {
  const SegmentLayout& g = graph.segments;
  const DeviceContext& device = graph.device;
  TESSEL_ASSIGN_OR_RETURN(Tensor run_rel, ToHost(g.srun_rel, device));
  TESSEL_ASSIGN_OR_RETURN(Tensor run_pair, ToHost(g.srun_pair, device));
  TESSEL_ASSIGN_OR_RETURN(Tensor pair_src, ToHost(g.pair_src, device));
  TESSEL_ASSIGN_OR_RETURN(Tensor row_id, ToHost(graph.row_id, device));
  std::vector<int32_t> row_of(static_cast<size_t>(graph.relations * v), -1);
  for (int64_t q = 0; q < run_rel.numel(); ++q) {
    const int64_t rel = run_rel.data<int32_t>()[q];
    for (int64_t u = run_pair.data<int64_t>()[q]; u < run_pair.data<int64_t>()[q + 1]; ++u) {
      const int64_t id = row_id.data<int64_t>()[pair_src.data<int32_t>()[u]];
      if (rel < 0 || rel >= graph.relations || id < 0 || id >= v) {
        return BadDataError(
            StrCat("pair ", u, " has relation ", rel, " and node ", id, " outside [", graph.relations, ", ", v, ")"));
      }
      row_of[static_cast<size_t>(rel * v + id)] = static_cast<int32_t>(u);
    }
  }
  return row_of;
}

}  // namespace

Result<std::unique_ptr<RgcnLayer>> RgcnLayer::Create(const Shape& shape, const GraphView& graph,
                                                     const KernelSet& kernels, ParameterStore& params) {
  std::vector<int32_t> row_of;
  if (shape.row_gradient) {
    if (!shape.one_hot || shape.weights != Weights::kFull || shape.reordering != Reordering::kOn) {
      return InternalError("an RGCN row gradient needs a one-hot input, full weights and reordering");
    }
    TESSEL_ASSIGN_OR_RETURN(row_of, PairRowMap(graph, shape.in_dim));
  }
  return std::unique_ptr<RgcnLayer>(new RgcnLayer(shape, graph, kernels, params, std::move(row_of)));
}

RgcnLayer::RgcnLayer(const Shape& shape, const GraphView& graph, const KernelSet& kernels, ParameterStore& params,
                     std::vector<int32_t> row_of)
    : shape_(shape), relations_(graph.relations), k_(kernels), params_(params) {
  const Decay decay = shape.index == 0 ? Decay::kL2 : Decay::kNone;
  const std::string prefix = StrCat("layer", shape.index, ".");
  const int64_t R = graph.relations, K = shape.in_dim, D = shape.out_dim, B = shape.num_bases_or_blocks;
  switch (shape.weights) {
    case Weights::kFull: {
      ParameterSpec spec{prefix + "weight", {R, K, D}, ParamInit::kWeight, decay};
      spec.grad_rows = shape.row_gradient ? graph.segments.num_pairs : 0;
      spec.row_of = std::move(row_of);
      weight_ = params.Add(std::move(spec));
      break;
    }
    case Weights::kBases:
      weight_ = params.Add({prefix + "bases", {B, K, D}, ParamInit::kWeight, decay});
      coef_ = params.Add({prefix + "coef", {R, B}, ParamInit::kWeight, decay});
      break;
    case Weights::kBlocks:
      weight_ = params.Add({prefix + "blocks", {R, B, K / B, D / B}, ParamInit::kWeight, decay});
      break;
  }
}

std::vector<const tessel_op_decl*> RgcnLayer::Ops(const Shape& shape) {
  std::vector<const tessel_op_decl*> ops;
  if (shape.reordering == Reordering::kOn) {
    ops = shape.one_hot
              ? std::vector<const tessel_op_decl*>{&tessel_op_rgnn_rgcn_embed_fwd, &tessel_op_rgnn_rgcn_embed_bwd}
              : std::vector<const tessel_op_decl*>{&tessel_op_rgnn_rgcn_fwd, &tessel_op_rgnn_rgcn_bwd};
    if (shape.row_gradient) {
      ops = {&tessel_op_rgnn_rgcn_embed_fwd, &tessel_op_rgnn_rgcn_embed_bwd_rows, &tessel_op_optim_adam_step_rows};
    }
  } else {
    ops = shape.one_hot
              ? std::vector<const tessel_op_decl*>{&tessel_op_rgnn_typed_embed_fwd, &tessel_op_rgnn_typed_embed_bwd}
              : std::vector<const tessel_op_decl*>{&tessel_op_rgnn_typed_linear_fwd, &tessel_op_rgnn_typed_linear_bwd};
    ops.push_back(&tessel_op_rgnn_aggregate_fwd);
    ops.push_back(&tessel_op_rgnn_aggregate_bwd);
  }
  if (shape.reordering == Reordering::kOn && !shape.row_gradient) ops.push_back(&tessel_op_nn_add);  // BackwardAdd
  if (shape.weights == Weights::kBases) ops.push_back(&tessel_op_nn_gemm);
  if (shape.weights == Weights::kBlocks) {
    ops.push_back(&tessel_op_rgnn_block_diag_fwd);
    ops.push_back(&tessel_op_rgnn_block_diag_bwd);
  }
  return ops;
}

Status RgcnLayer::EnsureBuffer(Tensor& t, std::vector<int64_t> shape) {
  if (t.raw() != nullptr && t.shape() == shape) return Status();
  TESSEL_ASSIGN_OR_RETURN(t, Tensor::Empty(params_.dtype(), std::move(shape), *params_.device().allocator));
  return Status();
}

namespace {

// A 2-D view [rows, cols] of a contiguous tensor.
Tensor As2D(const Tensor& t, int64_t rows, int64_t cols) {
  return Tensor::Borrow(t.raw(), t.dtype(), {rows, cols}, t.device());
}

}  // namespace

Result<const Tensor*> RgcnLayer::DenseWeight() {
  const int64_t R = relations_, K = shape_.in_dim, D = shape_.out_dim, B = shape_.num_bases_or_blocks;
  switch (shape_.weights) {
    case Weights::kFull:
      return &params_.value(weight_);
    case Weights::kBases: {
      // W[R, K*D] = coef[R, B] @ bases[B, K*D]
      TESSEL_RETURN_IF_ERROR(EnsureBuffer(w_dense_, {R, K, D}));
      Tensor coef = params_.value(coef_), bases = As2D(params_.value(weight_), B, K * D), w = As2D(w_dense_, R, K * D);
      const tessel_gemm_params p{sizeof(tessel_gemm_params), 0, 0, 1.0, 0.0};
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&coef, &bases}, {&w}, p));
      return &w_dense_;
    }
    case Weights::kBlocks:
      TESSEL_RETURN_IF_ERROR(EnsureBuffer(w_dense_, {R, K, D}));
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_block_diag_fwd, {&params_.value(weight_)}, {&w_dense_}));
      return &w_dense_;
  }
  return InternalError("unknown RGCN weight decomposition");
}

Tensor& RgcnLayer::DenseGradient() { return shape_.weights == Weights::kFull ? params_.grad(weight_) : dw_dense_; }

Status RgcnLayer::ProjectGradient() {
  const int64_t R = relations_, K = shape_.in_dim, D = shape_.out_dim, B = shape_.num_bases_or_blocks;
  switch (shape_.weights) {
    case Weights::kFull:
      return Status();
    case Weights::kBases: {
      // dcoef = dW[R, K*D] @ bases[B, K*D]^T;  dbases = coef^T @ dW
      Tensor dw = As2D(dw_dense_, R, K * D), bases = As2D(params_.value(weight_), B, K * D);
      Tensor dbases = As2D(params_.grad(weight_), B, K * D);
      const Tensor& coef = params_.value(coef_);
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&dw, &bases}, {&params_.grad(coef_)},
                                     tessel_gemm_params{sizeof(tessel_gemm_params), 0, 1, 1.0, 0.0}));
      return k_.Call(tessel_op_nn_gemm, {&coef, &dw}, {&dbases},
                     tessel_gemm_params{sizeof(tessel_gemm_params), 1, 0, 1.0, 0.0});
    }
    case Weights::kBlocks:
      return k_.Call(tessel_op_rgnn_block_diag_bwd, {&dw_dense_}, {&params_.grad(weight_)});
  }
  return InternalError("unknown RGCN weight decomposition");
}

Status RgcnLayer::Forward(const Tensor& x, Tensor& out) {
  TESSEL_ASSIGN_OR_RETURN(const Tensor* w, DenseWeight());
  if (shape_.reordering == Reordering::kOn) {
    const SegmentLayout& g = graph_->segments;
    std::vector<const Tensor*> in = shape_.one_hot ? std::vector<const Tensor*>{w, &graph_->row_id, &g.seg_norm}
                                                   : std::vector<const Tensor*>{&x, w, &g.seg_norm};
    g.AppendDst(in);
    return k_.Call(shape_.one_hot ? tessel_op_rgnn_rgcn_embed_fwd : tessel_op_rgnn_rgcn_fwd, in, {&out});
  }
  const RelationLayout& g = graph_->pairs;
  TESSEL_ASSIGN_OR_RETURN(y_, y_buf_.View({g.num_uniq, shape_.out_dim}, params_.dtype(), *params_.device().allocator));
  if (shape_.one_hot) {
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_rgnn_typed_embed_fwd, {w, &g.uniq_ptr, &g.uniq_src, &graph_->row_id}, {&y_}));
  } else {
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_typed_linear_fwd, {&x, w, &g.uniq_ptr, &g.uniq_src}, {&y_}));
  }
  return k_.Call(tessel_op_rgnn_aggregate_fwd, {&y_, &g.edge_uniq, &g.norm, &g.dst_ptr, &g.dst_edges}, {&out});
}

Status RgcnLayer::FusedBackward(const Tensor& dout, const Tensor& x, Tensor* dx, Tensor& dw) {
  const SegmentLayout& g = graph_->segments;
  if (shape_.one_hot) {
    std::vector<const Tensor*> in = {&dout, &graph_->row_id, &g.seg_norm, &g.seg_dst};
    g.AppendSrc(in);
    return k_.Call(tessel_op_rgnn_rgcn_embed_bwd, in, {&dw});
  }
  const Tensor& w = shape_.weights == Weights::kFull ? params_.value(weight_) : w_dense_;
  std::vector<const Tensor*> in = {&dout, &x, &w, &g.seg_norm, &g.seg_dst};
  g.AppendSrc(in);
  return k_.Call(tessel_op_rgnn_rgcn_bwd, in, {dx, &dw});
}

Status RgcnLayer::BackwardAdd(Tensor& dout, const Tensor& x, Tensor* dx) {
  if (shape_.reordering != Reordering::kOn || shape_.row_gradient) {
    return InternalError("an RGCN layer sums its gradients over blocks of rows only through the fused kernels");
  }
  const int64_t R = relations_, K = shape_.in_dim, D = shape_.out_dim;
  TESSEL_RETURN_IF_ERROR(EnsureBuffer(dw_block_, {R, K, D}));
  if (shape_.weights != Weights::kFull) TESSEL_RETURN_IF_ERROR(EnsureBuffer(dw_dense_, {R, K, D}));
  Tensor no_dx = Tensor::Borrow(nullptr, params_.dtype(), {0, K}, params_.device().device);
  TESSEL_RETURN_IF_ERROR(FusedBackward(dout, x, dx != nullptr ? dx : &no_dx, dw_block_));
  // The dense gradient gains this block's; a decomposition projects the sum again (the projection is linear).
  Tensor& dense = DenseGradient();
  Tensor sum = Tensor::Borrow(dense.raw(), dense.dtype(), {dense.numel()}, dense.device());
  Tensor block = Tensor::Borrow(dw_block_.raw(), dw_block_.dtype(), {dw_block_.numel()}, dw_block_.device());
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_add, {&sum, &block}, {&sum}));
  return ProjectGradient();
}

Status RgcnLayer::Backward(Tensor& dout, const Tensor& x, Tensor* dx) {
  const int64_t R = relations_;
  if (shape_.weights != Weights::kFull)
    TESSEL_RETURN_IF_ERROR(EnsureBuffer(dw_dense_, {R, shape_.in_dim, shape_.out_dim}));
  Tensor& dw = DenseGradient();
  // The dense W of this step: the forward pass formed it and nothing has changed it since.
  const Tensor& w = shape_.weights == Weights::kFull ? params_.value(weight_) : w_dense_;
  Tensor no_dx = Tensor::Borrow(nullptr, params_.dtype(), {0, shape_.in_dim}, params_.device().device);
  Tensor* dx_out = dx != nullptr ? dx : &no_dx;
  if (shape_.reordering == Reordering::kOn) {
    if (shape_.row_gradient) {
      const SegmentLayout& g = graph_->segments;
      std::vector<const Tensor*> in = {&dout, &g.seg_norm, &g.seg_dst};
      g.AppendSrc(in);
      return k_.Call(tessel_op_rgnn_rgcn_embed_bwd_rows, in, {&dw});
    }
    TESSEL_RETURN_IF_ERROR(FusedBackward(dout, x, dx_out, dw));
    return ProjectGradient();
  }
  // Reordering off: dY overwrites Y (no backward kernel reads Y).
  const RelationLayout& g = graph_->pairs;
  Tensor& dy = y_;
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_aggregate_bwd, {&dout, &g.dst, &g.norm, &g.uniq_edge_ptr}, {&dy}));
  if (shape_.one_hot) {
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_rgnn_typed_embed_bwd, {&dy, &g.uniq_ptr, &g.uniq_src, &graph_->row_id}, {&dw}));
  } else {
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_rgnn_typed_linear_bwd, {&dy, &x, &w, &g.uniq_ptr, &g.uniq_src}, {dx_out, &dw}));
  }
  return ProjectGradient();
}

std::vector<RgcnLayer::Shape> RgcnLayer::Shapes(const RgnnSettings& settings, const ModelShape& model) {
  std::vector<Shape> shapes;
  for (int l = 0; l < settings.layers; ++l) {
    Shape s;
    s.index = l;
    s.in_dim = l == 0 ? model.input_dim : settings.hidden;
    s.out_dim = l == settings.layers - 1 ? model.classes : settings.hidden;
    s.one_hot = l == 0 && settings.input == ModelInput::kOneHot;
    s.weights = WeightsFor(settings, s.in_dim, s.out_dim);
    s.num_bases_or_blocks = settings.num_bases > 0 ? settings.num_bases : settings.num_blocks;
    s.reordering = settings.reordering;
    s.row_gradient = s.one_hot && s.weights == Weights::kFull && s.reordering == Reordering::kOn &&
                     model.workers == 1 && model.full_graph;
    shapes.push_back(s);
  }
  return shapes;
}

namespace {

class Rgcn final : public RgnnModel {
 public:
  std::string_view name() const override { return "rgcn"; }

  std::vector<SettingProblem> Check(const RgnnSettings& s, const ModelShape& model) const override {
    std::vector<SettingProblem> problems;
    if (s.num_bases > 0 && s.num_blocks > 0) {
      problems.push_back({"model.num_blocks", "model.num_bases",
                          StrCat("model.num_bases = ", s.num_bases, " and model.num_blocks = ", s.num_blocks,
                                 ": choose one decomposition of the relation weights")});
    }
    if (s.heads != 1) {
      problems.push_back(
          {"model.heads", "", StrCat("model.heads = ", s.heads, ": RGCN has no attention heads; use 1")});
    }
    // The widths are known once the graph is (not in `tessel validate`).
    if (s.num_blocks > 0 && model.input_dim > 0 && model.classes > 0 && BlockedLayers(s, model).empty()) {
      problems.push_back(
          {"model.num_blocks", "",
           StrCat("model.num_blocks = ", s.num_blocks, " divides the widths of no layer (input ", model.input_dim,
                  ", hidden ", s.hidden, ", classes ", model.classes, "): every layer would keep its full weights")});
    }
    return problems;
  }

  std::vector<std::string> Notes(const RgnnSettings& s, const ModelShape& model) const override {
    const std::string blocked = BlockedLayers(s, model);
    if (s.num_blocks == 0 || blocked.empty()) return {};
    return {
        StrCat("block-diagonal weights (", s.num_blocks, " blocks) on layer(s) ", blocked, "; full weights elsewhere")};
  }

  std::vector<const tessel_op_decl*> Ops(const RgnnSettings& s, const ModelShape& model) const override {
    std::vector<const tessel_op_decl*> ops;
    for (const RgcnLayer::Shape& shape : RgcnLayer::Shapes(s, model)) {
      for (const tessel_op_decl* op : RgcnLayer::Ops(shape)) ops.push_back(op);
    }
    ops.push_back(&tessel_op_nn_relu_fwd);
    ops.push_back(&tessel_op_nn_relu_bwd);
    return ops;
  }

  Result<ModelLayers> Build(const RgnnSettings& s, const ModelShape& model, const GraphView& graph, KernelSet& kernels,
                            ParameterStore& params) const override {
    ModelLayers out;
    for (const RgcnLayer::Shape& shape : RgcnLayer::Shapes(s, model)) {
      TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<RgcnLayer> layer, RgcnLayer::Create(shape, graph, kernels, params));
      out.layers.push_back(std::move(layer));
    }
    return out;
  }

  // Without reordering the layers apply W_r per unique (relation, source) pair.
  bool ReadsRelationPairs(const RgnnSettings& s) const override { return s.reordering == Reordering::kOff; }
  bool KeepsPairBuffers(const RgnnSettings& s) const override { return ReadsRelationPairs(s); }
  bool ReadsEdgePairs(const RgnnSettings&) const override { return false; }
  // The fused layer sums over segments of input rows: a block of them at a time adds up to the whole.
  bool StreamsHalo(const RgnnSettings& s) const override { return s.reordering == Reordering::kOn; }

 private:
  // The layers whose widths the blocks divide, "0, 1".
  static std::string BlockedLayers(const RgnnSettings& s, const ModelShape& model) {
    std::string blocked;
    for (const RgcnLayer::Shape& shape : RgcnLayer::Shapes(s, model)) {
      if (shape.weights == RgcnLayer::Weights::kBlocks) blocked += StrCat(blocked.empty() ? "" : ", ", shape.index);
    }
    return blocked;
  }
};

}  // namespace

const RgnnModel& RgcnModel() {
  static const Rgcn model;
  return model;
}

}  // namespace tessel::workers
