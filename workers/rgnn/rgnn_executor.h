// The full-graph RGNN executor ("rgnn.full" assignments): trains RGCN, RGAT or HGT on one partition,
// one epoch per step. Every worker runs the same model on its partition: the batch source exchanges the
// halo rows before each layer and their gradients after it, one allreduce sums the parameter gradients,
// and the optimizer then updates identical replicas on every worker.
//
//   model     workers/rgnn/layers/ (one class per layer type) + ReLU between layers (RGCN, RGAT) or
//             a linear classifier after them (HGT), softmax cross-entropy on the training nodes
//   params    workers/params/parameter_store.h (parameters, gradients, Adam state: what a checkpoint saves)
//   batches   workers/rgnn/full_graph_source.h (the partition, its layout and the halo exchange)
//
// Ownership: borrows the ExecutorContext's pointers. Thread safety: one thread. Failure: Status.
#pragma once

#include <memory>
#include <vector>

#include "workers/executor.h"
#include "workers/executor_registry.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/full_graph_source.h"
#include "workers/rgnn/kernel_set.h"
#include "workers/rgnn/layers/classifier.h"
#include "workers/rgnn/layers/hgt_layer.h"
#include "workers/rgnn/layers/layer.h"
#include "workers/rgnn/layers/rgat_layer.h"
#include "workers/rgnn/layers/rgcn_layer.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

// The registry entry for "rgnn.full" (executor_registry.cc lists it).
ExecutorFactory RgnnFullGraphFactory();

class RgnnExecutor final : public Executor {
 public:
  static Result<std::unique_ptr<RgnnExecutor>> Create(RgnnSettings settings, storage::WorkerPartition partition,
                                                      const ExecutorContext& context);
  // Every op a model needs on a device (forward, backward, loss, optimizer) with this many workers.
  static std::vector<const tessel_op_decl*> RequiredOps(const RgnnSettings& settings, int64_t input_dim,
                                                        int64_t num_classes, int32_t num_workers);
  // The RGCN layers of `settings` for this input width, class count and worker count.
  static std::vector<RgcnLayer::Shape> RgcnShapes(const RgnnSettings& settings, int64_t input_dim, int64_t num_classes,
                                                  int32_t num_workers);
  static std::vector<RgatLayer::Shape> RgatShapes(const RgnnSettings& settings, int64_t input_dim, int64_t num_classes);
  static std::vector<HgtLayer::Shape> HgtShapes(const RgnnSettings& settings, int64_t input_dim);

  std::string_view step_unit() const override { return "epoch"; }
  int64_t num_steps() const override { return settings_.epochs; }
  Result<StepResult> Step(int64_t step) override;
  Result<Record> Evaluate() override;
  Status SaveState(StateWriter& out) const override;
  Status LoadState(StateReader& in) override;

  ParameterStore& parameters() { return params_; }
  const FullGraphSource& graph() const { return *graph_; }

 private:
  RgnnExecutor(RgnnSettings settings, const ExecutorContext& context);
  Status Build(storage::WorkerPartition partition);
  Status Forward();
  // Loss over the rows of `mask`: sums (not means) over this worker's rows; dlogits scaled by `scale`.
  Status Loss(const Tensor& mask, double scale, double* loss_sum, int64_t* correct);
  Status Backward();
  const Tensor& LayerInput(size_t l) const;
  // The activation between layers: ReLU for RGCN and RGAT, none for HGT (its layers end in GELU).
  enum class Activation { kRelu, kIdentity };

  RgnnSettings settings_;
  ExecutorContext context_;
  std::unique_ptr<FullGraphSource> graph_;
  std::unique_ptr<KernelSet> kernels_;
  ParameterStore params_;
  AdamOptimizer adam_;
  std::vector<std::unique_ptr<RgnnLayer>> layers_;
  std::unique_ptr<Classifier> classifier_;  // HGT only
  Activation activation_ = Activation::kRelu;
  std::vector<Tensor> out_;      // per layer: its output [owned, out] (with no activation, a view of hidden_)
  std::vector<Tensor> dout_;     // per layer < L-1 whose backward reads its own output: its gradient's buffer
  Tensor logits_, dlast_;        // with a classifier: its output, and the last layer's output gradient
  std::vector<Tensor> hidden_;   // per layer l >= 1: its input [rows, in] (the activation, halo rows filled)
  std::vector<Tensor> dhidden_;  // their gradients
  Tensor dlogits_;
  Tensor loss_, correct_;  // the loss kernel's outputs, on the device
  int64_t halo_sent_seen_ = 0, halo_received_seen_ = 0;
};

}  // namespace tessel::workers
