// RGCN layer (Schlichtkrull et al. 2018; workers/rgnn/MODELS.md "RGCN"):
//   h_i = sum_r sum_{j in N_r(i)} (1 / |N_r(i)|) X_j W_r
// With reordering on (the default) through the fused kernels over the segment layout: each (relation,
// destination) segment's inputs are aggregated first and W_r is applied to the aggregate, tile by tile, so
// nothing of size pairs x width is ever held. With it off, through the compact kernels: the typed linear
// once per unique (relation, source) pair into a [pairs, out] tensor, then the normalised aggregation.
// W_r is a parameter of its own, or is made from fewer (MODELS.md: basis or block-diagonal decomposition):
// it is then formed for each forward pass, and its gradient projected back onto the bases or blocks.
#pragma once

#include <memory>
#include <vector>

#include "workers/kernel_set.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/layers/layer.h"
#include "workers/rgnn/model.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

class RgcnLayer final : public RgnnLayer {
 public:
  enum class Weights { kFull, kBases, kBlocks };
  struct Shape {
    int index = 0;  // the layer's position: parameters are "layer<index>.*", decayed when 0
    int64_t in_dim = 0, out_dim = 0;
    bool one_hot = false;  // reads the source rows' global ids instead of x; in_dim is the number of nodes
    Weights weights = Weights::kFull;
    int32_t num_bases_or_blocks = 0;
    Reordering reordering = Reordering::kOn;
    // One-hot, full weights, reordering on and a single worker: the weight's gradient is kept as one row
    // per (relation, source) pair (ParameterSpec::row_of) instead of a mostly-zero [R, nodes, out] tensor.
    bool row_gradient = false;
  };
  // How `settings` decomposes the weights of a layer of this width (blocks only where they divide it).
  static Weights WeightsFor(const RgnnSettings& settings, int64_t in_dim, int64_t out_dim);

  // The layers of `settings` for the model's widths and worker count (a one-worker full-graph job keeps a
  // one-hot layer's weight gradient as rows: Shape::row_gradient).
  static std::vector<Shape> Shapes(const RgnnSettings& settings, const ModelShape& model);

  // Declares the layer's parameters in `params` (before it is allocated).
  // A row gradient reads `graph`'s pairs, so the layer must then always be bound to that view.
  static Result<std::unique_ptr<RgcnLayer>> Create(const Shape& shape, const GraphView& graph, const KernelSet& kernels,
                                                   ParameterStore& params);
  static std::vector<const tessel_op_decl*> Ops(const Shape& shape);

  int64_t out_dim() const override { return shape_.out_dim; }
  Status Forward(const Tensor& x, Tensor& out) override;
  Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) override;
  Status BackwardAdd(Tensor& dout, const Tensor& x, Tensor* dx) override;
  int64_t BufferBytes(std::set<const void*>& counted) const override { return y_buf_.CountOnce(counted); }

 private:
  RgcnLayer(const Shape& shape, const GraphView& graph, const KernelSet& kernels, ParameterStore& params,
            std::vector<int32_t> row_of);
  // The dense W [R, in, out] for this step (the parameter itself, or made from the bases or blocks).
  Result<const Tensor*> DenseWeight();
  // The gradient of the dense W: the parameter's own, or a buffer projected by ProjectGradient.
  Tensor& DenseGradient();
  Status ProjectGradient();
  Status EnsureBuffer(Tensor& t, std::vector<int64_t> shape);
  // The fused kernels' backward (reordering on, no row gradient) into the dense gradient `dw`.
  Status FusedBackward(const Tensor& dout, const Tensor& x, Tensor* dx, Tensor& dw);

  Shape shape_;
  int64_t relations_ = 0;
  const KernelSet& k_;
  ParameterStore& params_;
  size_t weight_ = 0, coef_ = 0;  // "weight" | "bases" (+ "coef") | "blocks"
  Tensor w_dense_, dw_dense_;     // for decomposed weights
  Tensor dw_block_;               // BackwardAdd: one block's dense gradient
  Tensor y_;                      // reordering off: the [pairs, out] products, reused for their gradient
  GrowBuffer y_buf_;
};

// model.name = "rgcn": RGCN layers with a ReLU between them.
const RgnnModel& RgcnModel();

}  // namespace tessel::workers
