// RGAT layer (workers/rgnn/MODELS.md "RGAT"): per relation W_r, att_src_r, att_dst_r; attention logits
// LeakyReLU(att_src . (h_j W_r) + att_dst . (h_i W_r)) normalised by a softmax over all the edges into a
// destination (across relations); messages h_j W_r; heads concatenated or averaged. Through the fused
// rgnn.rgat.* kernels (or rgnn.rgat_embed.* for a one-hot input), which aggregate before applying W_r and
// keep only per-pair and per-segment logits and per-row softmax statistics for backward.
#pragma once

#include "workers/kernel_set.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/layers/layer.h"
#include "workers/rgnn/model.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

class RgatLayer final : public RgnnLayer {
 public:
  struct Shape {
    int index = 0;
    int64_t in_dim = 0;
    int32_t heads = 1;
    int64_t head_dim = 0;  // D'
    HeadMerge merge = HeadMerge::kConcat;
    bool one_hot = false;
    Reordering reordering = Reordering::kOn;
    int64_t out_dim() const { return merge == HeadMerge::kConcat ? heads * head_dim : head_dim; }
  };
  // The layers of `settings` for the model's widths: hidden layers split (concat) or repeat (mean) the
  // width across the heads; the last averages heads as wide as the classes.
  static std::vector<Shape> Shapes(const RgnnSettings& settings, const ModelShape& model);
  RgatLayer(const Shape& shape, const GraphView& graph, const KernelSet& kernels, ParameterStore& params);
  static std::vector<const tessel_op_decl*> Ops(const Shape& shape);

  int64_t out_dim() const override { return shape_.out_dim(); }
  bool reads_own_output() const override { return shape_.merge == HeadMerge::kConcat; }
  Status Bind(const GraphView& graph) override;
  Status Forward(const Tensor& x, Tensor& out) override;
  Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) override;
  int64_t BufferBytes(std::set<const void*>& counted) const override {
    return heads_buf_.CountOnce(counted) + s_src_buf_.CountOnce(counted) + s_dst_buf_.CountOnce(counted) +
           row_max_buf_.CountOnce(counted) + row_sum_buf_.CountOnce(counted);
  }

 private:
  Shape shape_;
  const KernelSet& k_;
  ParameterStore& params_;
  size_t weight_, att_src_, att_dst_;
  // Kept from forward for backward: per-head outputs (mean merge only), logits, softmax statistics.
  // Views of the bound graph's size into the buffers after them.
  Tensor heads_, s_src_, s_dst_, row_max_, row_sum_;
  GrowBuffer heads_buf_, s_src_buf_, s_dst_buf_, row_max_buf_, row_sum_buf_;
  Tensor out_copy_;  // concat merge: the output is the heads; backward reads them through this view
};

// model.name = "rgat": RGAT layers with a ReLU between them.
const RgnnModel& RgatModel();

}  // namespace tessel::workers
