#include "workers/rgnn/rgcn_trainer.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>
#include <tessel/ops/rgnn.h>

#include <cmath>
#include <cstring>
#include <random>

namespace tessel::workers {

const std::vector<std::string>& RgcnOps() {
  static const std::vector<std::string> ops = {
      tessel_op_rgnn_typed_linear_fwd.name, tessel_op_rgnn_typed_linear_bwd.name, tessel_op_rgnn_typed_embed_fwd.name,
      tessel_op_rgnn_typed_embed_bwd.name,  tessel_op_rgnn_aggregate_fwd.name,    tessel_op_rgnn_aggregate_bwd.name,
      tessel_op_nn_relu_fwd.name,           tessel_op_nn_relu_bwd.name,           tessel_op_nn_softmax_xent.name,
      tessel_op_optim_adam_step.name};
  return ops;
}

struct RgcnTrainer::Kernels {
  const Kernel* embed_fwd;
  const Kernel* embed_bwd;
  const Kernel* linear_fwd;
  const Kernel* linear_bwd;
  const Kernel* agg_fwd;
  const Kernel* agg_bwd;
  const Kernel* relu_fwd;
  const Kernel* relu_bwd;
  const Kernel* xent;
  const Kernel* adam;
};

namespace {

// A view of rows [0, rows) of a 2-D tensor.
Tensor Rows(const Tensor& t, int64_t rows) { return Tensor::Borrow(t.raw(), t.dtype(), {rows, t.dim(1)}, t.device()); }

Result<Tensor> F32(std::vector<int64_t> shape) { return Tensor::Zeros(DType::kF32, std::move(shape)); }

template <typename T>
Result<Tensor> FromVector(const std::vector<T>& v) {
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(DTypeOf<T>(), {static_cast<int64_t>(v.size())}));
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(T));
  return t;
}

}  // namespace

Result<std::unique_ptr<RgcnTrainer>> RgcnTrainer::Create(const storage::WorkerPartition& part,
                                                         const RgcnConfig& config, const KernelRegistry& kernels,
                                                         WorkerComm& comm, ThreadPool& pool) {
  std::unique_ptr<RgcnTrainer> t(new RgcnTrainer());
  t->part_ = &part;
  t->config_ = config;
  t->comm_ = &comm;
  t->pool_ = &pool;
  if (config.layers < 1) return UsageError("model.layers must be at least 1");
  if (part.num_classes < 2) return BadDataError("the graph has " + std::to_string(part.num_classes) + " classes; node classification needs at least 2");
  if (config.input == RgcnInput::kFeatures && part.feature_dim <= 0) {
    return UsageError("model.input = \"features\" but the graph's nodes carry no (uniform) features");
  }

  auto k = std::make_shared<Kernels>();
  const Device cpu = Device::kCpu;
  TESSEL_ASSIGN_OR_RETURN(k->embed_fwd, kernels.Find("rgnn.typed_embed.fwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->embed_bwd, kernels.Find("rgnn.typed_embed.bwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->linear_fwd, kernels.Find("rgnn.typed_linear.fwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->linear_bwd, kernels.Find("rgnn.typed_linear.bwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->agg_fwd, kernels.Find("rgnn.aggregate.fwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->agg_bwd, kernels.Find("rgnn.aggregate.bwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->relu_fwd, kernels.Find("nn.relu.fwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->relu_bwd, kernels.Find("nn.relu.bwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->xent, kernels.Find("nn.softmax_xent.fwd_bwd", cpu));
  TESSEL_ASSIGN_OR_RETURN(k->adam, kernels.Find("optim.adam.step", cpu));
  t->k_ = std::move(k);

  TESSEL_ASSIGN_OR_RETURN(t->layout_, RelationLayout::Build(part));
  TESSEL_ASSIGN_OR_RETURN(t->halo_, HaloExchange::Build(part, comm));

  const int L = config.layers;
  t->dims_.resize(static_cast<size_t>(L + 1));
  t->dims_[0] = config.input == RgcnInput::kOneHot ? part.total_nodes : part.feature_dim;
  for (int l = 1; l < L; ++l) t->dims_[static_cast<size_t>(l)] = config.hidden;
  t->dims_[static_cast<size_t>(L)] = part.num_classes;
  TESSEL_RETURN_IF_ERROR(t->InitParameters());

  const int64_t rows = part.num_rows(), owned = part.num_owned;
  if (config.input == RgcnInput::kFeatures) {
    if (static_cast<int64_t>(part.features.size()) != rows * part.feature_dim) {
      return BadDataError("partition " + std::to_string(part.part) + ": features do not cover every row");
    }
    TESSEL_ASSIGN_OR_RETURN(t->features_, Tensor::Empty(DType::kF32, {rows, part.feature_dim}));
    std::memcpy(t->features_.raw(), part.features.data(), part.features.size() * sizeof(float));
  }
  TESSEL_ASSIGN_OR_RETURN(t->row_id_, FromVector(part.row_orig_id));
  TESSEL_ASSIGN_OR_RETURN(t->labels_, FromVector(part.labels));
  TESSEL_ASSIGN_OR_RETURN(t->train_mask_, FromVector(part.train_mask));
  TESSEL_ASSIGN_OR_RETURN(t->test_mask_, FromVector(part.test_mask));
  if (t->labels_.numel() != owned || t->train_mask_.numel() != owned || t->test_mask_.numel() != owned) {
    return BadDataError("partition " + std::to_string(part.part) + ": labels or masks do not cover the owned nodes");
  }

  for (int l = 0; l < L; ++l) {
    const int64_t out = t->dims_[static_cast<size_t>(l + 1)];
    TESSEL_ASSIGN_OR_RETURN(Tensor y, F32({t->layout_.num_uniq, out}));
    TESSEL_ASSIGN_OR_RETURN(Tensor a, F32({owned, out}));
    t->y_.push_back(y);
    t->act_.push_back(a);
    if (l < L - 1) {
      TESSEL_ASSIGN_OR_RETURN(Tensor h, F32({rows, out}));
      TESSEL_ASSIGN_OR_RETURN(Tensor dh, F32({rows, out}));
      t->hidden_full_.push_back(h);
      t->dhidden_full_.push_back(dh);
    }
  }
  TESSEL_ASSIGN_OR_RETURN(t->no_dx_, F32({0, t->dims_[0]}));
  TESSEL_ASSIGN_OR_RETURN(t->dlogits_, F32({owned, part.num_classes}));
  return t;
}

Status RgcnTrainer::InitParameters() {
  const int L = config_.layers;
  const int64_t R = layout_.num_relations;
  std::vector<int64_t> offsets;
  total_params_ = 0;
  for (int l = 0; l < L; ++l) {
    offsets.push_back(total_params_);
    total_params_ += R * dims_[static_cast<size_t>(l)] * dims_[static_cast<size_t>(l + 1)];
  }
  TESSEL_ASSIGN_OR_RETURN(params_, F32({total_params_}));
  TESSEL_ASSIGN_OR_RETURN(grads_, F32({total_params_}));
  TESSEL_ASSIGN_OR_RETURN(adam_m_, F32({total_params_}));
  TESSEL_ASSIGN_OR_RETURN(adam_v_, F32({total_params_}));
  // Glorot-uniform over the last two dimensions (as PyG's RGCNConv), from the job seed alone, so
  // every worker and every worker count starts from the same parameters.
  std::mt19937_64 rng(config_.seed * 0x9E3779B97F4A7C15ull + 0x7E55E1ull);
  for (int l = 0; l < L; ++l) {
    const int64_t in = dims_[static_cast<size_t>(l)], out = dims_[static_cast<size_t>(l + 1)];
    const double bound = std::sqrt(6.0 / static_cast<double>(in + out));
    std::uniform_real_distribution<double> dist(-bound, bound);
    float* w = params_.data<float>() + offsets[static_cast<size_t>(l)];
    for (int64_t i = 0; i < R * in * out; ++i) w[i] = static_cast<float>(dist(rng));
    const std::vector<int64_t> shape = {R, in, out};
    float* base[4] = {params_.data<float>(), grads_.data<float>(), adam_m_.data<float>(), adam_v_.data<float>()};
    std::vector<Tensor>* views[4] = {&weight_, &weight_grad_, &m_view_, &v_view_};
    for (int i = 0; i < 4; ++i) views[i]->push_back(Tensor::Borrow(base[i] + offsets[static_cast<size_t>(l)], DType::kF32, shape));
  }
  return Status();
}

Status RgcnTrainer::Forward() {
  const int L = config_.layers;
  const int64_t owned = part_->num_owned;
  for (int l = 0; l < L; ++l) {
    Tensor& y = y_[static_cast<size_t>(l)];
    if (l == 0 && config_.input == RgcnInput::kOneHot) {
      TESSEL_RETURN_IF_ERROR(k_->embed_fwd->Call({&weight_[0], &layout_.uniq_ptr, &layout_.uniq_src, &row_id_}, {&y}, pool_));
    } else {
      const Tensor& x = l == 0 ? features_ : hidden_full_[static_cast<size_t>(l - 1)];
      TESSEL_RETURN_IF_ERROR(k_->linear_fwd->Call({&x, &weight_[static_cast<size_t>(l)], &layout_.uniq_ptr, &layout_.uniq_src}, {&y}, pool_));
    }
    Tensor& a = act_[static_cast<size_t>(l)];
    TESSEL_RETURN_IF_ERROR(k_->agg_fwd->Call({&y, &layout_.edge_uniq, &layout_.norm, &layout_.dst_ptr, &layout_.dst_edges}, {&a}, pool_));
    if (l < L - 1) {
      Tensor& h = hidden_full_[static_cast<size_t>(l)];
      Tensor owned_rows = Rows(h, owned);
      TESSEL_RETURN_IF_ERROR(k_->relu_fwd->Call({&a}, {&owned_rows}, pool_));
      TESSEL_RETURN_IF_ERROR(halo_.Forward(h.data<float>(), h.dim(1)));
    }
  }
  return Status();
}

Status RgcnTrainer::Loss(const Tensor& mask, double scale, double* loss_sum, int64_t* correct, int64_t* count) {
  TESSEL_ASSIGN_OR_RETURN(Tensor loss, Tensor::Zeros(DType::kF64, {1}));
  TESSEL_ASSIGN_OR_RETURN(Tensor right, Tensor::Zeros(DType::kI64, {1}));
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), scale};
  TESSEL_RETURN_IF_ERROR(k_->xent->Call({&act_.back(), &labels_, &mask}, {&loss, &right, &dlogits_}, params, pool_));
  *loss_sum = loss.data<double>()[0];
  *correct = right.data<int64_t>()[0];
  int64_t n = 0;
  const uint8_t* m = mask.data<uint8_t>();
  const int64_t* lab = labels_.data<int64_t>();
  for (int64_t i = 0; i < mask.numel(); ++i) n += (m[i] != 0 && lab[i] >= 0) ? 1 : 0;
  *count = n;
  return Status();
}

// Backward reuses forward buffers that are dead by then: layer l's dY overwrites Y_l (no backward
// kernel reads Y), and dA_{l-1} overwrites A_{l-1} (ReLU backward reads its output, not its input).
Status RgcnTrainer::Backward() {
  const int L = config_.layers;
  const int64_t owned = part_->num_owned;
  Tensor dact = dlogits_;
  for (int l = L - 1; l >= 0; --l) {
    const size_t i = static_cast<size_t>(l);
    Tensor& dy = y_[i];
    TESSEL_RETURN_IF_ERROR(k_->agg_bwd->Call({&dact, &layout_.dst, &layout_.norm, &layout_.uniq_edge_ptr}, {&dy}, pool_));
    Tensor& dw = weight_grad_[i];
    if (l == 0) {
      if (config_.input == RgcnInput::kOneHot) {
        TESSEL_RETURN_IF_ERROR(k_->embed_bwd->Call({&dy, &layout_.uniq_ptr, &layout_.uniq_src, &row_id_}, {&dw}, pool_));
      } else {
        TESSEL_RETURN_IF_ERROR(k_->linear_bwd->Call({&dy, &features_, &weight_[0], &layout_.uniq_ptr, &layout_.uniq_src},
                                                    {&no_dx_, &dw}, pool_));
      }
      break;
    }
    const Tensor& x = hidden_full_[i - 1];
    Tensor& dx = dhidden_full_[i - 1];
    TESSEL_RETURN_IF_ERROR(k_->linear_bwd->Call({&dy, &x, &weight_[i], &layout_.uniq_ptr, &layout_.uniq_src}, {&dx, &dw}, pool_));
    TESSEL_RETURN_IF_ERROR(halo_.Backward(dx.data<float>(), dx.dim(1)));
    Tensor& da = act_[i - 1];
    Tensor dx_owned = Rows(dx, owned), x_owned = Rows(x, owned);
    TESSEL_RETURN_IF_ERROR(k_->relu_bwd->Call({&dx_owned, &x_owned}, {&da}, pool_));
    dact = da;
  }
  return Status();
}

Result<EpochStats> RgcnTrainer::TrainEpoch() {
  TESSEL_RETURN_IF_ERROR(Forward());
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  const double scale = 1.0 / static_cast<double>(std::max<int64_t>(1, part_->total_train));
  TESSEL_RETURN_IF_ERROR(Loss(train_mask_, scale, &loss_sum, &correct, &count));
  TESSEL_RETURN_IF_ERROR(Backward());

  // One allreduce for every gradient, one for the figures.
  TESSEL_RETURN_IF_ERROR(comm_->AllreduceSum(grads_.data<float>(), total_params_));
  double figures[3] = {loss_sum, static_cast<double>(correct), static_cast<double>(count)};
  TESSEL_RETURN_IF_ERROR(comm_->AllreduceSum(figures, 3));

  ++step_;
  for (int l = 0; l < config_.layers; ++l) {
    tessel_adam_params h{};
    h.struct_size = sizeof(h);
    h.lr = config_.lr;
    h.beta1 = 0.9;
    h.beta2 = 0.999;
    h.eps = 1e-8;
    h.weight_decay = l == 0 ? config_.l2 : 0.0;
    h.step = step_;
    // Adam sees each layer as one flat vector.
    const auto flat = [](const Tensor& t) { return Tensor::Borrow(t.raw(), t.dtype(), {t.numel()}, t.device()); };
    const size_t i = static_cast<size_t>(l);
    Tensor w = flat(weight_[i]), g = flat(weight_grad_[i]), m = flat(m_view_[i]), v = flat(v_view_[i]);
    TESSEL_RETURN_IF_ERROR(k_->adam->Call({&w, &g, &m, &v}, {}, h, pool_));
  }
  EpochStats s;
  s.loss = figures[0] / std::max(1.0, figures[2]);
  s.train_accuracy = figures[1] / std::max(1.0, figures[2]);
  return s;
}

Result<EvalStats> RgcnTrainer::Evaluate() {
  TESSEL_RETURN_IF_ERROR(Forward());
  double tr_loss = 0, te_loss = 0;
  int64_t tr_correct = 0, tr_count = 0, te_correct = 0, te_count = 0;
  TESSEL_RETURN_IF_ERROR(Loss(train_mask_, 0.0, &tr_loss, &tr_correct, &tr_count));
  TESSEL_RETURN_IF_ERROR(Loss(test_mask_, 0.0, &te_loss, &te_correct, &te_count));
  double figures[5] = {static_cast<double>(tr_correct), static_cast<double>(tr_count), static_cast<double>(te_correct),
                       static_cast<double>(te_count), te_loss};
  TESSEL_RETURN_IF_ERROR(comm_->AllreduceSum(figures, 5));
  EvalStats s;
  s.train_accuracy = figures[0] / std::max(1.0, figures[1]);
  s.test_correct = static_cast<int64_t>(figures[2]);
  s.test_total = static_cast<int64_t>(figures[3]);
  s.test_accuracy = figures[2] / std::max(1.0, figures[3]);
  s.test_loss = figures[4] / std::max(1.0, figures[3]);
  return s;
}

}  // namespace tessel::workers
