#include "workers/rgnn/rgnn_executor.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "workers/rgnn/model_registry.h"
#include "workers/rgnn/sampled_source.h"

namespace tessel::workers {
namespace {

// A payload naming a model this worker's build lacks (the planner, on the coordinator, knew it).
Status UnknownModel(const std::string& name) {
  return InternalError(StrCat("model.name = \"", name,
                              "\" is not an rgnn model of this worker's build: do the ranks run "
                              "different builds?"));
}

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// A view of rows [0, rows) of a 2-D tensor.
Tensor Rows(const Tensor& t, int64_t rows) { return Tensor::Borrow(t.raw(), t.dtype(), {rows, t.dim(1)}, t.device()); }

std::unique_ptr<AssignmentPayload> Decode(ByteReader& in) { return DecodeRgnnAssignment(in); }

// The feature rows a sampled worker owns: from its partition, from the assignment, or from the graph file.
Result<std::unique_ptr<RowStore>> OpenRowStore(RgnnSampledAssignment& a, const ExecutorContext& context) {
  if (a.partitioned()) {
    storage::WorkerPartition& p = a.partition;
    if (p.feature_dim != a.feature_dim) {
      return BadDataError(StrCat("part ", p.part, ": features of width ", p.feature_dim, ", but the plan was made for ",
                                 a.feature_dim));
    }
    // The owned rows only: the halo's are another worker's to serve.
    std::vector<int64_t> ids(p.row_orig_id.begin(), p.row_orig_id.begin() + p.num_owned);
    p.features.resize(static_cast<size_t>(p.num_owned * p.feature_dim));
    p.features.shrink_to_fit();
    return std::unique_ptr<RowStore>(
        std::make_unique<MemoryRowStore>(std::move(ids), std::move(p.features), a.feature_dim));
  }
  std::vector<int64_t> owned;
  for (int64_t v = 0; v < a.graph->num_nodes; ++v) {
    if (a.graph->part_of[static_cast<size_t>(v)] == a.worker) owned.push_back(v);
  }
  switch (a.sampling.store) {
    case FeatureStoreChoice::kMemory: {
      if (static_cast<int64_t>(a.owned_features.size()) != static_cast<int64_t>(owned.size()) * a.feature_dim) {
        return BadDataError(StrCat("worker ", a.worker, ": ", a.owned_features.size(), " feature values for ",
                                   owned.size(), " owned nodes of width ", a.feature_dim));
      }
      return std::unique_ptr<RowStore>(
          std::make_unique<MemoryRowStore>(std::move(owned), std::move(a.owned_features), a.feature_dim));
    }
    default:
      break;
  }
  storage::FeatureStore::Options options;
  options.mode = a.sampling.store;
  // Pinned rows are page-locked where a GPU reads them in place; plain memory on CPU workers.
  options.allocator = context.device.device == Device::kCpu ? &HostAllocator() : &PinnedAllocator();
  TESSEL_ASSIGN_OR_RETURN(storage::FeatureStore store,
                          storage::FeatureStore::Open(a.sampling.graph_path, std::move(owned), options));
  if (store.feature_dim() != a.feature_dim) {
    return BadDataError(StrCat(a.sampling.graph_path, ": features of width ", store.feature_dim(),
                               ", but the plan was made for ", a.feature_dim, " (was the file replaced?)"));
  }
  // The gather plugin when it is loaded (a plain copy otherwise: the plugin is an accelerator, not a need).
  Result<const Kernel*> gather = context.kernels->Find("gather.rows", Device::kCpu);
  if (!gather.ok() && context.log != nullptr) {
    context.log->Warn(StrCat("feature rows are copied without the gather plugin: ", gather.status().message()));
  }
  return std::unique_ptr<RowStore>(
      std::make_unique<FileRowStore>(std::move(store), gather.ok() ? gather.value() : nullptr));
}

Result<std::unique_ptr<Executor>> Build(std::unique_ptr<AssignmentPayload> payload, const ExecutorContext& context) {
  auto* assignment = dynamic_cast<RgnnAssignment*>(payload.get());
  if (assignment == nullptr) return InternalError("an rgnn.full executor got a payload of another kind");
  if (!assignment->source.file.empty()) {
    TESSEL_ASSIGN_OR_RETURN(assignment->partition, ReadPartFile(assignment->source));
  }
  TESSEL_ASSIGN_OR_RETURN(auto executor,
                          RgnnExecutor::Create(assignment->settings, std::move(assignment->partition), context));
  return std::unique_ptr<Executor>(std::move(executor));
}

std::unique_ptr<AssignmentPayload> DecodeSampled(ByteReader& in) { return DecodeRgnnSampledAssignment(in); }

Result<std::unique_ptr<Executor>> BuildSampled(std::unique_ptr<AssignmentPayload> payload,
                                               const ExecutorContext& context) {
  auto* a = dynamic_cast<RgnnSampledAssignment*>(payload.get());
  if (a == nullptr) return InternalError("an rgnn.sampled executor got a payload of another kind");
  if (!a->source.file.empty()) {
    TESSEL_ASSIGN_OR_RETURN(a->partition, ReadPartFile(a->source));
  }
  ModelShape model;
  model.classes = a->partitioned() ? a->partition.num_classes : a->graph->num_classes;
  model.workers = a->num_workers;
  model.full_graph = false;
  const int64_t nodes = a->partitioned() ? a->partition.total_nodes : a->graph->num_nodes;
  model.input_dim = a->settings.input == ModelInput::kOneHot ? nodes : a->feature_dim;
  {
    KernelSet probe(*context.kernels, context);
    TESSEL_ASSIGN_OR_RETURN(std::vector<const tessel_op_decl*> ops, RgnnExecutor::RequiredOps(a->settings, model));
    TESSEL_RETURN_IF_ERROR(probe.Require(ops));
  }
  // The sampled batch source gathers f32 rows (jobs/validate.cc refuses fp64 for sampled training).
  if (a->settings.precision != Precision::kFp32) {
    return UsageError("train.precision = \"fp64\" is for full-graph training in this build");
  }
  std::unique_ptr<RowStore> store;
  if (a->settings.input == ModelInput::kFeatures) {
    TESSEL_ASSIGN_OR_RETURN(store, OpenRowStore(*a, context));
  }
  const RgnnSettings settings = a->settings;
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<SampledSource> source,
                          SampledSource::Build(std::move(*a), std::move(store), context));
  const GraphView& view = source->shape_view();
  TESSEL_ASSIGN_OR_RETURN(auto executor, RgnnExecutor::Create(settings, std::move(source), view, model, context));
  return std::unique_ptr<Executor>(std::move(executor));
}

// The source's figures as summary.json shows them (its per-step phase times go in StepResult::timings).
void ShowSource(const SourceFigures& f, Record& r) {
  if (!f.sampled) {
    Set(r, "halo_bytes_sent", f.halo_bytes_sent);
    Set(r, "halo_bytes_received", f.halo_bytes_received);
  } else {
    Set(r, "feature_rows_local", f.feature_rows_local);
    Set(r, "feature_rows_remote", f.feature_rows_remote);
    Set(r, "feature_bytes_local", f.feature_rows_local * f.feature_row_bytes);
    Set(r, "feature_bytes_remote", f.feature_rows_remote * f.feature_row_bytes);
    Set(r, "feature_rows_zero_copy", f.feature_rows_zero_copy);
    Set(r, "feature_bytes_zero_copy", f.feature_rows_zero_copy * f.feature_row_bytes);
    if (!f.feature_gather.empty()) Set(r, "feature_gather", f.feature_gather);
    Set(r, "structure", f.structure);
    Set(r, "prefetch", f.prefetch);
  }
  Set(r, "graph_bytes", f.graph_bytes);
}

}  // namespace

ExecutorFactory RgnnFullGraphFactory() { return ExecutorFactory{RgnnAssignment::kKind, &Decode, &Build}; }
ExecutorFactory RgnnSampledFactory() {
  return ExecutorFactory{RgnnSampledAssignment::kKind, &DecodeSampled, &BuildSampled};
}

RgnnExecutor::RgnnExecutor(RgnnSettings settings, const ExecutorContext& context)
    : settings_(settings),
      context_(context),
      adam_(AdamOptimizer::Hyper{settings.lr, settings.beta1, settings.beta2, settings.eps, L2Decay(settings.l2)}) {}

Result<std::vector<const tessel_op_decl*>> RgnnExecutor::RequiredOps(const RgnnSettings& settings,
                                                                     const ModelShape& shape) {
  const RgnnModel* model = FindRgnnModel(settings.model);
  if (model == nullptr) return UnknownModel(settings.model);
  // The model's own ops first (what a user looking at a refused plugin cares about), each once.
  std::vector<const tessel_op_decl*> ops;
  std::vector<const tessel_op_decl*> wanted = model->Ops(settings, shape);
  wanted.push_back(&tessel_op_nn_softmax_xent);
  wanted.push_back(&tessel_op_optim_adam_step);
  for (const tessel_op_decl* op : wanted) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  return ops;
}

Result<std::unique_ptr<RgnnExecutor>> RgnnExecutor::Create(RgnnSettings settings, storage::WorkerPartition partition,
                                                           const ExecutorContext& context) {
  ModelShape model;
  model.input_dim = settings.input == ModelInput::kOneHot ? partition.total_nodes : partition.feature_dim;
  model.classes = partition.num_classes;
  model.workers = partition.num_parts;
  model.full_graph = true;
  FullGraphSource::Layouts layouts;
  const RgnnModel* chosen = FindRgnnModel(settings.model);
  if (chosen == nullptr) return UnknownModel(settings.model);
  // A model reads either the per-pair layout (RGCN without reordering) or the segment layout.
  const bool pairs = chosen->ReadsRelationPairs(settings);
  layouts.segments = !pairs;
  layouts.relation_pairs = pairs;
  layouts.compaction = settings.compaction;
  layouts.edge_pairs = chosen->ReadsEdgePairs(settings);
  if (settings.halo == HaloMode::kStreamed && !chosen->StreamsHalo(settings)) {
    return UsageError(StrCat("train.halo = \"streamed\" runs a layer one block of input rows at a time, which model \"",
                             settings.model, "\" with these settings cannot (RGCN with model.reorder = true can)"));
  }
  layouts.streamed = settings.halo == HaloMode::kStreamed;
  const auto input =
      settings.input == ModelInput::kOneHot ? FullGraphSource::Input::kOneHot : FullGraphSource::Input::kFeatures;
  // The kernels are checked before the graph is laid out: a missing op fails in milliseconds.
  {
    KernelSet probe(*context.kernels, context);
    TESSEL_ASSIGN_OR_RETURN(std::vector<const tessel_op_decl*> ops, RequiredOps(settings, model));
    TESSEL_RETURN_IF_ERROR(probe.Require(ops));
    if (settings.precision == Precision::kFp64) {
      if (context.device.device != Device::kCpu) {
        return UsageError("train.precision = \"fp64\" runs on CPU workers in this build; set job.device = \"cpu\"");
      }
      TESSEL_RETURN_IF_ERROR(probe.RequireDType(ops, DType::kF64, "train.precision = \"fp64\""));
    }
  }
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<FullGraphSource> graph,
                          FullGraphSource::Build(std::move(partition), input, layouts, settings.layers,
                                                 RgnnDType(settings.precision), context));
  const GraphView& view = graph->view();
  return Create(settings, std::move(graph), view, model, context);
}

Result<std::unique_ptr<RgnnExecutor>> RgnnExecutor::Create(RgnnSettings settings, std::unique_ptr<BatchSource> source,
                                                           const GraphView& shape_view, ModelShape model,
                                                           const ExecutorContext& context) {
  std::unique_ptr<RgnnExecutor> e(new RgnnExecutor(settings, context));
  TESSEL_RETURN_IF_ERROR(e->Build(std::move(source), shape_view, model));
  return e;
}

Status RgnnExecutor::Build(std::unique_ptr<BatchSource> source, const GraphView& g, ModelShape model) {
  source_ = std::move(source);
  full_graph_ = model.full_graph;
  classes_ = model.classes;
  kernels_ = std::make_unique<KernelSet>(*context_.kernels, context_);
  TESSEL_ASSIGN_OR_RETURN(std::vector<const tessel_op_decl*> ops, RequiredOps(settings_, model));
  TESSEL_RETURN_IF_ERROR(kernels_->Require(ops));
  const int L = settings_.layers;
  TESSEL_ASSIGN_OR_RETURN(ModelLayers built,
                          FindRgnnModel(settings_.model)->Build(settings_, model, g, *kernels_, params_));
  layers_ = std::move(built.layers);
  classifier_ = std::move(built.classifier);
  activation_ = built.relu_between ? Activation::kRelu : Activation::kIdentity;
  if (static_cast<int>(layers_.size()) != L) {
    return InternalError(
        StrCat("model \"", settings_.model, "\" built ", layers_.size(), " layers for model.layers = ", L));
  }
  TESSEL_RETURN_IF_ERROR(
      params_.Allocate(context_.device, context_.seed, settings_.weight_init, RgnnDType(settings_.precision)));
  TESSEL_RETURN_IF_ERROR(adam_.Allocate(params_));
  out_.resize(static_cast<size_t>(L));
  dout_.resize(static_cast<size_t>(L));
  out_buf_.resize(static_cast<size_t>(L));
  dout_buf_.resize(static_cast<size_t>(L));
  hidden_.resize(static_cast<size_t>(L - 1));
  dhidden_.resize(static_cast<size_t>(L - 1));
  hidden_buf_.resize(static_cast<size_t>(L - 1));
  dhidden_buf_.resize(static_cast<size_t>(L - 1));
  Allocator& alloc = *context_.device.allocator;
  TESSEL_ASSIGN_OR_RETURN(loss_, Tensor::Empty(DType::kF64, {1}, alloc));
  TESSEL_ASSIGN_OR_RETURN(correct_, Tensor::Empty(DType::kI64, {1}, alloc));
  if (context_.log != nullptr) {
    context_.log->Debug(StrCat(full_graph_ ? "full graph: " : "sampled: ", g.owned, " owned, ", g.rows - g.owned,
                               " halo rows, ", params_.num_values(), " parameters"));
  }
  return Status();
}

Status RgnnExecutor::Shape(const Batch& b) {
  const size_t L = layers_.size();
  if (b.views.size() != L) return InternalError(StrCat("a batch of ", b.views.size(), " views for ", L, " layers"));
  for (size_t l = 0; l < L; ++l) TESSEL_RETURN_IF_ERROR(layers_[l]->Bind(*b.views[l]));
  Allocator& alloc = *context_.device.allocator;
  const int64_t top = b.views.back()->owned;
  bool grew_hidden = false;
  for (size_t l = 0; l < L; ++l) {
    const int64_t out = layers_[l]->out_dim(), owned = b.views[l]->owned;
    if (l + 1 < L) {
      const int64_t rows = b.views[l + 1]->rows;
      grew_hidden = grew_hidden || hidden_[l].numel() < rows * out;
      TESSEL_ASSIGN_OR_RETURN(hidden_[l], hidden_buf_[l].View({rows, out}, params_.dtype(), alloc));
      TESSEL_ASSIGN_OR_RETURN(dhidden_[l], dhidden_buf_[l].View({rows, out}, params_.dtype(), alloc));
    }
    if (l + 1 < L && (activation_ == Activation::kIdentity || !layers_[l]->reads_own_output())) {
      // The layer writes its output straight into the next layer's input (the ReLU then runs in place).
      out_[l] = Rows(hidden_[l], owned);
    } else {
      TESSEL_ASSIGN_OR_RETURN(out_[l], out_buf_[l].View({owned, out}, params_.dtype(), alloc));
    }
    if (l + 1 < L && layers_[l]->reads_own_output()) {
      TESSEL_ASSIGN_OR_RETURN(dout_[l], dout_buf_[l].View({owned, out}, params_.dtype(), alloc));
    }
  }
  if (grew_hidden && !halo_rows_zeroed_ && full_graph_) {
    // Halo rows are written by the exchange before any kernel reads them; zero them once anyway.
    for (Tensor& h : hidden_)
      TESSEL_RETURN_IF_ERROR(ZeroMemory(h.raw(), h.device(), h.nbytes(), context_.device.stream));
    halo_rows_zeroed_ = true;
  }
  if (classifier_) {
    TESSEL_ASSIGN_OR_RETURN(logits_, logits_buf_.View({top, classes_}, params_.dtype(), alloc));
    TESSEL_ASSIGN_OR_RETURN(dlast_, dlast_buf_.View({top, layers_.back()->out_dim()}, params_.dtype(), alloc));
  }
  TESSEL_ASSIGN_OR_RETURN(dlogits_, dlogits_buf_.View({top, classes_}, params_.dtype(), alloc));
  return Status();
}

const Tensor& RgnnExecutor::LayerInput(const Batch& b, size_t l) const {
  if (l > 0) return hidden_[l - 1];
  static const Tensor kNone;
  return b.features != nullptr ? *b.features : kNone;
}

Status RgnnExecutor::AddInto(Tensor& sum, const Tensor& part) {
  Tensor a = Tensor::Borrow(sum.raw(), sum.dtype(), {sum.numel()}, sum.device());
  Tensor b = Tensor::Borrow(part.raw(), part.dtype(), {part.numel()}, part.device());
  return kernels_->Call(tessel_op_nn_add, {&a, &b}, {&a});
}

Result<Tensor> RgnnExecutor::FetchBlock(const Batch& b, size_t l, int k) {
  const GraphView& v = *source_->RoundView(k);
  const Tensor& x = LayerInput(b, l);
  if (x.raw() == nullptr) return Tensor();  // one-hot input: the block's row ids are its own
  TESSEL_ASSIGN_OR_RETURN(Tensor block,
                          block_buf_.View({v.rows, x.dim(1)}, params_.dtype(), *context_.device.allocator));
  TESSEL_RETURN_IF_ERROR(source_->FetchRound(k, x, block));
  return block;
}

Status RgnnExecutor::Forward(const Batch& b) {
  const size_t L = layers_.size();
  for (size_t l = 0; l < L; ++l) {
    TESSEL_RETURN_IF_ERROR(layers_[l]->Forward(LayerInput(b, l), out_[l]));
    // A streamed halo: each peer's block of input rows adds its share, summed through a buffer of the
    // output's shape that is dead until the backward pass (the next layer's input gradient, or the loss's).
    Tensor& share = l + 1 < L ? dhidden_[l] : (classifier_ ? dlast_ : dlogits_);
    for (int k = 1; k <= source_->halo_rounds(); ++k) {
      TESSEL_ASSIGN_OR_RETURN(Tensor block, FetchBlock(b, l, k));
      const GraphView& v = *source_->RoundView(k);
      if (v.segments.num_edges == 0) continue;
      TESSEL_RETURN_IF_ERROR(layers_[l]->Bind(v));
      TESSEL_RETURN_IF_ERROR(layers_[l]->Forward(block, share));
      TESSEL_RETURN_IF_ERROR(AddInto(out_[l], share));
    }
    if (source_->halo_rounds() > 0) TESSEL_RETURN_IF_ERROR(layers_[l]->Bind(*b.views[l]));
    if (l + 1 < L) {
      if (activation_ == Activation::kRelu) {
        Tensor owned_rows = Rows(hidden_[l], b.views[l]->owned);
        TESSEL_RETURN_IF_ERROR(kernels_->Call(tessel_op_nn_relu_fwd, {&out_[l]}, {&owned_rows}));
      }
      TESSEL_RETURN_IF_ERROR(source_->HaloForward(hidden_[l]));
    }
  }
  if (classifier_) return classifier_->Forward(out_.back(), logits_);
  return Status();
}

Status RgnnExecutor::Loss(const Batch& b, const Tensor& mask, double scale, double* loss_sum, int64_t* correct) {
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), scale};
  TESSEL_RETURN_IF_ERROR(kernels_->Call(tessel_op_nn_softmax_xent,
                                        {classifier_ ? &logits_ : &out_.back(), b.labels, &mask},
                                        {&loss_, &correct_, &dlogits_}, params));
  const DeviceContext& d = context_.device;
  TESSEL_RETURN_IF_ERROR(CopyMemory(loss_sum, Device::kCpu, loss_.raw(), loss_.device(), sizeof(double), d.stream));
  return CopyMemory(correct, Device::kCpu, correct_.raw(), correct_.device(), sizeof(int64_t), d.stream);
}

// Backward reuses buffers that are dead by then: the gradient of layer l-1's output overwrites that
// output (ReLU backward reads its own output, in hidden_), unless the layer's backward reads it.
Status RgnnExecutor::Backward(const Batch& b) {
  Tensor dact = dlogits_;
  if (classifier_) {
    TESSEL_RETURN_IF_ERROR(classifier_->Backward(dlogits_, out_.back(), dlast_));
    dact = dlast_;
  }
  for (size_t l = layers_.size(); l-- > 0;) {
    Tensor* dx = l > 0 ? &dhidden_[l - 1] : nullptr;
    TESSEL_RETURN_IF_ERROR(layers_[l]->Backward(dact, LayerInput(b, l), dx));
    // A streamed halo: each peer's block again, its share of the parameter gradients added, its rows'
    // gradients sent back to their owner (and the peers' for this worker's rows added into dx).
    for (int k = 1; k <= source_->halo_rounds(); ++k) {
      TESSEL_ASSIGN_OR_RETURN(Tensor block, FetchBlock(b, l, k));
      const GraphView& v = *source_->RoundView(k);
      Tensor dblock;
      if (dx != nullptr) {
        TESSEL_ASSIGN_OR_RETURN(dblock,
                                dblock_buf_.View({v.rows, dx->dim(1)}, params_.dtype(), *context_.device.allocator));
      }
      if (v.segments.num_edges > 0) {
        TESSEL_RETURN_IF_ERROR(layers_[l]->Bind(v));
        TESSEL_RETURN_IF_ERROR(layers_[l]->BackwardAdd(dact, block, dx != nullptr ? &dblock : nullptr));
      } else if (dx != nullptr) {
        TESSEL_RETURN_IF_ERROR(ZeroMemory(dblock.raw(), dblock.device(), dblock.nbytes(), context_.device.stream));
      }
      if (dx != nullptr) TESSEL_RETURN_IF_ERROR(source_->ReturnRound(k, dblock, *dx));
    }
    if (source_->halo_rounds() > 0) TESSEL_RETURN_IF_ERROR(layers_[l]->Bind(*b.views[l]));
    if (l == 0) return Status();
    TESSEL_RETURN_IF_ERROR(source_->HaloBackward(*dx));
    const int64_t owned = b.views[l - 1]->owned;
    Tensor dx_owned = Rows(*dx, owned);
    if (activation_ == Activation::kIdentity) {
      dact = dx_owned;
      continue;
    }
    Tensor& da = dout_[l - 1].raw() != nullptr ? dout_[l - 1] : out_[l - 1];
    Tensor x_owned = Rows(hidden_[l - 1], owned);
    TESSEL_RETURN_IF_ERROR(kernels_->Call(tessel_op_nn_relu_bwd, {&dx_owned, &x_owned}, {&da}));
    dact = da;
  }
  return Status();
}

Status RgnnExecutor::TrainBatch(const Batch& b, double* loss_sum, int64_t* correct, double* forward_s,
                                double* backward_s) {
  const auto start = Clock::now();
  const DeviceContext& d = context_.device;
  if (b.seeds > 0) {
    TESSEL_RETURN_IF_ERROR(Shape(b));
    TESSEL_RETURN_IF_ERROR(Forward(b));
    double batch_loss = 0;
    int64_t batch_correct = 0;
    const double scale = 1.0 / static_cast<double>(std::max<int64_t>(1, b.step_train_rows));
    TESSEL_RETURN_IF_ERROR(Loss(b, *b.train_mask, scale, &batch_loss, &batch_correct));
    *loss_sum += batch_loss;
    *correct += batch_correct;
  }
  const auto forward_done = Clock::now();
  if (b.seeds > 0) {
    TESSEL_RETURN_IF_ERROR(Backward(b));
  } else {
    // None of this worker's rows: its share of the gradient sum is zero.
    Tensor& g = params_.flat_grad();
    TESSEL_RETURN_IF_ERROR(ZeroMemory(g.raw(), g.device(), g.nbytes(), d.stream));
  }
  // One allreduce for every gradient.
  TESSEL_RETURN_IF_ERROR(SyncStream(d.device, d.stream));
  if (params_.has_row_gradients() && context_.comm->size() > 1) {
    return InternalError("row gradients differ between workers and cannot be summed");
  }
  if (params_.dtype() == DType::kF32) {
    TESSEL_RETURN_IF_ERROR(
        context_.device_comm->AllreduceSum(params_.flat_grad().data<float>(), params_.num_grad_values()));
  } else if (context_.comm->size() > 1) {
    return InternalError("f64 gradients are not summed across workers (train.precision = \"fp64\" is for one worker)");
  }
  TESSEL_ASSIGN_OR_RETURN(const Kernel* adam, kernels_->Find(tessel_op_optim_adam_step));
  const Kernel* adam_rows = nullptr;
  if (params_.has_row_gradients()) {
    TESSEL_ASSIGN_OR_RETURN(adam_rows, kernels_->Find(tessel_op_optim_adam_step_rows));
  }
  TESSEL_RETURN_IF_ERROR(adam_.Step(params_, *adam, adam_rows, kernels_->options()));
  TESSEL_RETURN_IF_ERROR(SyncStream(d.device, d.stream));
  const auto done = Clock::now();
  *forward_s += Seconds(forward_done - start).count();
  *backward_s += Seconds(done - forward_done).count();
  return Status();
}

MemoryUse RgnnExecutor::Memory() const {
  MemoryUse m;
  m.weights = static_cast<int64_t>(params_.flat_value().nbytes());
  m.gradients = static_cast<int64_t>(params_.flat_grad().nbytes());
  m.optimizer = adam_.state_bytes();
  // The layer inputs and outputs and their gradients, and the layers' own buffers (what each keeps for its
  // backward, and their scratch; a buffer the layers share counted once).
  int64_t acts = static_cast<int64_t>(logits_.nbytes() + dlast_.nbytes() + dlogits_.nbytes());
  for (const auto* bufs : {&out_buf_, &dout_buf_, &hidden_buf_, &dhidden_buf_}) {
    for (const GrowBuffer& b : *bufs) acts += b.bytes();
  }
  acts += block_buf_.bytes() + dblock_buf_.bytes();
  std::set<const void*> counted;
  for (const auto& layer : layers_) acts += layer->BufferBytes(counted);
  m.activations = acts;
  m.graph = source_->Figures().graph_bytes;
  return m;
}

void RgnnExecutor::PublishSource(const SourceFigures& now, monitoring::Metrics& metrics) {
  const SourceFigures& was = published_;
  auto bytes = [](int64_t n) { return static_cast<double>(n); };
  const int64_t local = now.feature_rows_local - was.feature_rows_local;
  const int64_t remote = now.feature_rows_remote - was.feature_rows_remote;
  metrics.Add("tessel_halo_exchange_bytes_total", bytes(now.halo_bytes_sent - was.halo_bytes_sent), {"sent"});
  metrics.Add("tessel_halo_exchange_bytes_total", bytes(now.halo_bytes_received - was.halo_bytes_received),
              {"received"});
  metrics.Add("tessel_gather_bytes_total", bytes(local * now.feature_row_bytes), {"local"});
  metrics.Add("tessel_gather_bytes_total", bytes(remote * now.feature_row_bytes), {"remote"});
  metrics.Add("tessel_gather_rows_total", bytes(local), {"local"});
  metrics.Add("tessel_gather_rows_total", bytes(remote), {"remote"});
  metrics.Add("tessel_gather_seconds_total", now.feature_seconds);  // this epoch's
  published_ = now;
}

Result<StepResult> RgnnExecutor::Step(int64_t step) {
  const auto start = Clock::now();
  TESSEL_RETURN_IF_ERROR(source_->Begin(BatchSource::Pass::kTrain, step));
  double loss_sum = 0, forward_s = 0, backward_s = 0;
  int64_t correct = 0, labelled = 0, batches = 0, seeds = 0;
  for (;;) {
    TESSEL_ASSIGN_OR_RETURN(const Batch* b, source_->Next());
    if (b == nullptr) break;
    TESSEL_RETURN_IF_ERROR(TrainBatch(*b, &loss_sum, &correct, &forward_s, &backward_s));
    labelled += b->labelled_train;
    seeds += b->seeds;
    ++batches;
  }
  double figures[4] = {loss_sum, static_cast<double>(correct), static_cast<double>(labelled),
                       static_cast<double>(seeds)};
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(figures, 4));
  const double seconds = Seconds(Clock::now() - start).count();

  const SourceFigures source = source_->Figures();
  if (context_.metrics != nullptr) PublishSource(source, *context_.metrics);
  StepResult r;
  r.loss = figures[0] / std::max(1.0, figures[2]);
  r.lr = settings_.lr;
  r.samples = static_cast<int64_t>(figures[2]);
  r.samples_kind = "nodes";
  last_train_accuracy_ = figures[1] / std::max(1.0, figures[2]);
  Set(r.shown, "train_accuracy", last_train_accuracy_);
  r.forward_seconds = forward_s;
  r.backward_seconds = backward_s;
  if (!full_graph_) {
    Set(r.shown, "seeds_per_second", figures[3] / std::max(1e-9, seconds));
    Set(r.timings, "batches", static_cast<double>(batches));
    Set(r.timings, "seeds_per_second", figures[3] / std::max(1e-9, seconds));
    Set(r.timings, "sample_seconds", source.sample_seconds);
    Set(r.timings, "layout_seconds", source.layout_seconds);
    Set(r.timings, "feature_seconds", source.feature_seconds);
    Set(r.timings, "feature_wait_seconds", source.feature_wait_seconds);
  }
  return r;
}

Result<Record> RgnnExecutor::Evaluate() {
  TESSEL_RETURN_IF_ERROR(source_->Begin(BatchSource::Pass::kEvaluate, 0));
  double figures[5] = {0, 0, 0, 0, 0};  // train correct, train rows, test correct, test rows, test loss
  for (;;) {
    TESSEL_ASSIGN_OR_RETURN(const Batch* b, source_->Next());
    if (b == nullptr) break;
    if (b->seeds == 0) continue;
    TESSEL_RETURN_IF_ERROR(Shape(*b));
    TESSEL_RETURN_IF_ERROR(Forward(*b));
    double tr_loss = 0, te_loss = 0;
    int64_t tr_correct = 0, te_correct = 0;
    if (b->labelled_train > 0) TESSEL_RETURN_IF_ERROR(Loss(*b, *b->train_mask, 0.0, &tr_loss, &tr_correct));
    if (b->labelled_test > 0) TESSEL_RETURN_IF_ERROR(Loss(*b, *b->test_mask, 0.0, &te_loss, &te_correct));
    figures[0] += static_cast<double>(tr_correct);
    figures[1] += static_cast<double>(b->labelled_train);
    figures[2] += static_cast<double>(te_correct);
    figures[3] += static_cast<double>(b->labelled_test);
    figures[4] += te_loss;
  }
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(figures, 5));
  Record r;
  // Sampled training evaluates the test rows only; its training accuracy is the last epoch's.
  Set(r, "train_accuracy", figures[1] > 0 ? figures[0] / figures[1] : last_train_accuracy_);
  Set(r, "test_accuracy", figures[2] / std::max(1.0, figures[3]));
  Set(r, "test_correct", static_cast<int64_t>(figures[2]));
  Set(r, "test_total", static_cast<int64_t>(figures[3]));
  Set(r, "test_loss", figures[4] / std::max(1.0, figures[3]));
  ShowSource(source_->Figures(), r);
  Set(r, "parameters", params_.num_values());
  return r;
}

Status RgnnExecutor::SaveState(StateWriter& out) const {
  TESSEL_RETURN_IF_ERROR(params_.SaveState(out));
  return adam_.SaveState(out);
}

Status RgnnExecutor::LoadState(StateReader& in) {
  TESSEL_RETURN_IF_ERROR(params_.LoadState(in));
  return adam_.LoadState(in);
}

}  // namespace tessel::workers
