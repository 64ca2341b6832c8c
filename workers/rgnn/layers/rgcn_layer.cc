#include "workers/rgnn/layers/rgcn_layer.h"

#include <tessel/ops/rgnn.h>

namespace tessel::workers {

RgcnLayer::RgcnLayer(int index, int64_t in_dim, int64_t out_dim, bool one_hot, const FullGraphSource& graph,
                     const KernelSet& kernels, ParameterStore& params)
    : in_dim_(in_dim), out_dim_(out_dim), one_hot_(one_hot), graph_(graph), k_(kernels), params_(params) {
  weight_ = params.Add({StrCat("layer", index, ".weight"), {graph.num_relations(), in_dim, out_dim},
                        ParamInit::kGlorot, index == 0 ? Decay::kL2 : Decay::kNone});
}

std::vector<const tessel_op_decl*> RgcnLayer::Ops(bool one_hot) {
  if (one_hot) return {&tessel_op_rgnn_typed_embed_fwd, &tessel_op_rgnn_typed_embed_bwd, &tessel_op_rgnn_aggregate_fwd,
                       &tessel_op_rgnn_aggregate_bwd};
  return {&tessel_op_rgnn_typed_linear_fwd, &tessel_op_rgnn_typed_linear_bwd, &tessel_op_rgnn_aggregate_fwd,
          &tessel_op_rgnn_aggregate_bwd};
}

Status RgcnLayer::EnsureBuffers() {
  if (y_.defined() && y_.ndim() == 2) return Status();
  TESSEL_ASSIGN_OR_RETURN(y_, Tensor::Empty(DType::kF32, {graph_.layout().num_uniq, out_dim_},
                                            *params_.device().allocator));
  return Status();
}

Status RgcnLayer::Forward(const Tensor& x, Tensor& out) {
  TESSEL_RETURN_IF_ERROR(EnsureBuffers());
  const RelationLayout& g = graph_.layout();
  const Tensor& w = params_.value(weight_);
  if (one_hot_) {
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_typed_embed_fwd, {&w, &g.uniq_ptr, &g.uniq_src, &graph_.row_id()}, {&y_}));
  } else {
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_typed_linear_fwd, {&x, &w, &g.uniq_ptr, &g.uniq_src}, {&y_}));
  }
  return k_.Call(tessel_op_rgnn_aggregate_fwd, {&y_, &g.edge_uniq, &g.norm, &g.dst_ptr, &g.dst_edges}, {&out});
}

// Backward reuses the forward buffer: dY overwrites Y (no backward kernel reads Y).
Status RgcnLayer::Backward(Tensor& dout, const Tensor& x, Tensor* dx) {
  TESSEL_RETURN_IF_ERROR(EnsureBuffers());
  const RelationLayout& g = graph_.layout();
  Tensor& dy = y_;
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_aggregate_bwd, {&dout, &g.dst, &g.norm, &g.uniq_edge_ptr}, {&dy}));
  Tensor& dw = params_.grad(weight_);
  if (one_hot_) {
    return k_.Call(tessel_op_rgnn_typed_embed_bwd, {&dy, &g.uniq_ptr, &g.uniq_src, &graph_.row_id()}, {&dw});
  }
  const Tensor& w = params_.value(weight_);
  if (dx != nullptr) {
    return k_.Call(tessel_op_rgnn_typed_linear_bwd, {&dy, &x, &w, &g.uniq_ptr, &g.uniq_src}, {dx, &dw});
  }
  Tensor no_dx = Tensor::Borrow(nullptr, DType::kF32, {0, in_dim_}, params_.device().device);
  return k_.Call(tessel_op_rgnn_typed_linear_bwd, {&dy, &x, &w, &g.uniq_ptr, &g.uniq_src}, {&no_dx, &dw});
}

}  // namespace tessel::workers
