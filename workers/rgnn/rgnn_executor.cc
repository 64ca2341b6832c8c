#include "workers/rgnn/rgnn_executor.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <chrono>

namespace tessel::workers {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// A view of rows [0, rows) of a 2-D tensor.
Tensor Rows(const Tensor& t, int64_t rows) { return Tensor::Borrow(t.raw(), t.dtype(), {rows, t.dim(1)}, t.device()); }

std::unique_ptr<AssignmentPayload> Decode(ByteReader& in) { return DecodeRgnnAssignment(in); }

Result<std::unique_ptr<Executor>> Build(std::unique_ptr<AssignmentPayload> payload, const ExecutorContext& context) {
  auto* assignment = dynamic_cast<RgnnAssignment*>(payload.get());
  if (assignment == nullptr) return InternalError("an rgnn.full executor got a payload of another kind");
  TESSEL_ASSIGN_OR_RETURN(auto executor,
                          RgnnExecutor::Create(assignment->settings, std::move(assignment->partition), context));
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace

ExecutorFactory RgnnFullGraphFactory() { return ExecutorFactory{RgnnAssignment::kKind, &Decode, &Build}; }

RgnnExecutor::RgnnExecutor(RgnnSettings settings, const ExecutorContext& context)
    : settings_(settings), context_(context), adam_(AdamOptimizer::Hyper{settings.lr, 0.9, 0.999, 1e-8, settings.l2}) {}

std::vector<RgcnLayer::Shape> RgnnExecutor::RgcnShapes(const RgnnSettings& settings, int64_t input_dim,
                                                       int64_t num_classes, int32_t num_workers) {
  std::vector<RgcnLayer::Shape> shapes;
  for (int l = 0; l < settings.layers; ++l) {
    RgcnLayer::Shape s;
    s.index = l;
    s.in_dim = l == 0 ? input_dim : settings.hidden;
    s.out_dim = l == settings.layers - 1 ? num_classes : settings.hidden;
    s.one_hot = l == 0 && settings.input == RgnnInput::kOneHot;
    s.weights = RgcnLayer::WeightsFor(settings, s.in_dim, s.out_dim);
    s.num_bases_or_blocks = settings.num_bases > 0 ? settings.num_bases : settings.num_blocks;
    s.reordering = settings.reordering;
    s.row_gradient =
        s.one_hot && s.weights == RgcnLayer::Weights::kFull && s.reordering == Reordering::kOn && num_workers == 1;
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<RgatLayer::Shape> RgnnExecutor::RgatShapes(const RgnnSettings& settings, int64_t input_dim,
                                                       int64_t num_classes) {
  std::vector<RgatLayer::Shape> shapes;
  for (int l = 0; l < settings.layers; ++l) {
    RgatLayer::Shape s;
    s.index = l;
    s.in_dim = l == 0 ? input_dim : shapes.back().out_dim();
    s.heads = settings.heads;
    const bool last = l == settings.layers - 1;
    // Hidden layers split (concat) or repeat (mean) the width across heads; the last averages C-wide heads.
    s.merge = last ? RgnnHeadMerge::kMean : settings.head_merge;
    s.head_dim =
        last ? num_classes
             : (settings.head_merge == RgnnHeadMerge::kConcat ? settings.hidden / settings.heads : settings.hidden);
    s.one_hot = l == 0 && settings.input == RgnnInput::kOneHot;
    s.reordering = settings.reordering;
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<HgtLayer::Shape> RgnnExecutor::HgtShapes(const RgnnSettings& settings, int64_t input_dim) {
  std::vector<HgtLayer::Shape> shapes;
  for (int l = 0; l < settings.layers; ++l) {
    HgtLayer::Shape s;
    s.index = l;
    s.in_dim = l == 0 ? input_dim : settings.hidden;
    s.out_dim = settings.hidden;
    s.heads = settings.heads;
    s.one_hot = l == 0 && settings.input == RgnnInput::kOneHot;
    s.reordering = settings.reordering;
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<const tessel_op_decl*> RgnnExecutor::RequiredOps(const RgnnSettings& settings, int64_t input_dim,
                                                             int64_t num_classes, int32_t num_workers) {
  // The model's own ops first (what a user looking at a refused plugin cares about), each once.
  std::vector<const tessel_op_decl*> ops;
  const auto add = [&](const std::vector<const tessel_op_decl*>& more) {
    for (const tessel_op_decl* op : more) {
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
  };
  switch (settings.model) {
    case RgnnModel::kRgcn:
      for (const RgcnLayer::Shape& shape : RgcnShapes(settings, input_dim, num_classes, num_workers)) {
        add(RgcnLayer::Ops(shape));
      }
      add({&tessel_op_nn_relu_fwd, &tessel_op_nn_relu_bwd});
      break;
    case RgnnModel::kRgat:
      for (const RgatLayer::Shape& shape : RgatShapes(settings, input_dim, num_classes)) add(RgatLayer::Ops(shape));
      add({&tessel_op_nn_relu_fwd, &tessel_op_nn_relu_bwd});
      break;
    case RgnnModel::kHgt:
      for (const HgtLayer::Shape& shape : HgtShapes(settings, input_dim)) add(HgtLayer::Ops(shape));
      add(Classifier::Ops());
      break;
  }
  add({&tessel_op_nn_softmax_xent, &tessel_op_optim_adam_step});
  return ops;
}

Result<std::unique_ptr<RgnnExecutor>> RgnnExecutor::Create(RgnnSettings settings, storage::WorkerPartition partition,
                                                           const ExecutorContext& context) {
  std::unique_ptr<RgnnExecutor> e(new RgnnExecutor(settings, context));
  TESSEL_RETURN_IF_ERROR(e->Build(std::move(partition)));
  return e;
}

Status RgnnExecutor::Build(storage::WorkerPartition partition) {
  kernels_ = std::make_unique<KernelSet>(*context_.kernels, context_);
  const bool one_hot = settings_.input == RgnnInput::kOneHot;
  const int64_t input_dim = one_hot ? partition.total_nodes : partition.feature_dim;
  const int64_t classes = partition.num_classes;
  const int32_t workers = partition.num_parts;
  TESSEL_RETURN_IF_ERROR(kernels_->Require(RequiredOps(settings_, input_dim, classes, workers)));
  FullGraphSource::Layouts layouts;
  // Only RGCN without reordering reads the per-pair layout; everything else the segment layout.
  const bool pairs = settings_.model == RgnnModel::kRgcn && settings_.reordering == Reordering::kOff;
  layouts.segments = !pairs;
  layouts.relation_pairs = pairs;
  layouts.compaction = settings_.compaction;
  TESSEL_ASSIGN_OR_RETURN(
      graph_, FullGraphSource::Build(std::move(partition),
                                     one_hot ? FullGraphSource::Input::kOneHot : FullGraphSource::Input::kFeatures,
                                     layouts, context_));
  const FullGraphSource& g = *graph_;
  const int L = settings_.layers;
  switch (settings_.model) {
    case RgnnModel::kRgcn:
      for (const auto& shape : RgcnShapes(settings_, input_dim, classes, workers)) {
        TESSEL_ASSIGN_OR_RETURN(auto layer, RgcnLayer::Create(shape, g, *kernels_, params_));
        layers_.push_back(std::move(layer));
      }
      break;
    case RgnnModel::kRgat:
      for (const auto& shape : RgatShapes(settings_, input_dim, classes)) {
        layers_.push_back(std::make_unique<RgatLayer>(shape, g, *kernels_, params_));
      }
      break;
    case RgnnModel::kHgt: {
      auto scratch = std::make_shared<HgtLayer::Scratch>();  // one set for all the layers
      for (const auto& shape : HgtShapes(settings_, input_dim)) {
        layers_.push_back(std::make_unique<HgtLayer>(shape, g, *kernels_, params_, scratch));
      }
      classifier_ = std::make_unique<Classifier>(settings_.hidden, classes, *kernels_, params_);
      activation_ = Activation::kIdentity;
      break;
    }
  }
  TESSEL_RETURN_IF_ERROR(params_.Allocate(context_.device, context_.seed));
  TESSEL_RETURN_IF_ERROR(adam_.Allocate(params_));

  Allocator& alloc = *context_.device.allocator;
  const int64_t N = g.num_owned();
  for (int l = 0; l < L; ++l) {
    const int64_t out = layers_[static_cast<size_t>(l)]->out_dim();
    if (l < L - 1) {
      TESSEL_ASSIGN_OR_RETURN(Tensor h, Tensor::Empty(DType::kF32, {g.num_rows(), out}, alloc));
      TESSEL_ASSIGN_OR_RETURN(Tensor dh, Tensor::Empty(DType::kF32, {g.num_rows(), out}, alloc));
      // Halo rows are written by the exchange before any kernel reads them; zero them once anyway.
      TESSEL_RETURN_IF_ERROR(ZeroMemory(h.raw(), h.device(), h.nbytes(), context_.device.stream));
      hidden_.push_back(h);
      dhidden_.push_back(dh);
    }
    Tensor o;
    if (l < L - 1 && activation_ == Activation::kIdentity) {
      o = Rows(hidden_.back(), N);  // the layer writes its output straight into the next layer's input
    } else {
      TESSEL_ASSIGN_OR_RETURN(o, Tensor::Empty(DType::kF32, {N, out}, alloc));
    }
    out_.push_back(o);
    Tensor d;
    if (l < L - 1 && layers_[static_cast<size_t>(l)]->reads_own_output()) {
      TESSEL_ASSIGN_OR_RETURN(d, Tensor::Empty(DType::kF32, {N, out}, alloc));
    }
    dout_.push_back(d);
  }
  if (classifier_) {
    TESSEL_ASSIGN_OR_RETURN(logits_, Tensor::Empty(DType::kF32, {N, g.num_classes()}, alloc));
    TESSEL_ASSIGN_OR_RETURN(dlast_, Tensor::Empty(DType::kF32, {N, layers_.back()->out_dim()}, alloc));
  }
  TESSEL_ASSIGN_OR_RETURN(dlogits_, Tensor::Empty(DType::kF32, {g.num_owned(), g.num_classes()}, alloc));
  TESSEL_ASSIGN_OR_RETURN(loss_, Tensor::Empty(DType::kF64, {1}, alloc));
  TESSEL_ASSIGN_OR_RETURN(correct_, Tensor::Empty(DType::kI64, {1}, alloc));
  if (context_.log != nullptr) {
    context_.log->Debug(StrCat("partition ", g.part(), ": ", g.num_owned(), " owned, ", g.num_rows() - g.num_owned(),
                               " halo rows, ", params_.num_values(), " parameters"));
  }
  return Status();
}

const Tensor& RgnnExecutor::LayerInput(size_t l) const { return l == 0 ? graph_->features() : hidden_[l - 1]; }

Status RgnnExecutor::Forward() {
  const size_t L = layers_.size();
  for (size_t l = 0; l < L; ++l) {
    TESSEL_RETURN_IF_ERROR(layers_[l]->Forward(LayerInput(l), out_[l]));
    if (l + 1 < L) {
      if (activation_ == Activation::kRelu) {
        Tensor owned_rows = Rows(hidden_[l], graph_->num_owned());
        TESSEL_RETURN_IF_ERROR(kernels_->Call(tessel_op_nn_relu_fwd, {&out_[l]}, {&owned_rows}));
      }
      TESSEL_RETURN_IF_ERROR(graph_->HaloForward(hidden_[l]));
    }
  }
  if (classifier_) return classifier_->Forward(out_.back(), logits_);
  return Status();
}

Status RgnnExecutor::Loss(const Tensor& mask, double scale, double* loss_sum, int64_t* correct) {
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), scale};
  TESSEL_RETURN_IF_ERROR(kernels_->Call(tessel_op_nn_softmax_xent,
                                        {classifier_ ? &logits_ : &out_.back(), &graph_->labels(), &mask},
                                        {&loss_, &correct_, &dlogits_}, params));
  const DeviceContext& d = context_.device;
  TESSEL_RETURN_IF_ERROR(CopyMemory(loss_sum, Device::kCpu, loss_.raw(), loss_.device(), sizeof(double), d.stream));
  return CopyMemory(correct, Device::kCpu, correct_.raw(), correct_.device(), sizeof(int64_t), d.stream);
}

// Backward reuses buffers that are dead by then: the gradient of layer l-1's output overwrites that
// output (ReLU backward reads its own output, in hidden_), unless the layer's backward reads it.
Status RgnnExecutor::Backward() {
  Tensor dact = dlogits_;
  if (classifier_) {
    TESSEL_RETURN_IF_ERROR(classifier_->Backward(dlogits_, out_.back(), dlast_));
    dact = dlast_;
  }
  for (size_t l = layers_.size(); l-- > 0;) {
    if (l == 0) return layers_[0]->Backward(dact, LayerInput(0), nullptr);
    Tensor& dx = dhidden_[l - 1];
    TESSEL_RETURN_IF_ERROR(layers_[l]->Backward(dact, LayerInput(l), &dx));
    TESSEL_RETURN_IF_ERROR(graph_->HaloBackward(dx));
    Tensor dx_owned = Rows(dx, graph_->num_owned());
    if (activation_ == Activation::kIdentity) {
      dact = dx_owned;
      continue;
    }
    Tensor& da = dout_[l - 1].raw() != nullptr ? dout_[l - 1] : out_[l - 1];
    Tensor x_owned = Rows(hidden_[l - 1], graph_->num_owned());
    TESSEL_RETURN_IF_ERROR(kernels_->Call(tessel_op_nn_relu_bwd, {&dx_owned, &x_owned}, {&da}));
    dact = da;
  }
  return Status();
}

Result<StepResult> RgnnExecutor::Step(int64_t) {
  const auto start = Clock::now();
  TESSEL_RETURN_IF_ERROR(Forward());
  double loss_sum = 0;
  int64_t correct = 0;
  const double scale = 1.0 / static_cast<double>(std::max<int64_t>(1, graph_->total_train()));
  TESSEL_RETURN_IF_ERROR(Loss(graph_->train_mask(), scale, &loss_sum, &correct));
  const auto forward_done = Clock::now();
  TESSEL_RETURN_IF_ERROR(Backward());

  // One allreduce for every gradient, one for the figures.
  TESSEL_RETURN_IF_ERROR(SyncStream(context_.device.device, context_.device.stream));
  if (params_.has_row_gradients() && context_.comm->size() > 1) {
    return InternalError("row gradients differ between workers and cannot be summed");
  }
  TESSEL_RETURN_IF_ERROR(
      context_.device_comm->AllreduceSum(params_.flat_grad().data<float>(), params_.num_grad_values()));
  double figures[3] = {loss_sum, static_cast<double>(correct), static_cast<double>(graph_->labelled_train())};
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(figures, 3));
  TESSEL_ASSIGN_OR_RETURN(const Kernel* adam, kernels_->Find(tessel_op_optim_adam_step));
  const Kernel* adam_rows = nullptr;
  if (params_.has_row_gradients()) {
    TESSEL_ASSIGN_OR_RETURN(adam_rows, kernels_->Find(tessel_op_optim_adam_step_rows));
  }
  TESSEL_RETURN_IF_ERROR(adam_.Step(params_, *adam, adam_rows, kernels_->options()));
  TESSEL_RETURN_IF_ERROR(SyncStream(context_.device.device, context_.device.stream));
  const auto done = Clock::now();

  if (context_.metrics != nullptr) {
    const int64_t sent = graph_->halo_bytes_sent(), received = graph_->halo_bytes_received();
    context_.metrics->AddHaloBytes(sent - halo_sent_seen_, received - halo_received_seen_);
    halo_sent_seen_ = sent;
    halo_received_seen_ = received;
  }
  StepResult r;
  r.loss = figures[0] / std::max(1.0, figures[2]);
  Set(r.shown, "train_accuracy", figures[1] / std::max(1.0, figures[2]));
  Set(r.timings, "forward_seconds", Seconds(forward_done - start).count());
  Set(r.timings, "backward_seconds", Seconds(done - forward_done).count());
  return r;
}

Result<Record> RgnnExecutor::Evaluate() {
  TESSEL_RETURN_IF_ERROR(Forward());
  double tr_loss = 0, te_loss = 0;
  int64_t tr_correct = 0, te_correct = 0;
  TESSEL_RETURN_IF_ERROR(Loss(graph_->train_mask(), 0.0, &tr_loss, &tr_correct));
  TESSEL_RETURN_IF_ERROR(Loss(graph_->test_mask(), 0.0, &te_loss, &te_correct));
  double figures[5] = {static_cast<double>(tr_correct), static_cast<double>(graph_->labelled_train()),
                       static_cast<double>(te_correct), static_cast<double>(graph_->labelled_test()), te_loss};
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(figures, 5));
  Record r;
  Set(r, "train_accuracy", figures[0] / std::max(1.0, figures[1]));
  Set(r, "test_accuracy", figures[2] / std::max(1.0, figures[3]));
  Set(r, "test_correct", static_cast<int64_t>(figures[2]));
  Set(r, "test_total", static_cast<int64_t>(figures[3]));
  Set(r, "test_loss", figures[4] / std::max(1.0, figures[3]));
  Set(r, "halo_bytes_sent", graph_->halo_bytes_sent());
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
