// A toy RGNN model, "mean", defined outside the tree's model list: each relation's neighbours averaged
// (RGCN's normalisation), summed over the relations, through ONE weight shared by every relation. It
// proves that a model is a layer file and its ops (DESIGN.md "Executors"): this file is the whole model,
// its ops are rgnn.rgcn.fwd/bwd and nn.add from the built-in plugins, and it reaches `tessel run` through
// the one registration line at the bottom. Its job key, model.mean_relu, is declared here too, and the
// registration makes it a key of the job schema (core/model_keys.h). Nothing in jobs/, the planners, the
// settings or the executors names the model or its key. Test-only: linked into tessel-toy-model
// (tests/integration/toy_model.sh).
#include <tessel/ops/nn.h>
#include <tessel/ops/rgnn.h>

#include <memory>

#include "workers/rgnn/model_registry.h"

namespace tessel::workers {
namespace {

constexpr ModelKey kMeanRelu =
    ModelKey::Boolean("model.mean_relu", true, "mean (a test model): a ReLU between the layers; false = linear.");

class MeanLayer final : public RgnnLayer {
 public:
  MeanLayer(int index, int64_t in_dim, int64_t out_dim, int64_t relations, const KernelSet& kernels,
            ParameterStore& params)
      : in_dim_(in_dim), out_dim_(out_dim), relations_(relations), k_(kernels), params_(params) {
    weight_ = params.Add({StrCat("layer", index, ".weight"),
                          {in_dim, out_dim},
                          ParamInit::kWeight,
                          index == 0 ? Decay::kL2 : Decay::kNone});
  }

  int64_t out_dim() const override { return out_dim_; }

  Status Forward(const Tensor& x, Tensor& out) override {
    TESSEL_RETURN_IF_ERROR(Expand());
    const SegmentLayout& g = graph_->segments;
    std::vector<const Tensor*> in = {&x, &w_all_, &g.seg_norm};
    g.AppendDst(in);
    return k_.Call(tessel_op_rgnn_rgcn_fwd, in, {&out});
  }

  Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) override {
    const SegmentLayout& g = graph_->segments;
    TESSEL_RETURN_IF_ERROR(Buffer(dw_all_));
    Tensor no_dx = Tensor::Borrow(nullptr, DType::kF32, {0, in_dim_}, params_.device().device);
    std::vector<const Tensor*> in = {&dout, &x, &w_all_, &g.seg_norm, &g.seg_dst};
    g.AppendSrc(in);
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_rgcn_bwd, in, {dx != nullptr ? dx : &no_dx, &dw_all_}));
    // The shared weight's gradient: the sum of every relation's.
    Tensor& grad = params_.grad(weight_);
    const int64_t n = in_dim_ * out_dim_;
    Tensor flat = ViewOf(grad, {n});
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(grad.raw(), grad.device(), dw_all_.raw(), dw_all_.device(), grad.nbytes(), params_.device().stream));
    for (int64_t r = 1; r < relations_; ++r) {
      Tensor part = Tensor::Borrow(dw_all_.data<float>() + r * n, DType::kF32, {n}, dw_all_.device());
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_add, {&flat, &part}, {&flat}));
    }
    return Status();
  }

 private:
  Status Buffer(Tensor& t) {
    if (t.numel() == relations_ * in_dim_ * out_dim_) return Status();
    TESSEL_ASSIGN_OR_RETURN(t,
                            Tensor::Empty(DType::kF32, {relations_, in_dim_, out_dim_}, *params_.device().allocator));
    return Status();
  }
  // The shared weight, once per relation: the layout the RGCN kernels read.
  Status Expand() {
    TESSEL_RETURN_IF_ERROR(Buffer(w_all_));
    const Tensor& w = params_.value(weight_);
    for (int64_t r = 0; r < relations_; ++r) {
      TESSEL_RETURN_IF_ERROR(CopyMemory(w_all_.data<float>() + r * in_dim_ * out_dim_, w_all_.device(), w.raw(),
                                        w.device(), w.nbytes(), params_.device().stream));
    }
    return Status();
  }

  int64_t in_dim_, out_dim_, relations_;
  const KernelSet& k_;
  ParameterStore& params_;
  size_t weight_;
  Tensor w_all_, dw_all_;
};

class MeanModel final : public RgnnModel {
 public:
  std::string_view name() const override { return "mean"; }
  std::vector<const ModelKey*> Keys() const override { return {&kMeanRelu}; }

  std::vector<SettingProblem> Check(const RgnnSettings& s, const ModelShape&) const override {
    std::vector<SettingProblem> problems = DecompositionProblems(s, name());
    if (s.input != ModelInput::kFeatures && s.input != ModelInput::kAuto) {
      problems.push_back({"model.input", "", "the \"mean\" model reads node features; use model.input = \"features\""});
    }
    return problems;
  }

  std::vector<const tessel_op_decl*> Ops(const RgnnSettings&, const ModelShape&) const override {
    return {&tessel_op_rgnn_rgcn_fwd, &tessel_op_rgnn_rgcn_bwd, &tessel_op_nn_add, &tessel_op_nn_relu_fwd,
            &tessel_op_nn_relu_bwd};
  }

  Result<ModelLayers> Build(const RgnnSettings& s, const ModelShape& shape, const GraphView& graph, KernelSet& kernels,
                            ParameterStore& params) const override {
    if (s.input != ModelInput::kFeatures) {
      return UsageError("the \"mean\" model reads node features, and this graph has none");
    }
    ModelLayers out;
    for (int l = 0; l < s.layers; ++l) {
      const int64_t in = l == 0 ? shape.input_dim : s.hidden, width = l + 1 == s.layers ? shape.classes : s.hidden;
      out.layers.push_back(std::make_unique<MeanLayer>(l, in, width, graph.relations, kernels, params));
    }
    out.relu_between = kMeanRelu.Of<bool>(s.options);
    return out;
  }
};

const MeanModel kMeanModel;
[[maybe_unused]] const bool kRegistered = RegisterRgnnModel(&kMeanModel);  // the one registration line

}  // namespace
}  // namespace tessel::workers
