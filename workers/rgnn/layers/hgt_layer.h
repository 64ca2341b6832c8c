// HGT layer (workers/rgnn/MODELS.md "HGT", after PyG's HGTConv; its biases with model.bias): per node
// type K, Q, V linears; the fused rgnn.hgt.* kernels for the relation-aware attention and aggregation (W_att applied
// to q once per segment, W_msg after the aggregation); GELU; a per-node-type output linear; and, when the
// input and output widths match, the gated skip connection (rgnn.typed_gate.*). With a one-hot input, the
// K, Q, V linears are per-type tables read with nn.embedding.
// Rows of a node type form a few contiguous ranges (GraphView::type_runs), so each typed linear is
// one nn.gemm per range, and its bias, when it has one, one more (a ones column times the bias row).
#pragma once

#include <memory>

#include "workers/kernel_set.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/layers/layer.h"
#include "workers/rgnn/model.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

// HGT's own job key (core/model_keys.h): registered with the model, read from RgnnSettings::options.
inline constexpr ModelKey kHgtBias = ModelKey::Boolean(
    "model.bias", false, "HGT: per-node-type biases on K, Q, V and the output linear, as PyG's HGTConv has.");

class HgtLayer final : public RgnnLayer {
 public:
  struct Shape {
    int index = 0;
    int64_t in_dim = 0, out_dim = 0;
    int32_t heads = 1;
    bool one_hot = false;
    bool bias = false;  // per-type biases on K, Q, V and the output linear
    Reordering reordering = Reordering::kOn;
    bool skip() const { return in_dim == out_dim && !one_hot; }  // MODELS.md: no skip from a one-hot input
  };
  // Buffers the HGT layers of a model share: a layer uses them only within its own Forward or Backward
  // (one layer runs at a time), so the model holds one set, not one per layer. K, Q and V are not kept
  // between the passes: Forward computes them into `k` and `v` ([rows, out]) and `q` ([owned, out]), and
  // Backward computes them again (three typed linears; at hidden 64 on a 21M-edge graph that is ~1% of
  // the epoch and saves 3 x rows x out floats per layer). Backward's gradient chain reuses the rest as
  // each gradient dies: `a` holds dO then dAgg, `b` the skip path's spare dX, then dGELU, then dQ
  // ([owned, out]); `c` GELU's output (recomputed in Backward), then dK; `e` dV ([rows, out]).
  // The buffers grow to the largest layer and mini-batch; each layer takes views of its own size.
  struct Scratch {
    Tensor a, b, c, e, k, q, v;
    GrowBuffer a_buf, b_buf, c_buf, e_buf, k_buf, q_buf, v_buf;
    // Views for a layer of `rows` input rows, `owned` output rows and width `width`.
    Status Shape(int64_t rows, int64_t owned, int64_t width, DType dtype, Allocator& alloc);
  };
  // The layers of `settings` for the model's input width (every layer outputs `hidden`; a classifier
  // follows).
  static std::vector<Shape> Shapes(const RgnnSettings& settings, const ModelShape& model);
  HgtLayer(const Shape& shape, const GraphView& graph, const KernelSet& kernels, ParameterStore& params,
           std::shared_ptr<Scratch> scratch);
  static std::vector<const tessel_op_decl*> Ops(const Shape& shape);

  int64_t out_dim() const override { return shape_.out_dim; }
  Status Bind(const GraphView& graph) override;
  Status Forward(const Tensor& x, Tensor& out) override;
  Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) override;
  int64_t BufferBytes(std::set<const void*>& counted) const override {
    int64_t n = agg_buf_.CountOnce(counted) + row_max_buf_.CountOnce(counted) + row_sum_buf_.CountOnce(counted) +
                o_buf_.CountOnce(counted) + one_hot_ids_buf_.CountOnce(counted) + ones_buf_.CountOnce(counted);
    if (scratch_ != nullptr) {
      for (const GrowBuffer* b : {&scratch_->a_buf, &scratch_->b_buf, &scratch_->c_buf, &scratch_->e_buf,
                                  &scratch_->k_buf, &scratch_->q_buf, &scratch_->v_buf}) {
        n += b->CountOnce(counted);
      }
    }
    return n;
  }

 private:
  // Whether a typed linear reads the layer's input (one-hot for a one-hot layer) or a dense tensor.
  enum class Source { kLayerInput, kDense };
  // A typed linear's parameters: W [T, in, out] and, with model.bias, b [T, out] (else kNoBias).
  static constexpr size_t kNoBias = static_cast<size_t>(-1);
  struct Linear {
    size_t w = 0, b = kNoBias;
  };
  Linear AddLinear(ParameterStore& params, const std::string& name, int64_t types, int64_t in, int64_t out,
                   Decay decay) const;
  // y[rows] = x[rows] W[type] (+ b[type]) for every type range of the first `rows` rows (one-hot: table
  // lookups).
  Status TypedLinear(Source source, const Tensor& x, Linear linear, int64_t rows, Tensor& y);
  // dW[type] = x^T dy (and db[type] = the column sums of dy) over the ranges of that type (overwritten),
  // and, when dx is given, dx = dy W^T on its rows, added to what rows [0, accumulated_rows) already hold.
  Status TypedLinearBackward(Source source, const Tensor& x, Linear linear, int64_t rows, const Tensor& dy, Tensor* dx,
                             int64_t accumulated_rows);
  // The shared scratch's views for this layer.
  Status ShapeScratch();
  // K, Q, V of the layer input into the scratch.
  Status KeysQueriesValues(const Tensor& x);

  Shape shape_;
  const KernelSet& k_;
  ParameterStore& params_;
  Linear key_, query_, value_, out_;
  size_t skip_ = 0, att_, msg_, prior_;
  // What Backward reads of Forward: the aggregate, its softmax statistics and, with the skip, the output
  // linear's result O [owned, out]. K, Q, V and GELU's output are recomputed.
  Tensor agg_, row_max_, row_sum_, o_;
  GrowBuffer agg_buf_, row_max_buf_, row_sum_buf_, o_buf_;
  std::shared_ptr<Scratch> scratch_;
  Tensor one_hot_ids_;  // i64[rows]: type * nodes + global id, the rows of the per-type tables
  GrowBuffer one_hot_ids_buf_;
  Tensor ones_;  // f32[rows, 1] of ones, with biases: the column that multiplies a bias row
  GrowBuffer ones_buf_;
  int64_t ones_rows_ = 0;  // how many rows of ones_buf_ hold ones
};

// model.name = "hgt": HGT layers (no activation between them: each ends in GELU), then a linear classifier.
const RgnnModel& HgtModel();

}  // namespace tessel::workers
