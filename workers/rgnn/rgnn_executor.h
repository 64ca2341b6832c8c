// The RGNN executor: trains RGCN, RGAT or HGT, one epoch per step, on what its batch source gives it:
// the whole partition ("rgnn.full" assignments; the source exchanges the halo rows before each layer and
// their gradients after it) or sampled mini-batches ("rgnn.sampled", sampled_source.h). Per batch every
// worker runs the same model on its rows, one allreduce sums the parameter gradients, and the optimizer
// then updates identical replicas on every worker.
//
//   model     workers/rgnn/layers/ (one class per layer type) + ReLU between layers (RGCN, RGAT) or
//             a linear classifier after them (HGT), softmax cross-entropy on the training nodes
//   params    workers/params/parameter_store.h (parameters, gradients, Adam state: what a checkpoint saves)
//   batches   workers/rgnn/batch_source.h: full_graph_source.h (the partition, its layout and the halo
//             exchange) or sampled_source.h (mini-batches of sampled neighbourhoods)
//
// Ownership: borrows the ExecutorContext's pointers. Thread safety: one thread. Failure: Status.
#pragma once

#include <memory>
#include <vector>

#include "workers/executor.h"
#include "workers/kernel_set.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/batch_source.h"
#include "workers/rgnn/full_graph_source.h"
#include "workers/rgnn/layers/classifier.h"
#include "workers/rgnn/layers/layer.h"
#include "workers/rgnn/model.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

// The registry entry for "rgnn.full" (executor_registry.cc lists it).
ExecutorFactory RgnnFullGraphFactory();
// The registry entry for "rgnn.sampled".
ExecutorFactory RgnnSampledFactory();

class RgnnExecutor final : public Executor {
 public:
  // Full-graph training on `partition`.
  static Result<std::unique_ptr<RgnnExecutor>> Create(RgnnSettings settings, storage::WorkerPartition partition,
                                                      const ExecutorContext& context);
  // Training on any batch source. `shape_view` gives the relation and node-type counts (and, with a row
  // gradient, the one view every batch uses); it must outlive the executor.
  static Result<std::unique_ptr<RgnnExecutor>> Create(RgnnSettings settings, std::unique_ptr<BatchSource> source,
                                                      const GraphView& shape_view, ModelShape model,
                                                      const ExecutorContext& context);
  // Every op the model needs (forward, backward, loss, optimizer) for this shape; kInternal for a model
  // this build does not have.
  static Result<std::vector<const tessel_op_decl*>> RequiredOps(const RgnnSettings& settings, const ModelShape& shape);

  std::string_view step_unit() const override { return "epoch"; }
  MemoryUse Memory() const override;
  int64_t num_steps() const override { return settings_.epochs; }
  Result<StepResult> Step(int64_t step) override;
  Result<Record> Evaluate() override;
  Status SaveState(StateWriter& out) const override;
  Status LoadState(StateReader& in) override;

  ParameterStore& parameters() { return params_; }

 private:
  RgnnExecutor(RgnnSettings settings, const ExecutorContext& context);
  Status Build(std::unique_ptr<BatchSource> source, const GraphView& shape_view, ModelShape model);
  // Binds the layers to the batch's views and sizes the buffers for it.
  Status Shape(const Batch& batch);
  // The source's counts since the last call into the metrics, and this epoch's feature time.
  void PublishSource(const SourceFigures& now, monitoring::Metrics& metrics);
  Status Forward(const Batch& batch);
  // Loss over the rows of `mask`: sums (not means) over this worker's rows; dlogits scaled by `scale`.
  Status Loss(const Batch& batch, const Tensor& mask, double scale, double* loss_sum, int64_t* correct);
  Status Backward(const Batch& batch);
  // One optimizer step on `batch`: forward, loss, backward, gradient sum, update.
  Status TrainBatch(const Batch& batch, double* loss_sum, int64_t* correct, double* forward_s, double* backward_s);
  const Tensor& LayerInput(const Batch& batch, size_t l) const;
  // A streamed halo's round k: the peer's block of layer l's input (none with a one-hot input).
  Result<Tensor> FetchBlock(const Batch& batch, size_t l, int k);
  Status AddInto(Tensor& sum, const Tensor& part);  // sum += part, elementwise
  // The activation between layers (the model's ModelLayers::relu_between).
  enum class Activation { kRelu, kIdentity };

  RgnnSettings settings_;
  ExecutorContext context_;
  std::unique_ptr<BatchSource> source_;
  std::unique_ptr<KernelSet> kernels_;
  ParameterStore params_;
  AdamOptimizer adam_;
  std::vector<std::unique_ptr<RgnnLayer>> layers_;
  std::unique_ptr<Classifier> classifier_;  // when the model has one (HGT)
  Activation activation_ = Activation::kRelu;
  // Views, sized by Shape() for the current batch, of the buffers after them.
  std::vector<Tensor> out_;      // per layer: its output [owned, out] (with no activation, a view of hidden_)
  std::vector<Tensor> dout_;     // per layer < L-1 whose backward reads its own output: its gradient's buffer
  Tensor logits_, dlast_;        // with a classifier: its output, and the last layer's output gradient
  std::vector<Tensor> hidden_;   // per layer l < L-1: layer l+1's input [rows, out] (halo rows filled)
  std::vector<Tensor> dhidden_;  // their gradients
  Tensor dlogits_;
  std::vector<GrowBuffer> out_buf_, dout_buf_, hidden_buf_, dhidden_buf_;
  GrowBuffer logits_buf_, dlast_buf_, dlogits_buf_;
  GrowBuffer block_buf_, dblock_buf_;  // a streamed halo's block of a layer's input rows, and its gradient
  bool halo_rows_zeroed_ = false;
  bool full_graph_ = true;
  int64_t classes_ = 0;
  Tensor loss_, correct_;  // the loss kernel's outputs, on the device
  double last_train_accuracy_ = 0;
  SourceFigures published_;  // the source's counts as the metrics last had them
};

}  // namespace tessel::workers
