#include "workers/llm/gpt_stage.h"

#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "core/logging.h"
#include "storage/llmc.h"
#include "storage/spill_store.h"
#include "workers/llm/llm_settings.h"
#include "workers/llm/spill_pool.h"
#include "workers/llm/stage_weights.h"
#include "workers/llm/token_data.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/kernel_set.h"

namespace tessel::workers {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int kTagForward = 101, kTagBackward = 102, kTagTiedGrad = 103;

Tensor View(const Tensor& t, std::vector<int64_t> shape) {
  return Tensor::Borrow(t.raw(), t.dtype(), std::move(shape), t.device());
}
Tensor Flat(const Tensor& t) { return View(t, {t.numel()}); }

uint64_t Fnv1a(std::string_view s, uint64_t h) {
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

// One block's parameters (indices into the ParameterStore), in llm.c's order.
struct BlockParams {
  size_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

// What one block keeps from its forward for its backward, for one micro-batch. `x` is the block's input
// (the residual stream); its output is the next block's `x` (or the stage's output). A recompute block's
// slot entry holds only `x`; its other tensors live in the stage's one recompute scratch.
struct BlockActs {
  Tensor x, ln1, mean1, rstd1, qkv, atty, lse, x2, ln2, mean2, rstd2, fch, gelu;
};

// One micro-batch in flight.
struct Slot {
  std::vector<BlockActs> blocks;
  Tensor out;                    // the stage's output: the next stage's input, or the head's
  Tensor tokens, targets;        // first stage: inputs (i32 [B, T]); last stage: targets (i64 [N])
  Tensor lnf, meanf, rstdf;      // last stage: the final LayerNorm
  int64_t send_out = -1;         // the Isend of `out`, if any
};

class GptStageExecutor final : public Executor {
 public:
  GptStageExecutor(LlmStageAssignment a, const ExecutorContext& context)
      : a_(std::move(a)), context_(context), k_(*context.kernels, context) {}

  static std::vector<const tessel_op_decl*> Ops() {
    return {&tessel_op_llm_encoder_fwd,   &tessel_op_llm_encoder_bwd,
            &tessel_op_llm_layernorm_fwd, &tessel_op_llm_layernorm_bwd,
            &tessel_op_llm_layernorm_bwd_from_output,
            &tessel_op_llm_attention_fwd, &tessel_op_llm_attention_bwd,
            &tessel_op_nn_linear_fwd,     &tessel_op_nn_linear_bwd,   &tessel_op_nn_gelu_tanh_fwd,
            &tessel_op_nn_gelu_tanh_bwd,  &tessel_op_nn_add,          &tessel_op_nn_gemm,
            &tessel_op_nn_softmax_xent,   &tessel_op_nn_sum_squares,  &tessel_op_optim_adamw_step};
  }

  Status Init();

  std::string_view step_unit() const override { return "step"; }
  int64_t num_steps() const override { return a_.train.steps; }
  Result<StepResult> Step(int64_t step) override;
  Result<Record> Evaluate() override;
  Status SaveState(StateWriter& out) const override;
  Status LoadState(StateReader& in) override;

 private:
  int64_t N() const { return int64_t{a_.train.microbatch} * a_.train.seq_len; }
  int64_t C() const { return a_.model.width; }
  int32_t worker() const { return context_.comm->rank(); }
  double timeout() const { return context_.step_timeout_seconds; }

  Status DeclareParameters();
  Status InitialValues(std::vector<float>* host) const;
  Status AllocateSlots();
  Result<Tensor> Alloc(DType dtype, std::vector<int64_t> shape) {
    TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(dtype, std::move(shape), *context_.device.allocator));
    activation_bytes_ += static_cast<int64_t>(t.nbytes());
    return t;
  }

  // Loads micro-batch `m` of global batch `batch` (train or validation tokens) into the slot.
  Status LoadBatch(Slot& slot, const std::vector<int32_t>& tokens, const BatchPlan& plan, int64_t batch, int64_t m);
  // `training`: the backward follows (offload blocks spill); validation's forwards use a pool buffer only.
  Status Forward(Slot& slot, double scale, double* loss_sum, bool training = true);
  Status Backward(Slot& slot);
  Status BlockForward(const BlockParams& p, BlockActs& a, const Tensor& out);
  // `gelu_fresh`: a.gelu still holds this block's GELU output (its forward ran just before); otherwise
  // it is regenerated from a.fch.
  Status BlockBackward(const BlockParams& p, BlockActs& a, Tensor& dres, bool gelu_fresh);
  // The tensors block l of `slot` runs its forward into: the slot's own, or for a recompute block the
  // shared scratch with the slot's kept input as its `x`.
  BlockActs& ActsFor(Slot& slot, size_t l);
  // A kept block's tensors (no `x`), as views over one contiguous buffer (an offload pool buffer), each
  // 64-byte aligned, the shared ones (ShareLean) aside; with base == nullptr only counts the floats.
  int64_t ActsOver(float* base, BlockActs* a) const;
  int64_t SpillId(const Slot& slot, size_t l) const {
    return static_cast<int64_t>(&slot - slots_.data()) * static_cast<int64_t>(blocks_.size()) + static_cast<int64_t>(l);
  }
  // Starts reading back the next offload blocks below block `below` (prefetch depth: the pool less one).
  Status PrefetchBelow(const Slot& slot, size_t below);
  Status OpenSpill();
  void PublishSpill();
  Status AllocateBlockActs(BlockActs& a, bool with_input);
  void ShareLean(BlockActs& a) const;
  Status SendTensor(const Tensor& t, int peer, int tag, int64_t* handle);
  Status RecvTensor(Tensor& t, int peer, int tag);
  Status OptimizerStep(int64_t step);
  Result<double> Validate();

  LlmStageAssignment a_;
  ExecutorContext context_;
  KernelSet k_;
  TokenSplits data_;
  std::unique_ptr<BatchPlan> train_plan_, val_plan_;
  std::unique_ptr<WorkerComm> dp_comm_;  // this stage's replicas

  ParameterStore params_;
  size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0;
  std::vector<BlockParams> blocks_;
  std::vector<BlockPolicy> policies_;  // one per block of blocks_
  BlockActs recompute_;  // the recompute blocks' one scratch (no `x` of its own); empty without any
  BlockActs lean_;       // x2, mean1, mean2, gelu: written by every forward, kept by none
  Tensor resid_[2];      // the residual stream into kept blocks (alternating)
  // The offload blocks' spill file and buffers; null without any.
  std::unique_ptr<storage::SpillStore> spill_store_;
  std::unique_ptr<SpillPool> pool_;
  storage::SpillStats spill_reported_;     // what the metrics have been told so far
  SpillPoolCounters pool_reported_;
  bool validates_ = false;  // the job has a validation split
  Tensor m_, v_;  // AdamW moments, flat like the parameters

  std::vector<Slot> slots_;
  int64_t activation_bytes_ = 0;  // saved activations of every slot
  Tensor tmp_c_, tmp_c2_, tmp_4c_, tmp_4c2_, tmp_3c_, dres_[2], logits_, dlogits_, mask_, loss_, correct_, tied_;
  Tensor sumsq_;
  int dres_turn_ = 0;
  int64_t dres_send_[2] = {-1, -1};
  std::map<const void*, std::vector<float>> staging_;  // host copies of device tensors being sent

  // Per step.
  double wait_seconds_ = 0, forward_seconds_ = 0, backward_seconds_ = 0;
  double recompute_seconds_ = 0;  // the recompute blocks' forwards in backward (part of backward_seconds_)
  std::vector<double> step_seconds_, compute_seconds_;
  std::vector<std::vector<double>> val_loss_;
  int64_t last_val_step_ = -1;
};

Status GptStageExecutor::DeclareParameters() {
  const GptConfig& m = a_.model;
  const int64_t c = m.width;
  // Weight decay on the matrices (and the embeddings), not on biases and LayerNorm, as nanoGPT and the
  // PyTorch peer do.
  const auto add = [&](std::string name, std::vector<int64_t> shape) {
    const Decay decay = shape.size() >= 2 ? Decay::kL2 : Decay::kNone;
    return params_.Add({std::move(name), std::move(shape), ParamInit::kZeros, decay});
  };
  const StagePlacement& p = a_.place;
  if (p.first()) {
    wte_ = add("wte", {m.padded_vocab, c});
    wpe_ = add("wpe", {m.context, c});
  }
  for (int32_t l = p.first_block; l < p.end_block; ++l) {
    std::vector<size_t> idx;
    for (const std::string& n : BlockTensorNames()) idx.push_back(add(StrCat("h", l, ".", n), BlockTensorShape(n, c)));
    blocks_.push_back(BlockParams{idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], idx[7], idx[8], idx[9],
                                  idx[10], idx[11]});
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
Status GptStageExecutor::InitialValues(std::vector<float>* host) const {
  host->assign(static_cast<size_t>(params_.num_values()), 0.0f);
  std::optional<storage::LlmcCheckpoint> ck;
  std::map<std::string, storage::LlmcTensor> where;
  if (!a_.init_from.empty()) {
    TESSEL_ASSIGN_OR_RETURN(ck, storage::ReadLlmcCheckpoint(a_.init_from));
    if (!(ck->config == ToLlmc(a_.model))) {
      return UsageError(StrCat(a_.init_from, ": the checkpoint's shape (layers ", ck->config.num_layers, ", width ",
                               ck->config.channels, ", heads ", ck->config.num_heads, ", context ",
                               ck->config.max_seq_len, ", vocab ", ck->config.vocab_size, ") differs from the job's"));
    }
    for (const storage::LlmcTensor& t : storage::LlmcTensors(ck->config)) where[t.name] = t;
  }
  const double proj_std = 0.02 / std::sqrt(2.0 * a_.model.layers);
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_.spec(i).name;
    float* w = host->data() + params_.offset(i);
    const int64_t n = params_.value(i).numel();
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
    } else if (params_.spec(i).shape.size() >= 2) {
      std::mt19937_64 rng(Fnv1a(name, 0xcbf29ce484222325ULL ^ (context_.seed * 0x9E3779B97F4A7C15ULL)));
      std::normal_distribution<float> dist(0.0f, base == "attprojw" || base == "fcprojw" ? static_cast<float>(proj_std)
                                                                                        : 0.02f);
      for (int64_t j = 0; j < n; ++j) w[j] = dist(rng);
    }
  }
  return Status();
}


// Exactly BlockSavedFloatsPerToken(kKeep) floats a token (plus the input x when `with_input`), which the
// planner predicts with. What the backward does not need lives in the stage's shared `lean_` tensors
// (after Tempo): the mid-block residual x2 and the LayerNorm means, since both LayerNorms differentiate
// from their outputs (llm.layernorm.bwd_from_output), and the GELU's output, which the backward
// regenerates from the GELU's input (kept anyway for the GELU's own backward) with the same kernel.
Status GptStageExecutor::AllocateBlockActs(BlockActs& a, bool with_input) {
  const int64_t n = N(), c = C(), b = a_.train.microbatch, t = a_.train.seq_len, h = a_.model.heads;
  if (with_input) {
    TESSEL_ASSIGN_OR_RETURN(a.x, Alloc(DType::kF32, {n, c}));
  }
  TESSEL_ASSIGN_OR_RETURN(a.ln1, Alloc(DType::kF32, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(a.rstd1, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(a.qkv, Alloc(DType::kF32, {b, t, 3 * c}));
  TESSEL_ASSIGN_OR_RETURN(a.atty, Alloc(DType::kF32, {b, t, c}));
  TESSEL_ASSIGN_OR_RETURN(a.lse, Alloc(DType::kF32, {b, h, t}));
  TESSEL_ASSIGN_OR_RETURN(a.ln2, Alloc(DType::kF32, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(a.rstd2, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(a.fch, Alloc(DType::kF32, {n, 4 * c}));
  ShareLean(a);
  return Status();
}

void GptStageExecutor::ShareLean(BlockActs& a) const {
  a.x2 = View(lean_.x2, lean_.x2.shape());
  a.mean1 = View(lean_.mean1, lean_.mean1.shape());
  a.mean2 = View(lean_.mean2, lean_.mean2.shape());
  a.gelu = View(lean_.gelu, lean_.gelu.shape());
}

Status GptStageExecutor::AllocateSlots() {
  const int64_t n = N(), c = C(), b = a_.train.microbatch, t = a_.train.seq_len;
  const StagePlacement& p = a_.place;
  const int64_t count = std::min<int64_t>(p.stages - p.stage, a_.train.microbatches);
  slots_.resize(static_cast<size_t>(count));
  // Shared by every block and micro-batch: the forward's x2, LayerNorm means and GELU output, and the residual stream
  // into a kept block (two, so a block's output never lands on its input). A kept block differentiates
  // from its outputs, so its input is not kept; a recomputed or offloaded block keeps its own.
  TESSEL_ASSIGN_OR_RETURN(lean_.x2, Alloc(DType::kF32, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(lean_.mean1, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(lean_.mean2, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(lean_.gelu, Alloc(DType::kF32, {n, 4 * c}));
  for (Tensor& r : resid_) {
    TESSEL_ASSIGN_OR_RETURN(r, Alloc(DType::kF32, {n, c}));
  }
  for (Slot& slot : slots_) {
    for (size_t l = 0; l < blocks_.size(); ++l) {
      BlockActs a;
      if (policies_[l] == BlockPolicy::kKeep) {
        TESSEL_RETURN_IF_ERROR(AllocateBlockActs(a, /*with_input=*/false));
        a.x = View(resid_[l % 2], resid_[l % 2].shape());
      } else {
        TESSEL_ASSIGN_OR_RETURN(a.x, Alloc(DType::kF32, {n, c}));
      }
      slot.blocks.push_back(std::move(a));
    }
    TESSEL_ASSIGN_OR_RETURN(slot.out, Alloc(DType::kF32, {n, c}));
    if (p.first()) {
      TESSEL_ASSIGN_OR_RETURN(slot.tokens, Alloc(DType::kI32, {b, t}));
    }
    if (p.last()) {
      TESSEL_ASSIGN_OR_RETURN(slot.targets, Alloc(DType::kI64, {n}));
      TESSEL_ASSIGN_OR_RETURN(slot.lnf, Alloc(DType::kF32, {n, c}));
      TESSEL_ASSIGN_OR_RETURN(slot.meanf, Alloc(DType::kF32, {n}));
      TESSEL_ASSIGN_OR_RETURN(slot.rstdf, Alloc(DType::kF32, {n}));
    }
  }
  // One scratch for every recompute block and micro-batch: a backward runs one block at a time, and a
  // forward is done with a recompute block's tensors as soon as its output is written.
  if (std::find(policies_.begin(), policies_.end(), BlockPolicy::kRecompute) != policies_.end()) {
    TESSEL_RETURN_IF_ERROR(AllocateBlockActs(recompute_, /*with_input=*/false));
  }
  Allocator& alloc = *context_.device.allocator;
  TESSEL_ASSIGN_OR_RETURN(tmp_c_, Tensor::Empty(DType::kF32, {n, c}, alloc));
  TESSEL_ASSIGN_OR_RETURN(tmp_c2_, Tensor::Empty(DType::kF32, {n, c}, alloc));
  TESSEL_ASSIGN_OR_RETURN(tmp_4c_, Tensor::Empty(DType::kF32, {n, 4 * c}, alloc));
  TESSEL_ASSIGN_OR_RETURN(tmp_4c2_, Tensor::Empty(DType::kF32, {n, 4 * c}, alloc));
  TESSEL_ASSIGN_OR_RETURN(tmp_3c_, Tensor::Empty(DType::kF32, {b, t, 3 * c}, alloc));
  for (Tensor& d : dres_) {
    TESSEL_ASSIGN_OR_RETURN(d, Tensor::Empty(DType::kF32, {n, c}, alloc));
  }
  TESSEL_ASSIGN_OR_RETURN(sumsq_, Tensor::Empty(DType::kF64, {1}, alloc));
  if (p.last()) {
    TESSEL_ASSIGN_OR_RETURN(logits_, Tensor::Empty(DType::kF32, {n, a_.model.vocab}, alloc));
    TESSEL_ASSIGN_OR_RETURN(dlogits_, Tensor::Empty(DType::kF32, {n, a_.model.vocab}, alloc));
    TESSEL_ASSIGN_OR_RETURN(loss_, Tensor::Empty(DType::kF64, {1}, alloc));
    TESSEL_ASSIGN_OR_RETURN(correct_, Tensor::Empty(DType::kI64, {1}, alloc));
    std::vector<uint8_t> ones(static_cast<size_t>(n), 1);
    TESSEL_ASSIGN_OR_RETURN(mask_, Tensor::Empty(DType::kU8, {n}, alloc));
    TESSEL_RETURN_IF_ERROR(CopyMemory(mask_.raw(), mask_.device(), ones.data(), Device::kCpu, ones.size(),
                                      context_.device.stream));
  }
  if (p.stages > 1 && (p.first() || p.last())) {
    TESSEL_ASSIGN_OR_RETURN(tied_, Tensor::Empty(DType::kF32, {params_.value(wte_).numel()}, alloc));
  }
  return Status();
}

Status GptStageExecutor::Init() {
  const StagePlacement& p = a_.place;
  const LlmTrainSettings& t = a_.train;
  TESSEL_RETURN_IF_ERROR(k_.Require(Ops()));
  // The replicas of this stage sum their gradients over their own communicator. Collective over every
  // worker: first, before anything that fails on some stages only (their data) could leave the others
  // waiting here.
  TESSEL_ASSIGN_OR_RETURN(dp_comm_, context_.comm->Split(p.stage));
  policies_ = a_.block_policies;
  if (std::find(policies_.begin(), policies_.end(), BlockPolicy::kOffload) != policies_.end()) {
    TESSEL_RETURN_IF_ERROR(OpenSpill());
  }
  validates_ = HasValidation(a_.data);
  if (p.first() || p.last()) {
    TESSEL_ASSIGN_OR_RETURN(data_, LoadTokenSplits(a_.data, a_.model.vocab, t.global_batch(), t.seq_len));
    train_plan_ = std::make_unique<BatchPlan>(static_cast<int64_t>(data_.train.size()), t.seq_len, t.global_batch(),
                                              a_.data.shuffled, a_.data.shuffle_seed);
    val_plan_ = std::make_unique<BatchPlan>(static_cast<int64_t>(data_.val.size()), t.seq_len, t.global_batch(),
                                            false, 0);
  }
  TESSEL_RETURN_IF_ERROR(DeclareParameters());
  TESSEL_RETURN_IF_ERROR(params_.Allocate(context_.device, context_.seed));
  std::vector<float> host;
  TESSEL_RETURN_IF_ERROR(InitialValues(&host));
  TESSEL_RETURN_IF_ERROR(CopyMemory(params_.flat_value().raw(), params_.flat_value().device(), host.data(),
                                    Device::kCpu, host.size() * sizeof(float), context_.device.stream));
  for (Tensor* moment : {&m_, &v_}) {
    TESSEL_ASSIGN_OR_RETURN(*moment, Tensor::Empty(DType::kF32, {params_.num_values()}, *context_.device.allocator));
    TESSEL_RETURN_IF_ERROR(ZeroMemory(moment->raw(), moment->device(), moment->nbytes(), context_.device.stream));
  }
  TESSEL_RETURN_IF_ERROR(AllocateSlots());
  if (context_.metrics != nullptr) context_.metrics->SetActivationResidentBytes(activation_bytes_);
  return Status();
}

Status GptStageExecutor::LoadBatch(Slot& slot, const std::vector<int32_t>& tokens, const BatchPlan& plan, int64_t batch,
                                   int64_t m) {
  const int64_t b = a_.train.microbatch, t = a_.train.seq_len;
  const int64_t first_seq = (int64_t{a_.place.replica} * a_.train.microbatches + m) * b;
  std::vector<int32_t> in(static_cast<size_t>(b * t));
  std::vector<int64_t> targets(static_cast<size_t>(b * t));
  for (int64_t i = 0; i < b; ++i) {
    const int64_t start = plan.Start(batch, first_seq + i);
    for (int64_t j = 0; j < t; ++j) {
      in[static_cast<size_t>(i * t + j)] = tokens[static_cast<size_t>(start + j)];
      targets[static_cast<size_t>(i * t + j)] = tokens[static_cast<size_t>(start + j + 1)];
    }
  }
  void* stream = context_.device.stream;
  if (a_.place.first()) {
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(slot.tokens.raw(), slot.tokens.device(), in.data(), Device::kCpu, slot.tokens.nbytes(), stream));
  }
  if (a_.place.last()) {
    TESSEL_RETURN_IF_ERROR(CopyMemory(slot.targets.raw(), slot.targets.device(), targets.data(), Device::kCpu,
                                      slot.targets.nbytes(), stream));
  }
  return Status();
}

Status GptStageExecutor::SendTensor(const Tensor& t, int peer, int tag, int64_t* handle) {
  const float* data = t.data<float>();
  if (t.device() != Device::kCpu) {
    // Through host memory (no CUDA-aware MPI assumed).
    std::vector<float>& host = staging_[t.raw()];
    host.resize(static_cast<size_t>(t.numel()));
    TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, t.raw(), t.device(), t.nbytes(), context_.device.stream));
    data = host.data();
  }
  TESSEL_ASSIGN_OR_RETURN(*handle, context_.comm->Isend(peer, data, t.numel(), tag));
  return Status();
}

Status GptStageExecutor::RecvTensor(Tensor& t, int peer, int tag) {
  const auto start = Clock::now();
  if (t.device() == Device::kCpu) {
    TESSEL_RETURN_IF_ERROR(context_.comm->Recv(peer, t.data<float>(), t.numel(), tag, timeout()));
  } else {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    TESSEL_RETURN_IF_ERROR(context_.comm->Recv(peer, host.data(), t.numel(), tag, timeout()));
    TESSEL_RETURN_IF_ERROR(CopyMemory(t.raw(), t.device(), host.data(), Device::kCpu, t.nbytes(), context_.device.stream));
  }
  wait_seconds_ += Since(start);
  return Status();
}

Status GptStageExecutor::BlockForward(const BlockParams& p, BlockActs& a, const Tensor& out) {
  const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
  const tessel_attention_params at{sizeof(tessel_attention_params), a_.model.heads};
  const int64_t n = N(), c = C();
  const auto v = [&](size_t i) -> const Tensor& { return params_.value(i); };
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_fwd, {&a.x, &v(p.ln1w), &v(p.ln1b)}, {&a.ln1, &a.mean1, &a.rstd1}, ln));
  Tensor qkv2 = View(a.qkv, {n, 3 * c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&a.ln1, &v(p.qkvw), &v(p.qkvb)}, {&qkv2}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_attention_fwd, {&a.qkv}, {&a.atty, &a.lse}, at));
  Tensor atty2 = View(a.atty, {n, c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&atty2, &v(p.attprojw), &v(p.attprojb)}, {&tmp_c_}));
  Tensor fx = Flat(a.x), fproj = Flat(tmp_c_), fx2 = Flat(a.x2);
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_add, {&fx, &fproj}, {&fx2}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_fwd, {&a.x2, &v(p.ln2w), &v(p.ln2b)}, {&a.ln2, &a.mean2, &a.rstd2}, ln));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&a.ln2, &v(p.fcw), &v(p.fcb)}, {&a.fch}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_tanh_fwd, {&a.fch}, {&a.gelu}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&a.gelu, &v(p.fcprojw), &v(p.fcprojb)}, {&tmp_c_}));
  Tensor fout = Flat(out);
  return k_.Call(tessel_op_nn_add, {&fx2, &fproj}, {&fout});
}

// dres holds the gradient of the block's output on entry and of its input on return.
Status GptStageExecutor::BlockBackward(const BlockParams& p, BlockActs& a, Tensor& dres, bool gelu_fresh) {
  const tessel_attention_params at{sizeof(tessel_attention_params), a_.model.heads};
  const int64_t n = N(), c = C();
  const auto v = [&](size_t i) -> const Tensor& { return params_.value(i); };
  const auto g = [&](size_t i) -> Tensor& { return params_.grad(i); };
  // MLP: x3 = x2 + fcproj(gelu(fc(ln2(x2)))). fcproj's weight gradient needs gelu(fch): the forward's
  // kernel on the same input, so the same bits as the forward used.
  if (!gelu_fresh) TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_tanh_fwd, {&a.fch}, {&a.gelu}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_bwd, {&dres, &a.gelu, &v(p.fcprojw)}, {&tmp_4c_, &g(p.fcprojw), &g(p.fcprojb)}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_tanh_bwd, {&tmp_4c_, &a.fch}, {&tmp_4c2_}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_bwd, {&tmp_4c2_, &a.ln2, &v(p.fcw)}, {&tmp_c_, &g(p.fcw), &g(p.fcb)}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_bwd_from_output,
                                 {&tmp_c_, &a.ln2, &v(p.ln2w), &v(p.ln2b), &a.rstd2},
                                 {&dres, &g(p.ln2w), &g(p.ln2b)}));
  // Attention: x2 = x + attproj(attn(qkv(ln1(x)))).
  Tensor datty = View(tmp_c2_, {n, c});
  Tensor atty2 = View(a.atty, {n, c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_bwd, {&dres, &atty2, &v(p.attprojw)}, {&datty, &g(p.attprojw), &g(p.attprojb)}));
  Tensor datty3 = View(tmp_c2_, {a_.train.microbatch, a_.train.seq_len, c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_attention_bwd, {&datty3, &a.qkv, &a.atty, &a.lse}, {&tmp_3c_}, at));
  Tensor dqkv2 = View(tmp_3c_, {n, 3 * c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_bwd, {&dqkv2, &a.ln1, &v(p.qkvw)}, {&tmp_c_, &g(p.qkvw), &g(p.qkvb)}));
  return k_.Call(tessel_op_llm_layernorm_bwd_from_output, {&tmp_c_, &a.ln1, &v(p.ln1w), &v(p.ln1b), &a.rstd1},
                 {&dres, &g(p.ln1w), &g(p.ln1b)});
}

BlockActs& GptStageExecutor::ActsFor(Slot& slot, size_t l) {
  if (policies_[l] != BlockPolicy::kRecompute) return slot.blocks[l];
  recompute_.x = View(slot.blocks[l].x, slot.blocks[l].x.shape());
  return recompute_;
}

int64_t GptStageExecutor::ActsOver(float* base, BlockActs* a) const {
  const int64_t n = N(), c = C(), b = a_.train.microbatch, t = a_.train.seq_len, h = a_.model.heads;
  int64_t at = 0;
  const auto take = [&](Tensor* out, std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (base != nullptr) *out = Tensor::Borrow(base + at, DType::kF32, std::move(shape), context_.device.device);
    at += (count + 15) / 16 * 16;
  };
  BlockActs unused;
  BlockActs& v = a != nullptr ? *a : unused;
  take(&v.ln1, {n, c});
  take(&v.rstd1, {n});
  take(&v.qkv, {b, t, 3 * c});
  take(&v.atty, {b, t, c});
  take(&v.lse, {b, h, t});
  take(&v.ln2, {n, c});
  take(&v.rstd2, {n});
  take(&v.fch, {n, 4 * c});
  if (a != nullptr) ShareLean(*a);
  return at;
}

Status GptStageExecutor::OpenSpill() {
  const LlmSpillSettings& sp = a_.spill;
  // A failure here (an unwritable directory: exit 6) comes before the first step.
  const storage::SpillOptions options{sp.dir, StrCat(sp.name, "-w", worker()), sp.checksum, sp.budget_bytes};
  TESSEL_ASSIGN_OR_RETURN(spill_store_, context_.open_spill ? context_.open_spill(options)
                                                            : storage::SpillStore::Open(options));
  const auto offloads = static_cast<int32_t>(std::count(policies_.begin(), policies_.end(), BlockPolicy::kOffload));
  TESSEL_ASSIGN_OR_RETURN(pool_, SpillPool::Create(spill_store_.get(), ActsOver(nullptr, nullptr),
                                                   OffloadBuffers(offloads), context_.device, context_.log));
  activation_bytes_ += pool_->resident_bytes();
  if (context_.log != nullptr) {
    context_.log->Debug(StrCat("spill file ", spill_store_->path(), ": ", OffloadBuffers(offloads), " buffers of ",
                               pool_->bytes(), " bytes"));
  }
  return Status();
}

Status GptStageExecutor::PrefetchBelow(const Slot& slot, size_t below) {
  int32_t ahead = 0;
  for (size_t l = below; l-- > 0 && ahead < pool_->buffers() - 1;) {
    if (policies_[l] != BlockPolicy::kOffload) continue;
    TESSEL_RETURN_IF_ERROR(pool_->Prefetch(SpillId(slot, l)));
    ++ahead;
  }
  return Status();
}

void GptStageExecutor::PublishSpill() {
  if (pool_ == nullptr || context_.metrics == nullptr) return;
  const storage::SpillStats now = spill_store_->stats();
  context_.metrics->AddSpillIo(now.written_bytes - spill_reported_.written_bytes,
                               now.read_bytes - spill_reported_.read_bytes,
                               now.wait_seconds - spill_reported_.wait_seconds);
  spill_reported_ = now;
  const SpillPoolCounters& c = pool_->counters();
  context_.metrics->AddSpillFallbacks(monitoring::Metrics::SpillFallback::kRecompute,
                                      c.recomputed - pool_reported_.recomputed);
  pool_reported_ = c;
}

Status GptStageExecutor::Forward(Slot& slot, double scale, double* loss_sum, bool training) {
  const auto start = Clock::now();
  const StagePlacement& p = a_.place;
  const int64_t c = C();
  TESSEL_RETURN_IF_ERROR(context_.comm->WaitSend(slot.send_out, timeout()));
  Tensor& in = slot.blocks.empty() ? slot.out : slot.blocks[0].x;
  if (p.first()) {
    Tensor x3 = View(in, {a_.train.microbatch, a_.train.seq_len, c});
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_llm_encoder_fwd, {&params_.value(wte_), &params_.value(wpe_), &slot.tokens}, {&x3}));
  } else {
    const double waited = wait_seconds_;
    TESSEL_RETURN_IF_ERROR(RecvTensor(in, worker() - 1, kTagForward));
    forward_seconds_ -= wait_seconds_ - waited;
  }
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Tensor& out = l + 1 < blocks_.size() ? slot.blocks[l + 1].x : slot.out;
    if (policies_[l] != BlockPolicy::kOffload) {
      TESSEL_RETURN_IF_ERROR(BlockForward(blocks_[l], ActsFor(slot, l), out));
      continue;
    }
    // Into a pool buffer, written out while the next blocks compute (validation: only the buffer).
    const int64_t id = training ? SpillId(slot, l) : -1;
    TESSEL_ASSIGN_OR_RETURN(float* buffer, pool_->Acquire(id));
    BlockActs a;
    ActsOver(buffer, &a);
    a.x = View(slot.blocks[l].x, slot.blocks[l].x.shape());
    TESSEL_RETURN_IF_ERROR(BlockForward(blocks_[l], a, out));
    if (training) {
      TESSEL_RETURN_IF_ERROR(pool_->Offload(id));
    } else {
      TESSEL_RETURN_IF_ERROR(pool_->Release(id));
    }
  }
  if (p.last()) {
    const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_fwd, {&slot.out, &params_.value(lnfw_), &params_.value(lnfb_)},
                                   {&slot.lnf, &slot.meanf, &slot.rstdf}, ln));
    // logits = lnf wte[:V]^T: only the real vocabulary is scored (llm.c pads wte's rows).
    Tensor wte_v = View(params_.value(wte_), {a_.model.vocab, c});
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&slot.lnf, &wte_v}, {&logits_},
                                   tessel_gemm_params{sizeof(tessel_gemm_params), 0, 1, 1.0, 0.0}));
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_softmax_xent, {&logits_, &slot.targets, &mask_},
                                   {&loss_, &correct_, &dlogits_},
                                   tessel_softmax_xent_params{sizeof(tessel_softmax_xent_params), scale}));
    double loss = 0;
    TESSEL_RETURN_IF_ERROR(CopyMemory(&loss, Device::kCpu, loss_.raw(), loss_.device(), sizeof loss, context_.device.stream));
    *loss_sum += loss;
  } else {
    TESSEL_RETURN_IF_ERROR(SendTensor(slot.out, worker() + 1, kTagForward, &slot.send_out));
  }
  forward_seconds_ += Since(start);
  return Status();
}

Status GptStageExecutor::Backward(Slot& slot) {
  const auto start = Clock::now();
  const StagePlacement& p = a_.place;
  const int64_t c = C();
  dres_turn_ ^= 1;
  Tensor& dres = dres_[dres_turn_];
  if (pool_ != nullptr) TESSEL_RETURN_IF_ERROR(PrefetchBelow(slot, blocks_.size()));
  TESSEL_RETURN_IF_ERROR(context_.comm->WaitSend(dres_send_[dres_turn_], timeout()));
  if (p.last()) {
    TESSEL_RETURN_IF_ERROR(ZeroMemory(dres.raw(), dres.device(), dres.nbytes(), context_.device.stream));
    Tensor wte_v = View(params_.value(wte_), {a_.model.vocab, c});
    Tensor dwte_v = View(params_.grad(wte_), {a_.model.vocab, c});
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&dlogits_, &wte_v}, {&tmp_c_},
                                   tessel_gemm_params{sizeof(tessel_gemm_params), 0, 0, 1.0, 0.0}));
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&dlogits_, &slot.lnf}, {&dwte_v},
                                   tessel_gemm_params{sizeof(tessel_gemm_params), 1, 0, 1.0, 1.0}));
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_bwd,
                                   {&tmp_c_, &slot.out, &params_.value(lnfw_), &slot.meanf, &slot.rstdf},
                                   {&dres, &params_.grad(lnfw_), &params_.grad(lnfb_)}));
  } else {
    const double waited = wait_seconds_;
    TESSEL_RETURN_IF_ERROR(RecvTensor(dres, worker() + 1, kTagBackward));
    backward_seconds_ -= wait_seconds_ - waited;
  }
  for (size_t l = blocks_.size(); l-- > 0;) {
    if (policies_[l] == BlockPolicy::kOffload) {
      const int64_t id = SpillId(slot, l);
      TESSEL_ASSIGN_OR_RETURN(float* buffer, pool_->Get(id));
      BlockActs a;
      bool recomputed = false;
      if (buffer == nullptr) {
        // Not on disk (the disk was full) or damaged there: recomputed from the kept input, as a
        // recompute block would be (the same kernels, so the same numbers).
        TESSEL_ASSIGN_OR_RETURN(buffer, pool_->Acquire(id));
        ActsOver(buffer, &a);
        a.x = View(slot.blocks[l].x, slot.blocks[l].x.shape());
        const auto recompute_start = Clock::now();
        TESSEL_RETURN_IF_ERROR(BlockForward(blocks_[l], a, tmp_c2_));
        recompute_seconds_ += Since(recompute_start);
        recomputed = true;
      } else {
        ActsOver(buffer, &a);
        a.x = View(slot.blocks[l].x, slot.blocks[l].x.shape());
      }
      TESSEL_RETURN_IF_ERROR(BlockBackward(blocks_[l], a, dres, recomputed));
      TESSEL_RETURN_IF_ERROR(pool_->Release(id));
      TESSEL_RETURN_IF_ERROR(PrefetchBelow(slot, l));
      continue;
    }
    if (policies_[l] == BlockPolicy::kRecompute) {
      // The same kernels on the same input and weights: the scratch gets bit for bit what the forward
      // computed. The recomputed output goes to tmp_c2_, free until BlockBackward (it is a temporary
      // there): the block's real output (the next block's input, or `out`, which may still be on its
      // way to the next stage) must not be written under a send.
      const auto recompute_start = Clock::now();
      TESSEL_RETURN_IF_ERROR(BlockForward(blocks_[l], ActsFor(slot, l), tmp_c2_));
      recompute_seconds_ += Since(recompute_start);
    }
    TESSEL_RETURN_IF_ERROR(
        BlockBackward(blocks_[l], ActsFor(slot, l), dres, policies_[l] == BlockPolicy::kRecompute));
  }
  if (p.first()) {
    Tensor d3 = View(dres, {a_.train.microbatch, a_.train.seq_len, c});
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_llm_encoder_bwd, {&d3, &slot.tokens}, {&params_.grad(wte_), &params_.grad(wpe_)}));
  } else {
    TESSEL_RETURN_IF_ERROR(SendTensor(dres, worker() - 1, kTagBackward, &dres_send_[dres_turn_]));
  }
  backward_seconds_ += Since(start);
  return Status();
}

Status GptStageExecutor::OptimizerStep(int64_t step) {
  const StagePlacement& p = a_.place;
  const LlmTrainSettings& t = a_.train;
  void* stream = context_.device.stream;
  Tensor& flat = params_.flat_grad();
  if (t.data_parallel > 1) {
    if (flat.device() == Device::kCpu) {
      TESSEL_RETURN_IF_ERROR(dp_comm_->AllreduceSum(flat.data<float>(), flat.numel()));
    } else {
      std::vector<float> host(static_cast<size_t>(flat.numel()));
      TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, flat.raw(), flat.device(), flat.nbytes(), stream));
      TESSEL_RETURN_IF_ERROR(dp_comm_->AllreduceSum(host.data(), flat.numel()));
      TESSEL_RETURN_IF_ERROR(CopyMemory(flat.raw(), flat.device(), host.data(), Device::kCpu, flat.nbytes(), stream));
    }
  }
  // The tied embedding, after the replicas' sums: the first and the last stage add each other's wte
  // gradient (a + b == b + a, so both copies get bit-identical sums and stay equal, whatever order the
  // two stages' allreduces added their replicas in).
  if (p.stages > 1 && (p.first() || p.last())) {
    const int peer = p.first() ? worker() + p.stages - 1 : worker() - (p.stages - 1);
    int64_t handle = -1;
    Tensor gf = Flat(params_.grad(wte_));
    TESSEL_RETURN_IF_ERROR(SendTensor(gf, peer, kTagTiedGrad, &handle));
    TESSEL_RETURN_IF_ERROR(RecvTensor(tied_, peer, kTagTiedGrad));
    TESSEL_RETURN_IF_ERROR(context_.comm->WaitSend(handle, timeout()));
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_add, {&gf, &tied_}, {&gf}));
  }
  // The global gradient norm: every parameter once (the head's wte copy is the first stage's), from
  // replica 0 (the replicas' gradients are equal by now).
  double scale = 1;
  if (t.grad_clip > 0) {
    double local = 0;
    if (p.replica == 0) {
      // One sum over the flat gradients; the head's wte copy (declared last) is left out.
      const int64_t count = p.last() && !p.first() ? params_.offset(wte_) : flat.numel();
      Tensor g = Tensor::Borrow(flat.raw(), DType::kF32, {count}, flat.device());
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_sum_squares, {&g}, {&sumsq_}));
      TESSEL_RETURN_IF_ERROR(CopyMemory(&local, Device::kCpu, sumsq_.raw(), sumsq_.device(), sizeof local, stream));
    }
    TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&local, 1));
    const double norm = std::sqrt(local);
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6), at most 1.
    scale = std::min(1.0, t.grad_clip / (norm + 1e-6));
  }
  const double lr = LearningRate(t, step - 1);
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t off = params_.offset(i), n = params_.value(i).numel();
    Tensor value = Flat(params_.value(i)), grad = Flat(params_.grad(i));
    Tensor m = Tensor::Borrow(m_.data<float>() + off, DType::kF32, {n}, m_.device());
    Tensor v = Tensor::Borrow(v_.data<float>() + off, DType::kF32, {n}, v_.device());
    const tessel_adamw_params hp{sizeof(tessel_adamw_params), lr, t.beta1, t.beta2, t.eps,
                                 params_.spec(i).decay == Decay::kL2 ? t.weight_decay : 0.0, scale, step};
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_optim_adamw_step, {&value, &grad, &m, &v}, {}, hp));
  }
  return ZeroMemory(flat.raw(), flat.device(), flat.nbytes(), stream);
}

Result<StepResult> GptStageExecutor::Step(int64_t step) {
  const auto start = Clock::now();
  const StagePlacement& p = a_.place;
  const int64_t m_count = a_.train.microbatches;
  wait_seconds_ = forward_seconds_ = backward_seconds_ = recompute_seconds_ = 0;
  const double scale = 1.0 / (static_cast<double>(N()) * static_cast<double>(a_.train.global_batch() / a_.train.microbatch));
  double loss_sum = 0;
  const auto slot_of = [&](int64_t i) -> Slot& { return slots_[static_cast<size_t>(i % static_cast<int64_t>(slots_.size()))]; };
  const auto forward = [&](int64_t i) -> Status {
    Slot& slot = slot_of(i);
    if (p.first() || p.last()) TESSEL_RETURN_IF_ERROR(LoadBatch(slot, data_.train, *train_plan_, step - 1, i));
    return Forward(slot, scale, &loss_sum);
  };
  // 1F1B: warm up with the forwards the later stages need, then one forward and one backward, then drain.
  const int64_t warmup = std::min<int64_t>(p.stages - p.stage - 1, m_count);
  for (int64_t i = 0; i < warmup; ++i) TESSEL_RETURN_IF_ERROR(forward(i));
  for (int64_t i = 0; i + warmup < m_count; ++i) {
    TESSEL_RETURN_IF_ERROR(forward(i + warmup));
    TESSEL_RETURN_IF_ERROR(Backward(slot_of(i)));
  }
  for (int64_t i = m_count - warmup; i < m_count; ++i) TESSEL_RETURN_IF_ERROR(Backward(slot_of(i)));
  TESSEL_RETURN_IF_ERROR(context_.comm->WaitSends(timeout()));
  if (pool_ != nullptr) {
    TESSEL_RETURN_IF_ERROR(pool_->Drain());
    PublishSpill();
  }
  const auto opt_start = Clock::now();
  TESSEL_RETURN_IF_ERROR(OptimizerStep(step));
  const double opt_seconds = Since(opt_start);
  // The mean loss over every target of the global batch, the same on every worker.
  double total = p.last() ? loss_sum : 0.0;
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&total, 1));
  StepResult r;
  r.loss = total / (static_cast<double>(a_.train.global_batch()) * a_.train.seq_len);
  const double seconds = Since(start);
  step_seconds_.push_back(seconds);
  compute_seconds_.push_back((forward_seconds_ + backward_seconds_) / static_cast<double>(m_count));
  Set(r.timings, "forward_seconds", forward_seconds_);
  Set(r.timings, "backward_seconds", backward_seconds_);
  Set(r.timings, "wait_seconds", wait_seconds_);
  Set(r.timings, "recompute_seconds", recompute_seconds_);
  Set(r.timings, "optimizer_seconds", opt_seconds);
  Set(r.shown, "lr", LearningRate(a_.train, step - 1));
  Set(r.shown, "tokens_per_second",
      static_cast<double>(a_.train.global_batch()) * a_.train.seq_len / std::max(seconds, 1e-9));
  if (validates_ && a_.train.val_every > 0 && step % a_.train.val_every == 0) {
    TESSEL_ASSIGN_OR_RETURN(double val, Validate());
    val_loss_.push_back({static_cast<double>(step), val});
    last_val_step_ = step;
    Set(r.shown, "val_loss", val);
  }
  return r;
}

Result<double> GptStageExecutor::Validate() {
  const StagePlacement& p = a_.place;
  const LlmTrainSettings& t = a_.train;
  int64_t batches = 0;
  if (p.first() || p.last()) {
    batches = val_plan_->batches_per_pass();
    if (t.val_batches > 0) batches = std::min<int64_t>(batches, t.val_batches);
  }
  // Every worker needs the count (the middle stages hold no data): the first stage's, summed over the
  // first stages of the replicas and divided back.
  int64_t count = p.first() ? batches : 0;
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&count, 1));
  batches = count / t.data_parallel;
  double loss_sum = 0;
  const double saved_wait = wait_seconds_, saved_f = forward_seconds_;
  for (int64_t v = 0; v < batches; ++v) {
    for (int64_t m = 0; m < t.microbatches; ++m) {
      Slot& slot = slots_[0];
      if (p.first() || p.last()) TESSEL_RETURN_IF_ERROR(LoadBatch(slot, data_.val, *val_plan_, v, m));
      TESSEL_RETURN_IF_ERROR(Forward(slot, 0.0, &loss_sum, /*training=*/false));
    }
  }
  TESSEL_RETURN_IF_ERROR(context_.comm->WaitSends(timeout()));
  wait_seconds_ = saved_wait, forward_seconds_ = saved_f;
  double total = p.last() ? loss_sum : 0.0;
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&total, 1));
  if (batches == 0) return 0.0;
  return total / (static_cast<double>(batches) * static_cast<double>(t.global_batch()) * t.seq_len);
}

Result<Record> GptStageExecutor::Evaluate() {
  const StagePlacement& p = a_.place;
  const LlmTrainSettings& t = a_.train;
  if (validates_ && last_val_step_ != t.steps) {
    TESSEL_ASSIGN_OR_RETURN(double val, Validate());
    val_loss_.push_back({static_cast<double>(t.steps), val});
  }
  Record r;
  Set(r, "model", "gpt2");
  Set(r, "val_loss", NumberRows{val_loss_});
  if (!val_loss_.empty()) Set(r, "final_val_loss", val_loss_.back()[1]);
  // Steady-state figures leave out the first step (allocation, first touches).
  const size_t skip = step_seconds_.size() > 1 ? 1 : 0;
  double seconds = 0, compute = 0;
  for (size_t i = skip; i < step_seconds_.size(); ++i) seconds += step_seconds_[i], compute += compute_seconds_[i];
  const double steps = static_cast<double>(step_seconds_.size() - skip);
  const double tokens = static_cast<double>(t.global_batch()) * t.seq_len;
  // Per-worker figures as arrays indexed by worker, and per-block ones indexed by block (filled by
  // replica 0): each worker fills its entries, the sum gathers them.
  const int workers = context_.comm->size();
  const size_t layers = static_cast<size_t>(a_.model.layers), per_block_at = static_cast<size_t>(2 * workers);
  std::vector<double> per_worker(per_block_at + layers, 0.0);
  per_worker[static_cast<size_t>(worker())] = steps > 0 ? compute / steps : 0.0;
  per_worker[static_cast<size_t>(workers + worker())] = static_cast<double>(activation_bytes_);
  if (p.replica == 0) {
    for (size_t l = 0; l < policies_.size(); ++l) {
      per_worker[per_block_at + static_cast<size_t>(p.first_block) + l] =
          static_cast<double>(sizeof(float) * BlockSavedFloatsPerToken(policies_[l], C(), a_.model.heads));
    }
  }
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(per_worker.data(), static_cast<int64_t>(per_worker.size())));
  double mean_step = steps > 0 ? seconds / steps : 0.0;
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&mean_step, 1));
  mean_step /= workers;
  Set(r, "tokens_per_second", mean_step > 0 ? tokens / mean_step : 0.0);
  Set(r, "mean_step_seconds", mean_step);
  Set(r, "stage_compute_seconds_per_microbatch",
      std::vector<double>(per_worker.begin(), per_worker.begin() + workers));
  double peak = 0;
  for (int w = 0; w < workers; ++w) peak = std::max(peak, per_worker[static_cast<size_t>(workers + w)]);
  Set(r, "peak_resident_activation_bytes", static_cast<int64_t>(peak));
  // What each block keeps per token and micro-batch in flight under its policy, and what a block keeps
  // when it keeps everything (the figure "keep" would give every block).
  Set(r, "saved_activation_bytes_per_token",
      std::vector<double>(per_worker.begin() + static_cast<std::ptrdiff_t>(per_block_at), per_worker.end()));
  Set(r, "saved_activation_bytes_per_token_keep_all",
      static_cast<int64_t>(sizeof(float) * BlockSavedFloatsPerToken(BlockPolicy::kKeep, C(), a_.model.heads)));
  // What a block would keep saving everything autograd saves (PyTorch eager): both LayerNorms' inputs and
  // means, and the attention's T x T probabilities per head (H T a token) instead of their log-sum-exps.
  Set(r, "saved_activation_bytes_per_token_save_everything",
      static_cast<int64_t>(sizeof(float) * (16 * C() + 4 + int64_t{a_.model.heads} * a_.train.seq_len)));
  {
    // The same two counts by layer type, [kept, saved by autograd], bytes a token and block: the two
    // LayerNorms (rstd; autograd: input, mean, rstd), attention (qkv, output and per-row log-sum-exps;
    // autograd: the probabilities instead), the MLP's GELU (its input; autograd: input and output), and
    // the LayerNorms' outputs, which the qkv and fc matmuls need either way.
    const double f = sizeof(float), c = static_cast<double>(C()), h = a_.model.heads;
    Record by;
    Set(by, "layernorm", std::vector<double>{2 * f, (2 * c + 4) * f});
    Set(by, "attention", std::vector<double>{(4 * c + h) * f, (4 * c + h * static_cast<double>(a_.train.seq_len)) * f});
    Set(by, "mlp_gelu", std::vector<double>{4 * c * f, 8 * c * f});
    Set(by, "layernorm_outputs", std::vector<double>{2 * c * f, 2 * c * f});
    Set(r, "saved_activation_bytes_per_token_by_layer", by);
  }
  Set(r, "pipeline_stages", static_cast<int64_t>(p.stages));
  Set(r, "data_parallel", static_cast<int64_t>(t.data_parallel));
  // The spill store's totals over every worker (zeros where no block offloads).
  std::vector<double> spill(8, 0.0);
  if (pool_ != nullptr) {
    const storage::SpillStats st = spill_store_->stats();
    const SpillPoolCounters& c = pool_->counters();
    spill = {static_cast<double>(st.written_bytes), static_cast<double>(st.read_bytes), st.write_seconds,
             st.read_seconds, st.wait_seconds, static_cast<double>(c.late_fetches), static_cast<double>(c.recomputed),
             static_cast<double>(c.no_space_fallbacks + c.checksum_fallbacks)};
  }
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(spill.data(), static_cast<int64_t>(spill.size())));
  if (spill[0] > 0 || spill[6] > 0) {
    Record sr;
    Set(sr, "written_bytes", static_cast<int64_t>(spill[0]));
    Set(sr, "read_bytes", static_cast<int64_t>(spill[1]));
    Set(sr, "write_seconds", spill[2]);
    Set(sr, "read_seconds", spill[3]);
    Set(sr, "wait_seconds", spill[4]);
    Set(sr, "late_fetches", static_cast<int64_t>(spill[5]));
    Set(sr, "recomputed_blocks", static_cast<int64_t>(spill[6]));
    Set(sr, "fallbacks", static_cast<int64_t>(spill[7]));
    Set(r, "spill", sr);
  }
  if (!context_.run_dir.empty() && p.replica == 0) {
    const std::string dir = context_.run_dir + "/weights";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::vector<float> host(static_cast<size_t>(params_.num_values()));
    TESSEL_RETURN_IF_ERROR(CopyMemory(host.data(), Device::kCpu, params_.flat_value().raw(),
                                      params_.flat_value().device(), host.size() * sizeof(float), context_.device.stream));
    // The file holds the stage's tensors in declaration order (stage_weights.h); the head's wte copy,
    // declared last, is the first stage's and is left out.
    if (p.last() && !p.first()) host.resize(static_cast<size_t>(params_.offset(wte_)));
    TESSEL_RETURN_IF_ERROR(WriteStageWeights(StrCat(dir, "/stage-", p.stage, ".bin"), a_.model, p, host));
  }
  return r;
}

Status GptStageExecutor::SaveState(StateWriter& out) const {
  TESSEL_RETURN_IF_ERROR(params_.SaveState(out));
  TESSEL_ASSIGN_OR_RETURN(Tensor m, ToHost(m_, context_.device));
  TESSEL_RETURN_IF_ERROR(out.Write("adamw/m", m));
  TESSEL_ASSIGN_OR_RETURN(Tensor v, ToHost(v_, context_.device));
  TESSEL_RETURN_IF_ERROR(out.Write("adamw/v", v));
  // The validation history, so that a resumed run's summary holds every validation.
  std::vector<double> vals;
  for (const std::vector<double>& row : val_loss_) vals.insert(vals.end(), row.begin(), row.end());
  return out.Write("llm/val_loss", Tensor::Borrow(vals.data(), DType::kF64, {static_cast<int64_t>(val_loss_.size()), 2}));
}

Status GptStageExecutor::LoadState(StateReader& in) {
  TESSEL_RETURN_IF_ERROR(params_.LoadState(in));
  TESSEL_ASSIGN_OR_RETURN(Tensor m, in.Read("adamw/m"));
  TESSEL_RETURN_IF_ERROR(FromHost(m, m_, context_.device, "adamw/m"));
  TESSEL_ASSIGN_OR_RETURN(Tensor v, in.Read("adamw/v"));
  TESSEL_RETURN_IF_ERROR(FromHost(v, v_, context_.device, "adamw/v"));
  TESSEL_ASSIGN_OR_RETURN(Tensor vals, in.Read("llm/val_loss"));
  if (vals.dtype() != DType::kF64 || vals.ndim() != 2 || vals.dim(1) != 2) {
    return StorageError("saved 'llm/val_loss' is not f64 [n, 2]");
  }
  val_loss_.clear();
  for (int64_t i = 0; i < vals.dim(0); ++i) val_loss_.push_back({vals.data<double>()[2 * i], vals.data<double>()[2 * i + 1]});
  last_val_step_ = val_loss_.empty() ? -1 : static_cast<int64_t>(val_loss_.back()[0]);
  return Status();
}

std::unique_ptr<AssignmentPayload> Decode(ByteReader& in) { return DecodeLlmAssignment(in); }

Result<std::unique_ptr<Executor>> Build(std::unique_ptr<AssignmentPayload> payload, const ExecutorContext& context) {
  auto* a = dynamic_cast<LlmStageAssignment*>(payload.get());
  if (a == nullptr) return InternalError("an llm.stage executor got a payload of another kind");
  auto executor = std::make_unique<GptStageExecutor>(std::move(*a), context);
  TESSEL_RETURN_IF_ERROR(executor->Init());
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace

ExecutorFactory LlmStageFactory() { return ExecutorFactory{LlmStageAssignment::kKind, &Decode, &Build}; }

}  // namespace tessel::workers
