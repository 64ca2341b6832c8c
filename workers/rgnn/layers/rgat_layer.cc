#include "workers/rgnn/layers/rgat_layer.h"

#include <tessel/ops/rgnn.h>

namespace tessel::workers {

RgatLayer::RgatLayer(const Shape& shape, const FullGraphSource& graph, const KernelSet& kernels, ParameterStore& params)
    : shape_(shape), graph_(graph), k_(kernels), params_(params) {
  const Decay decay = shape.index == 0 ? Decay::kL2 : Decay::kNone;
  const std::string prefix = StrCat("layer", shape.index, ".");
  const int64_t R = graph.num_relations(), F = shape.heads * shape.head_dim;
  weight_ = params.Add({prefix + "weight", {R, shape.in_dim, F}, ParamInit::kGlorot, decay});
  att_src_ = params.Add({prefix + "att_src", {R, shape.heads, shape.head_dim}, ParamInit::kGlorot, decay});
  att_dst_ = params.Add({prefix + "att_dst", {R, shape.heads, shape.head_dim}, ParamInit::kGlorot, decay});
}

std::vector<const tessel_op_decl*> RgatLayer::Ops(const Shape& shape) {
  if (shape.one_hot) return {&tessel_op_rgnn_rgat_embed_fwd, &tessel_op_rgnn_rgat_embed_bwd};
  return {&tessel_op_rgnn_rgat_fwd, &tessel_op_rgnn_rgat_bwd};
}

Status RgatLayer::EnsureBuffers() {
  if (s_src_.raw() != nullptr) return Status();
  Allocator& alloc = *params_.device().allocator;
  const SegmentLayout& g = graph_.segments();
  const int64_t H = shape_.heads, F = H * shape_.head_dim, N = graph_.num_owned();
  const int64_t head_rows = shape_.merge == RgnnHeadMerge::kMean ? N : 0;
  TESSEL_ASSIGN_OR_RETURN(heads_, Tensor::Empty(DType::kF32, {head_rows, F}, alloc));
  TESSEL_ASSIGN_OR_RETURN(s_src_, Tensor::Empty(DType::kF32, {g.num_pairs, H}, alloc));
  TESSEL_ASSIGN_OR_RETURN(s_dst_, Tensor::Empty(DType::kF32, {g.num_segs, H}, alloc));
  TESSEL_ASSIGN_OR_RETURN(row_max_, Tensor::Empty(DType::kF32, {N, H}, alloc));
  TESSEL_ASSIGN_OR_RETURN(row_sum_, Tensor::Empty(DType::kF32, {N, H}, alloc));
  return Status();
}

namespace {

tessel_rgat_params Params(const RgatLayer::Shape& s) {
  return tessel_rgat_params{sizeof(tessel_rgat_params), s.heads, s.merge == RgnnHeadMerge::kMean ? 1 : 0,
                            s.reordering == Reordering::kOn ? 1 : 0, 0.2f};
}

}  // namespace

Status RgatLayer::Forward(const Tensor& x, Tensor& out) {
  TESSEL_RETURN_IF_ERROR(EnsureBuffers());
  const SegmentLayout& g = graph_.segments();
  const Tensor &w = params_.value(weight_), &as = params_.value(att_src_), &ad = params_.value(att_dst_);
  std::vector<const Tensor*> in = shape_.one_hot ? std::vector<const Tensor*>{&w, &graph_.row_id(), &as, &ad}
                                                 : std::vector<const Tensor*>{&x, &w, &as, &ad};
  g.AppendDst(in);
  in.push_back(&g.dedge_pair);
  g.AppendSrc(in);
  if (shape_.merge == RgnnHeadMerge::kConcat) out_copy_ = out;  // the heads, for backward
  return k_.Call(shape_.one_hot ? tessel_op_rgnn_rgat_embed_fwd : tessel_op_rgnn_rgat_fwd, in,
                 {&out, &heads_, &s_src_, &s_dst_, &row_max_, &row_sum_}, Params(shape_));
}

Status RgatLayer::Backward(Tensor& dout, const Tensor& x, Tensor* dx) {
  TESSEL_RETURN_IF_ERROR(EnsureBuffers());
  const SegmentLayout& g = graph_.segments();
  const Tensor &w = params_.value(weight_), &as = params_.value(att_src_), &ad = params_.value(att_dst_);
  // The per-head outputs: their own buffer with mean merge, the layer's output (still intact: the
  // executor keeps each layer's output until its backward) with concat.
  const Tensor& heads = shape_.merge == RgnnHeadMerge::kMean ? heads_ : out_copy_;
  std::vector<const Tensor*> in = shape_.one_hot ? std::vector<const Tensor*>{&dout, &w, &graph_.row_id(), &as, &ad}
                                                 : std::vector<const Tensor*>{&dout, &x, &w, &as, &ad};
  for (const Tensor* t : std::initializer_list<const Tensor*>{&heads, &s_src_, &s_dst_, &row_max_, &row_sum_}) {
    in.push_back(t);
  }
  g.AppendDst(in);
  in.push_back(&g.dedge_pair);
  g.AppendSrc(in);
  Tensor &dw = params_.grad(weight_), &das = params_.grad(att_src_), &dad = params_.grad(att_dst_);
  if (shape_.one_hot) return k_.Call(tessel_op_rgnn_rgat_embed_bwd, in, {&dw, &das, &dad}, Params(shape_));
  Tensor no_dx = Tensor::Borrow(nullptr, DType::kF32, {0, shape_.in_dim}, params_.device().device);
  return k_.Call(tessel_op_rgnn_rgat_bwd, in, {dx != nullptr ? dx : &no_dx, &dw, &das, &dad}, Params(shape_));
}

}  // namespace tessel::workers
