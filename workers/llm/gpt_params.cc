#include "workers/llm/gpt_params.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>

#include "storage/hf_gpt2.h"
#include "storage/llmc.h"
#include "workers/llm/stage_weights.h"

namespace tessel::workers {
namespace {

uint64_t Fnv1a(std::string_view s, uint64_t h) {
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

}  // namespace

Status GptParams::Declare() {
  const GptConfig& m = a_.model;
  const int64_t c = m.width;
  // Weight decay on the matrices (and the embeddings), not on biases and LayerNorm, as nanoGPT and the
  // PyTorch peer do.
  const auto add = [&](std::string name, std::vector<int64_t> shape) {
    const Decay decay = shape.size() >= 2 ? Decay::kL2 : Decay::kNone;
    return store_.Add({std::move(name), std::move(shape), ParamInit::kZeros, decay});
  };
  const StagePlacement& p = a_.place;
  if (p.first()) {
    wte_ = add("wte", {m.padded_vocab, c});
    wpe_ = add("wpe", {m.context, c});
  }
  for (int32_t l = p.first_block; l < p.end_block; ++l) {
    std::vector<size_t> idx;
    for (const std::string& n : BlockTensorNames()) idx.push_back(add(StrCat("h", l, ".", n), BlockTensorShape(n, c)));
    blocks_.push_back(
        BlockParams{idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], idx[7], idx[8], idx[9], idx[10], idx[11]});
  }
  if (p.last()) {
    lnfw_ = add("lnfw", {c});
    lnfb_ = add("lnfb", {c});
    if (!p.first()) wte_ = add("wte", {m.padded_vocab, c});  // the output head's copy of the tied embedding
  }
  return Status();
}

// GPT-2's initialisation (normal, std 0.02; the residual projections 0.02 / sqrt(2 L); biases 0; LayerNorm
// weights 1), each tensor from its own stream seeded by (job seed, name): the same weights whatever the
// stage split. Or the tensors of the llm.c checkpoint model.init_from.
Status GptParams::InitialValues(std::vector<float>* host) const {
  host->assign(static_cast<size_t>(store_.num_values()), 0.0f);
  std::optional<storage::LlmcCheckpoint> ck;
  std::map<std::string, storage::LlmcTensor> where;
  if (!a_.init_from.empty()) {
    TESSEL_ASSIGN_OR_RETURN(ck, storage::ReadGpt2Weights(a_.init_from));
    if (!(ck->config == ToLlmc(a_.model))) {
      return UsageError(StrCat(a_.init_from, ": the checkpoint's shape (layers ", ck->config.num_layers, ", width ",
                               ck->config.channels, ", heads ", ck->config.num_heads, ", context ",
                               ck->config.max_seq_len, ", vocab ", ck->config.vocab_size, ") differs from the job's"));
    }
    for (const storage::LlmcTensor& t : storage::LlmcTensors(ck->config)) where[t.name] = t;
  }
  const double proj_std = 0.02 / std::sqrt(2.0 * a_.model.layers);
  for (size_t i = 0; i < store_.size(); ++i) {
    const std::string& name = store_.spec(i).name;
    float* w = host->data() + store_.offset(i);
    const int64_t n = store_.value(i).numel();
    // "h3.qkvw" -> block 3, llm.c tensor "qkvw".
    int32_t block = -1;
    std::string base = name;
    if (name.starts_with("h")) {
      const size_t dot = name.find('.');
      block = std::stoi(name.substr(1, dot - 1));
      base = name.substr(dot + 1);
    }
    if (ck) {
      const storage::LlmcTensor& t = where.at(base);
      const int64_t at = t.offset + (block < 0 ? 0 : block * n);
      std::copy_n(ck->params.data() + at, n, w);
      continue;
    }
    if (base == "ln1w" || base == "ln2w" || base == "lnfw") {
      std::fill_n(w, n, 1.0f);
    } else if (store_.spec(i).shape.size() >= 2) {
      std::mt19937_64 rng(Fnv1a(name, 0xcbf29ce484222325ULL ^ (seed_ * 0x9E3779B97F4A7C15ULL)));
      std::normal_distribution<float> dist(
          0.0f, base == "attprojw" || base == "fcprojw" ? static_cast<float>(proj_std) : 0.02f);
      for (int64_t j = 0; j < n; ++j) w[j] = dist(rng);
    }
  }
  return Status();
}

Status GptParams::Init() {
  TESSEL_RETURN_IF_ERROR(Declare());
  TESSEL_RETURN_IF_ERROR(store_.Allocate(device_, seed_));
  std::vector<float> host;
  TESSEL_RETURN_IF_ERROR(InitialValues(&host));
  TESSEL_RETURN_IF_ERROR(CopyMemory(store_.flat_value().raw(), store_.flat_value().device(), host.data(), Device::kCpu,
                                    host.size() * sizeof(float), device_.stream));
  for (Tensor* moment : {&m_, &v_}) {
    TESSEL_ASSIGN_OR_RETURN(*moment, Tensor::Empty(DType::kF32, {store_.num_values()}, *device_.allocator));
    TESSEL_RETURN_IF_ERROR(ZeroMemory(moment->raw(), moment->device(), moment->nbytes(), device_.stream));
  }
  TESSEL_ASSIGN_OR_RETURN(sumsq_, Tensor::Empty(DType::kF64, {1}, *device_.allocator));
  const StagePlacement& p = a_.place;
  if (p.stages > 1 && (p.first() || p.last())) {
    TESSEL_ASSIGN_OR_RETURN(tied_, Tensor::Empty(DType::kF32, {store_.value(wte_).numel()}, *device_.allocator));
  }
  if (a_.train.precision == Precision::kBf16) {
    TESSEL_ASSIGN_OR_RETURN(work_, Tensor::Empty(DType::kBF16, {store_.num_values()}, *device_.allocator));
    for (size_t i = 0; i < store_.size(); ++i) {
      work_views_.push_back(Tensor::Borrow(
          static_cast<char*>(work_.raw()) + static_cast<size_t>(store_.offset(i)) * DTypeSize(DType::kBF16),
          DType::kBF16, store_.value(i).shape(), work_.device()));
    }
  }
  return RefreshWorkingCopy();
}

Status GptParams::RefreshWorkingCopy() {
  if (work_views_.empty()) return Status();
  Tensor master = FlatView(store_.flat_value());
  return k_.Call(tessel_op_nn_cast, {&master}, {&work_});
}

Status GptParams::Step(int64_t step, int worker, WorkerComm& world, WorkerComm& replicas, StageLink& link,
                       double* waited) {
  const StagePlacement& p = a_.place;
  const LlmTrainSettings& t = a_.train;
  void* stream = device_.stream;
  Tensor& flat = store_.flat_grad();
  if (t.data_parallel > 1) {
    if (flat.device() == Device::kCpu) {
      TESSEL_RETURN_IF_ERROR(replicas.AllreduceSum(flat.data<float>(), flat.numel()));
    } else {
      std::vector<float> host(static_cast<size_t>(flat.numel()));
      TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, flat.raw(), flat.device(), flat.nbytes(), stream));
      TESSEL_RETURN_IF_ERROR(replicas.AllreduceSum(host.data(), flat.numel()));
      TESSEL_RETURN_IF_ERROR(CopyMemory(flat.raw(), flat.device(), host.data(), Device::kCpu, flat.nbytes(), stream));
    }
  }
  // The tied embedding, after the replicas' sums: the first and the last stage add each other's wte
  // gradient (a + b == b + a, so both copies get bit-identical sums and stay equal, whatever order the
  // two stages' allreduces added their replicas in).
  if (p.stages > 1 && (p.first() || p.last())) {
    const int peer = p.first() ? worker + p.stages - 1 : worker - (p.stages - 1);
    int64_t handle = -1;
    Tensor gf = FlatView(store_.grad(wte_));
    TESSEL_RETURN_IF_ERROR(link.Send(gf, peer, kTagTiedGrad, &handle));
    TESSEL_RETURN_IF_ERROR(link.Recv(tied_, peer, kTagTiedGrad, waited));
    TESSEL_RETURN_IF_ERROR(link.WaitSend(handle));
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_add, {&gf, &tied_}, {&gf}));
  }
  // The global gradient norm: every parameter once (the head's wte copy is the first stage's), from
  // replica 0 (the replicas' gradients are equal by now).
  double scale = 1;
  if (t.grad_clip > 0) {
    double local = 0;
    if (p.replica == 0) {
      // One sum over the flat gradients; the head's wte copy (declared last) is left out.
      const int64_t count = p.last() && !p.first() ? store_.offset(wte_) : flat.numel();
      Tensor g = Tensor::Borrow(flat.raw(), DType::kF32, {count}, flat.device());
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_sum_squares, {&g}, {&sumsq_}));
      TESSEL_RETURN_IF_ERROR(CopyMemory(&local, Device::kCpu, sumsq_.raw(), sumsq_.device(), sizeof local, stream));
    }
    TESSEL_RETURN_IF_ERROR(world.AllreduceSum(&local, 1));
    const double norm = std::sqrt(local);
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6), at most 1.
    scale = std::min(1.0, t.grad_clip / (norm + 1e-6));
  }
  const double lr = LearningRate(t, step - 1);
  for (size_t i = 0; i < store_.size(); ++i) {
    const int64_t off = store_.offset(i), n = store_.value(i).numel();
    Tensor value = FlatView(store_.value(i)), grad = FlatView(store_.grad(i));  // the master values
    Tensor m = Tensor::Borrow(m_.data<float>() + off, DType::kF32, {n}, m_.device());
    Tensor v = Tensor::Borrow(v_.data<float>() + off, DType::kF32, {n}, v_.device());
    const tessel_adamw_params hp{sizeof(tessel_adamw_params),
                                 lr,
                                 t.beta1,
                                 t.beta2,
                                 t.eps,
                                 store_.spec(i).decay == Decay::kL2 ? t.weight_decay : 0.0,
                                 scale,
                                 step};
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_optim_adamw_step, {&value, &grad, &m, &v}, {}, hp));
  }
  TESSEL_RETURN_IF_ERROR(RefreshWorkingCopy());
  return ZeroMemory(flat.raw(), flat.device(), flat.nbytes(), stream);
}

Result<std::vector<float>> GptParams::HostValues() const {
  std::vector<float> host(static_cast<size_t>(store_.num_values()));
  TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, store_.flat_value().raw(), store_.flat_value().device(),
                                    host.size() * sizeof(float), device_.stream));
  // The head's wte copy is declared last.
  if (a_.place.last() && !a_.place.first()) host.resize(static_cast<size_t>(store_.offset(wte_)));
  return host;
}

Status GptParams::SaveState(StateWriter& out) const {
  TESSEL_RETURN_IF_ERROR(store_.SaveState(out));
  TESSEL_ASSIGN_OR_RETURN(Tensor m, ToHost(m_, device_));
  TESSEL_RETURN_IF_ERROR(out.Write("adamw/m", m));
  TESSEL_ASSIGN_OR_RETURN(Tensor v, ToHost(v_, device_));
  return out.Write("adamw/v", v);
}

Status GptParams::LoadState(StateReader& in) {
  TESSEL_RETURN_IF_ERROR(store_.LoadState(in));
  TESSEL_ASSIGN_OR_RETURN(Tensor m, in.Read("adamw/m"));
  TESSEL_RETURN_IF_ERROR(FromHost(m, m_, device_, "adamw/m"));
  TESSEL_ASSIGN_OR_RETURN(Tensor v, in.Read("adamw/v"));
  TESSEL_RETURN_IF_ERROR(FromHost(v, v_, device_, "adamw/v"));
  return RefreshWorkingCopy();
}

}  // namespace tessel::workers
