#include "workers/llm/gpt_stage.h"

#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/logging.h"
#include "core/safe_file.h"
#include "workers/kernel_set.h"
#include "workers/llm/gpt_params.h"
#include "workers/llm/llm_settings.h"
#include "workers/llm/stage_activations.h"
#include "workers/llm/stage_link.h"
#include "workers/llm/stage_weights.h"
#include "workers/llm/token_data.h"

namespace tessel::workers {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The schedule of one stage (gpt_stage.h): 1F1B over the micro-batches, the blocks' forward and backward
// through the plugin ops, validation and the run's figures. The parameters and AdamW are GptParams', the
// saved activations and the spill pool StageActivations', the sends and receives StageLink's.
class GptStageExecutor final : public Executor {
 public:
  GptStageExecutor(LlmStageAssignment a, const ExecutorContext& context)
      : a_(std::move(a)),
        context_(context),
        k_(*context.kernels, context),
        params_(a_, context.seed, k_, context.device),
        acts_(a_, context_),
        link_(*context.comm, context.device, context.step_timeout_seconds) {}

  static std::vector<const tessel_op_decl*> Ops() {
    return {&tessel_op_llm_encoder_fwd,
            &tessel_op_llm_encoder_bwd,
            &tessel_op_llm_layernorm_fwd,
            &tessel_op_llm_layernorm_bwd,
            &tessel_op_llm_layernorm_bwd_from_output,
            &tessel_op_llm_attention_fwd,
            &tessel_op_llm_attention_bwd,
            &tessel_op_nn_linear_fwd,
            &tessel_op_nn_linear_bwd,
            &tessel_op_nn_linear_gelu_tanh_fwd,
            &tessel_op_nn_gelu_tanh_fwd,
            &tessel_op_nn_gelu_tanh_bwd,
            &tessel_op_nn_add,
            &tessel_op_nn_cast,
            &tessel_op_nn_softmax_xent,
            &tessel_op_nn_sum_squares,
            &tessel_op_optim_adamw_step};
  }

  Status Init();

  std::string_view step_unit() const override { return "step"; }
  MemoryUse Memory() const override {
    MemoryUse m;
    m.weights = params_.value_bytes();
    m.gradients = params_.grad_bytes();
    m.optimizer = params_.optimizer_bytes();
    m.activations = acts_.resident_bytes() + acts_.scratch_bytes();
    return m;
  }
  int64_t num_steps() const override { return a_.train.steps; }
  Result<StepResult> Step(int64_t step) override;
  Result<Record> Evaluate() override;
  Status SaveState(StateWriter& out) const override;
  Status LoadState(StateReader& in) override;

 private:
  int64_t N() const { return int64_t{a_.train.microbatch} * a_.train.seq_len; }
  int64_t C() const { return a_.model.width; }
  int32_t worker() const { return context_.comm->rank(); }

  // Loads micro-batch `m` of global batch `batch` (train or validation tokens) into the slot.
  Status LoadBatch(Slot& slot, const std::vector<int32_t>& tokens, const BatchPlan& plan, int64_t batch, int64_t m);
  // `training`: the backward follows (offload blocks spill); validation's forwards use a pool buffer only.
  Status Forward(Slot& slot, double scale, double* loss_sum, bool training = true);
  Status Backward(Slot& slot);
  Status BlockForward(const BlockParams& p, BlockActs& a, const Tensor& out);
  // `gelu_fresh`: a.gelu still holds this block's GELU output (its forward ran just before); otherwise
  // it is regenerated from a.fch.
  Status BlockBackward(const BlockParams& p, BlockActs& a, Tensor& dres, bool gelu_fresh);
  Result<double> Validate();

  LlmStageAssignment a_;
  ExecutorContext context_;
  KernelSet k_;
  GptParams params_;
  StageActivations acts_;
  StageLink link_;
  TokenSplits data_;
  std::unique_ptr<BatchPlan> train_plan_, val_plan_;
  std::unique_ptr<WorkerComm> dp_comm_;  // this stage's replicas
  bool validates_ = false;               // the job has a validation split
  int dres_turn_ = 0;
  int64_t dres_send_[2] = {-1, -1};

  // Per step.
  double wait_seconds_ = 0, forward_seconds_ = 0, backward_seconds_ = 0;
  double recompute_seconds_ = 0;  // the recompute blocks' forwards in backward (part of backward_seconds_)
  std::vector<double> step_seconds_, compute_seconds_;
  std::vector<std::vector<double>> val_loss_;
  int64_t last_val_step_ = -1;
};

Status GptStageExecutor::Init() {
  const StagePlacement& p = a_.place;
  const LlmTrainSettings& t = a_.train;
  TESSEL_RETURN_IF_ERROR(k_.Require(Ops()));
  if (t.precision == Precision::kBf16) {
    // Every op that handles activations runs on bf16; the optimizer and the gradient norm see f32.
    std::vector<const tessel_op_decl*> activation_ops;
    for (const tessel_op_decl* op : Ops()) {
      if (op != &tessel_op_optim_adamw_step && op != &tessel_op_nn_sum_squares) activation_ops.push_back(op);
    }
    TESSEL_RETURN_IF_ERROR(k_.RequireDType(activation_ops, DType::kBF16, "train.precision = \"bf16\""));
  }
  // The replicas of this stage sum their gradients over their own communicator. Collective over every
  // worker: first, before anything that fails on some stages only (their data) could leave the others
  // waiting here.
  TESSEL_ASSIGN_OR_RETURN(dp_comm_, context_.comm->Split(p.stage));
  TESSEL_RETURN_IF_ERROR(acts_.OpenSpill(worker()));
  validates_ = HasValidation(a_.data);
  if (p.first() || p.last()) {
    TESSEL_ASSIGN_OR_RETURN(data_, LoadTokenSplits(a_.data, a_.model.vocab, t.global_batch(), t.seq_len));
    train_plan_ = std::make_unique<BatchPlan>(static_cast<int64_t>(data_.train.size()), t.seq_len, t.global_batch(),
                                              a_.data.order == BatchOrder::kShuffled, a_.data.shuffle_seed);
    val_plan_ =
        std::make_unique<BatchPlan>(static_cast<int64_t>(data_.val.size()), t.seq_len, t.global_batch(), false, 0);
  }
  TESSEL_RETURN_IF_ERROR(params_.Init());
  TESSEL_RETURN_IF_ERROR(acts_.Allocate());
  if (context_.metrics != nullptr)
    context_.metrics->Set("tessel_activation_resident_bytes", static_cast<double>(acts_.resident_bytes()));
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

Status GptStageExecutor::BlockForward(const BlockParams& p, BlockActs& a, const Tensor& out) {
  StageScratch& scratch = acts_.scratch();
  const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
  const tessel_attention_params at{sizeof(tessel_attention_params), a_.model.heads};
  const int64_t n = N(), c = C();
  const auto v = [&](size_t i) -> const Tensor& { return params_.value(i); };
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_llm_layernorm_fwd, {&a.x, &v(p.ln1w), &v(p.ln1b)}, {&a.ln1, &a.mean1, &a.rstd1}, ln));
  Tensor qkv2 = ViewOf(a.qkv, {n, 3 * c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&a.ln1, &v(p.qkvw), &v(p.qkvb)}, {&qkv2}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_attention_fwd, {&a.qkv}, {&a.atty, &a.lse}, at));
  Tensor atty2 = ViewOf(a.atty, {n, c});
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&atty2, &v(p.attprojw), &v(p.attprojb)}, {&scratch.tmp_c}));
  Tensor fx = FlatView(a.x), fproj = FlatView(scratch.tmp_c), fx2 = FlatView(a.x2);
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_add, {&fx, &fproj}, {&fx2}));
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_llm_layernorm_fwd, {&a.x2, &v(p.ln2w), &v(p.ln2b)}, {&a.ln2, &a.mean2, &a.rstd2}, ln));
  // fc and its GELU in one call (on a GPU one matmul with both in its epilogue); fch is kept for the backward.
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_gelu_tanh_fwd, {&a.ln2, &v(p.fcw), &v(p.fcb)}, {&a.gelu, &a.fch}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_fwd, {&a.gelu, &v(p.fcprojw), &v(p.fcprojb)}, {&scratch.tmp_c}));
  Tensor fout = FlatView(out);
  return k_.Call(tessel_op_nn_add, {&fx2, &fproj}, {&fout});
}

// dres holds the gradient of the block's output on entry and of its input on return.
Status GptStageExecutor::BlockBackward(const BlockParams& p, BlockActs& a, Tensor& dres, bool gelu_fresh) {
  StageScratch& scratch = acts_.scratch();
  const tessel_attention_params at{sizeof(tessel_attention_params), a_.model.heads};
  const int64_t n = N(), c = C();
  const auto v = [&](size_t i) -> const Tensor& { return params_.value(i); };
  const auto g = [&](size_t i) -> Tensor& { return params_.grad(i); };
  // MLP: x3 = x2 + fcproj(gelu(fc(ln2(x2)))). fcproj's weight gradient needs gelu(fch): when the forward's
  // is gone it is regenerated from fch by nn.gelu_tanh.fwd, which gives the forward's bits on the CPU (the
  // fused op runs the same GELU); on a GPU the forward's GELU came from the matmul's epilogue, so it may
  // differ in the last place (of the f32 sum before fch's rounding, under bf16).
  if (!gelu_fresh) TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_tanh_fwd, {&a.fch}, {&a.gelu}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_bwd, {&dres, &a.gelu, &v(p.fcprojw)},
                                 {&scratch.tmp_4c, &g(p.fcprojw), &g(p.fcprojb)}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_tanh_bwd, {&scratch.tmp_4c, &a.fch}, {&scratch.tmp_4c2}));
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_nn_linear_bwd, {&scratch.tmp_4c2, &a.ln2, &v(p.fcw)}, {&scratch.tmp_c, &g(p.fcw), &g(p.fcb)}));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_bwd_from_output,
                                 {&scratch.tmp_c, &a.ln2, &v(p.ln2w), &v(p.ln2b), &a.rstd2},
                                 {&dres, &g(p.ln2w), &g(p.ln2b)}));
  // Attention: x2 = x + attproj(attn(qkv(ln1(x)))).
  Tensor datty = ViewOf(scratch.tmp_c2, {n, c});
  Tensor atty2 = ViewOf(a.atty, {n, c});
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_nn_linear_bwd, {&dres, &atty2, &v(p.attprojw)}, {&datty, &g(p.attprojw), &g(p.attprojb)}));
  Tensor datty3 = ViewOf(scratch.tmp_c2, {a_.train.microbatch, a_.train.seq_len, c});
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_llm_attention_bwd, {&datty3, &a.qkv, &a.atty, &a.lse}, {&scratch.tmp_3c}, at));
  Tensor dqkv2 = ViewOf(scratch.tmp_3c, {n, 3 * c});
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_nn_linear_bwd, {&dqkv2, &a.ln1, &v(p.qkvw)}, {&scratch.tmp_c, &g(p.qkvw), &g(p.qkvb)}));
  return k_.Call(tessel_op_llm_layernorm_bwd_from_output, {&scratch.tmp_c, &a.ln1, &v(p.ln1w), &v(p.ln1b), &a.rstd1},
                 {&dres, &g(p.ln1w), &g(p.ln1b)});
}

Status GptStageExecutor::Forward(Slot& slot, double scale, double* loss_sum, bool training) {
  StageScratch& scratch = acts_.scratch();
  const auto start = Clock::now();
  const StagePlacement& p = a_.place;
  const int64_t c = C();
  TESSEL_RETURN_IF_ERROR(link_.WaitSend(slot.send_out));
  Tensor& in = slot.blocks.empty() ? slot.out : slot.blocks[0].x;
  if (p.first()) {
    Tensor x3 = ViewOf(in, {a_.train.microbatch, a_.train.seq_len, c});
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_encoder_fwd,
                                   {&params_.value(params_.wte()), &params_.value(params_.wpe()), &slot.tokens},
                                   {&x3}));
  } else {
    const double waited = wait_seconds_;
    TESSEL_RETURN_IF_ERROR(link_.Recv(in, worker() - 1, kTagForward, &wait_seconds_));
    forward_seconds_ -= wait_seconds_ - waited;
  }
  for (size_t l = 0; l < params_.blocks().size(); ++l) {
    const Tensor& out = l + 1 < params_.blocks().size() ? slot.blocks[l + 1].x : slot.out;
    if (acts_.policy(l) != SpillPolicy::kOffload) {
      TESSEL_RETURN_IF_ERROR(BlockForward(params_.blocks()[l], acts_.ActsFor(slot, l), out));
      continue;
    }
    // Into a pool buffer, written out while the next blocks compute (validation: only the buffer).
    const int64_t id = training ? acts_.SpillId(slot, l) : -1;
    TESSEL_ASSIGN_OR_RETURN(float* buffer, acts_.pool()->Acquire(id));
    BlockActs a = acts_.OverBuffer(buffer, slot, l);
    TESSEL_RETURN_IF_ERROR(BlockForward(params_.blocks()[l], a, out));
    if (training) {
      TESSEL_RETURN_IF_ERROR(acts_.pool()->Offload(id));
    } else {
      TESSEL_RETURN_IF_ERROR(acts_.pool()->Release(id));
    }
  }
  if (p.last()) {
    const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_layernorm_fwd,
                                   {&slot.out, &params_.value(params_.lnfw()), &params_.value(params_.lnfb())},
                                   {&slot.lnf, &slot.meanf, &slot.rstdf}, ln));
    // logits = lnf wte[:V]^T: only the real vocabulary is scored (llm.c pads wte's rows). A linear layer
    // with a zero bias, so that under bf16 the logits are rounded once from f32 sums, as the blocks' are.
    Tensor wte_v = ViewOf(params_.value(params_.wte()), {a_.model.vocab, c});
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_nn_linear_fwd, {&slot.lnf, &wte_v, &scratch.head_bias}, {&scratch.logits}));
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_softmax_xent, {&scratch.logits, &slot.targets, &scratch.mask},
                                   {&scratch.loss, &scratch.correct, &scratch.logits},
                                   tessel_softmax_xent_params{sizeof(tessel_softmax_xent_params), scale}));
    double loss = 0;
    TESSEL_RETURN_IF_ERROR(CopyMemory(&loss, Device::kCpu, scratch.loss.raw(), scratch.loss.device(), sizeof loss,
                                      context_.device.stream));
    *loss_sum += loss;
  } else {
    TESSEL_RETURN_IF_ERROR(link_.Send(slot.out, worker() + 1, kTagForward, &slot.send_out));
  }
  forward_seconds_ += Since(start);
  return Status();
}

Status GptStageExecutor::Backward(Slot& slot) {
  StageScratch& scratch = acts_.scratch();
  const auto start = Clock::now();
  const StagePlacement& p = a_.place;
  const int64_t c = C();
  dres_turn_ ^= 1;
  Tensor& dres = scratch.dres[dres_turn_];
  if (acts_.pool() != nullptr) TESSEL_RETURN_IF_ERROR(acts_.PrefetchBelow(slot, params_.blocks().size()));
  TESSEL_RETURN_IF_ERROR(link_.WaitSend(dres_send_[dres_turn_]));
  if (p.last()) {
    TESSEL_RETURN_IF_ERROR(ZeroMemory(dres.raw(), dres.device(), dres.nbytes(), context_.device.stream));
    Tensor wte_v = ViewOf(params_.value(params_.wte()), {a_.model.vocab, c});
    Tensor dwte_v = ViewOf(params_.grad(params_.wte()), {a_.model.vocab, c});
    // dlnf = dlogits wte[:V], dwte[:V] += dlogits^T lnf (f32), no bias gradient.
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_linear_bwd, {&scratch.logits, &slot.lnf, &wte_v},
                                   {&scratch.tmp_c, &dwte_v, &scratch.no_bias_grad}));
    TESSEL_RETURN_IF_ERROR(
        k_.Call(tessel_op_llm_layernorm_bwd,
                {&scratch.tmp_c, &slot.out, &params_.value(params_.lnfw()), &slot.meanf, &slot.rstdf},
                {&dres, &params_.grad(params_.lnfw()), &params_.grad(params_.lnfb())}));
  } else {
    const double waited = wait_seconds_;
    TESSEL_RETURN_IF_ERROR(link_.Recv(dres, worker() + 1, kTagBackward, &wait_seconds_));
    backward_seconds_ -= wait_seconds_ - waited;
  }
  for (size_t l = params_.blocks().size(); l-- > 0;) {
    if (acts_.policy(l) == SpillPolicy::kOffload) {
      const int64_t id = acts_.SpillId(slot, l);
      TESSEL_ASSIGN_OR_RETURN(float* buffer, acts_.pool()->Get(id));
      BlockActs a;
      bool recomputed = false;
      if (buffer == nullptr) {
        // Not on disk (the disk was full) or damaged there: recomputed from the kept input, as a
        // recompute block would be (the same kernels, so the same numbers).
        TESSEL_ASSIGN_OR_RETURN(buffer, acts_.pool()->Acquire(id));
        a = acts_.OverBuffer(buffer, slot, l);
        const auto recompute_start = Clock::now();
        TESSEL_RETURN_IF_ERROR(BlockForward(params_.blocks()[l], a, scratch.tmp_c2));
        recompute_seconds_ += Since(recompute_start);
        recomputed = true;
      } else {
        a = acts_.OverBuffer(buffer, slot, l);
      }
      TESSEL_RETURN_IF_ERROR(BlockBackward(params_.blocks()[l], a, dres, recomputed));
      TESSEL_RETURN_IF_ERROR(acts_.pool()->Release(id));
      TESSEL_RETURN_IF_ERROR(acts_.PrefetchBelow(slot, l));
      continue;
    }
    if (acts_.policy(l) == SpillPolicy::kRecompute) {
      // The same kernels on the same input and weights: the scratch gets bit for bit what the forward
      // computed. The recomputed output goes to scratch.tmp_c2, free until BlockBackward (it is a temporary
      // there): the block's real output (the next block's input, or `out`, which may still be on its
      // way to the next stage) must not be written under a send.
      const auto recompute_start = Clock::now();
      TESSEL_RETURN_IF_ERROR(BlockForward(params_.blocks()[l], acts_.ActsFor(slot, l), scratch.tmp_c2));
      recompute_seconds_ += Since(recompute_start);
    }
    TESSEL_RETURN_IF_ERROR(
        BlockBackward(params_.blocks()[l], acts_.ActsFor(slot, l), dres, acts_.policy(l) == SpillPolicy::kRecompute));
  }
  if (p.first()) {
    Tensor d3 = ViewOf(dres, {a_.train.microbatch, a_.train.seq_len, c});
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_llm_encoder_bwd, {&d3, &slot.tokens},
                                   {&params_.grad(params_.wte()), &params_.grad(params_.wpe())}));
  } else {
    TESSEL_RETURN_IF_ERROR(link_.Send(dres, worker() - 1, kTagBackward, &dres_send_[dres_turn_]));
  }
  backward_seconds_ += Since(start);
  return Status();
}

Result<StepResult> GptStageExecutor::Step(int64_t step) {
  const auto start = Clock::now();
  const StagePlacement& p = a_.place;
  const int64_t m_count = a_.train.microbatches;
  wait_seconds_ = forward_seconds_ = backward_seconds_ = recompute_seconds_ = 0;
  const double scale =
      1.0 / (static_cast<double>(N()) * static_cast<double>(a_.train.global_batch() / a_.train.microbatch));
  double loss_sum = 0;
  const auto slot_of = [&](int64_t i) -> Slot& {
    return acts_.slots()[static_cast<size_t>(i % static_cast<int64_t>(acts_.slots().size()))];
  };
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
  TESSEL_RETURN_IF_ERROR(link_.WaitSends());
  if (acts_.pool() != nullptr) {
    TESSEL_RETURN_IF_ERROR(acts_.pool()->Drain());
    acts_.PublishSpill();
  }
  const auto opt_start = Clock::now();
  TESSEL_RETURN_IF_ERROR(params_.Step(step, worker(), *context_.comm, *dp_comm_, link_, &wait_seconds_));
  const double opt_seconds = Since(opt_start);
  // The mean loss over every target of the global batch, the same on every worker.
  double total = p.last() ? loss_sum : 0.0;
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&total, 1));
  StepResult r;
  r.loss = total / (static_cast<double>(a_.train.global_batch()) * a_.train.seq_len);
  r.lr = LearningRate(a_.train, step - 1);
  r.samples = static_cast<int64_t>(a_.train.global_batch()) * a_.train.seq_len;
  r.samples_kind = "tokens";
  const double seconds = Since(start);
  step_seconds_.push_back(seconds);
  compute_seconds_.push_back((forward_seconds_ + backward_seconds_) / static_cast<double>(m_count));
  r.forward_seconds = forward_seconds_;
  r.backward_seconds = backward_seconds_;
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
    r.val_loss = val;
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
      Slot& slot = acts_.slots()[0];
      if (p.first() || p.last()) TESSEL_RETURN_IF_ERROR(LoadBatch(slot, data_.val, *val_plan_, v, m));
      TESSEL_RETURN_IF_ERROR(Forward(slot, 0.0, &loss_sum, /*training=*/false));
    }
  }
  TESSEL_RETURN_IF_ERROR(link_.WaitSends());
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
  Set(r, "precision", std::string(NameOf(t.precision)));
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
  const size_t layers = static_cast<size_t>(a_.model.layers), per_block_at = static_cast<size_t>(3 * workers);
  std::vector<double> per_worker(per_block_at + layers, 0.0);
  per_worker[static_cast<size_t>(worker())] = steps > 0 ? compute / steps : 0.0;
  per_worker[static_cast<size_t>(workers + worker())] = static_cast<double>(acts_.resident_bytes());
  per_worker[static_cast<size_t>(2 * workers + worker())] = static_cast<double>(acts_.scratch_bytes());
  if (p.replica == 0) {
    for (size_t l = 0; l < acts_.policies().size(); ++l) {
      per_worker[per_block_at + static_cast<size_t>(p.first_block) + l] =
          static_cast<double>(BlockSavedBytesPerToken(acts_.policy(l), C(), a_.model.heads, a_.train.precision));
    }
  }
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(per_worker.data(), static_cast<int64_t>(per_worker.size())));
  double mean_step = steps > 0 ? seconds / steps : 0.0;
  TESSEL_RETURN_IF_ERROR(context_.comm->AllreduceSum(&mean_step, 1));
  mean_step /= workers;
  Set(r, "tokens_per_second", mean_step > 0 ? tokens / mean_step : 0.0);
  Set(r, "mean_step_seconds", mean_step);
  Set(r, "stage_compute_seconds_per_microbatch", std::vector<double>(per_worker.begin(), per_worker.begin() + workers));
  double peak = 0, peak_scratch = 0;
  for (int w = 0; w < workers; ++w) {
    peak = std::max(peak, per_worker[static_cast<size_t>(workers + w)]);
    peak_scratch = std::max(peak_scratch, per_worker[static_cast<size_t>(2 * workers + w)]);
  }
  Set(r, "peak_resident_activation_bytes", static_cast<int64_t>(peak));
  // The temporaries, and of them the classifier's one [N, V] logits buffer (its gradient is written over
  // it): the same on every worker of the last stage.
  Set(r, "peak_scratch_bytes", static_cast<int64_t>(peak_scratch));
  Set(r, "classifier_logits_bytes",
      static_cast<int64_t>(DTypeSize(ActivationDType(t.precision))) * a_.train.microbatch * a_.train.seq_len *
          a_.model.vocab);
  // What each block keeps per token and micro-batch in flight under its policy, and what a block keeps
  // when it keeps everything (the figure "keep" would give every block).
  Set(r, "saved_activation_bytes_per_token",
      std::vector<double>(per_worker.begin() + static_cast<std::ptrdiff_t>(per_block_at), per_worker.end()));
  Set(r, "saved_activation_bytes_per_token_keep_all",
      BlockSavedBytesPerToken(SpillPolicy::kKeep, C(), a_.model.heads, a_.train.precision));
  // What a block would keep saving everything autograd saves (PyTorch eager): both LayerNorms' inputs and
  // means, and the attention's T x T probabilities per head (H T a token) instead of their log-sum-exps.
  // Activations (the probabilities among them) at the run's precision, statistics in f32.
  const double f32 = sizeof(float), act = static_cast<double>(DTypeSize(ActivationDType(t.precision)));
  const double cw = static_cast<double>(C()), hd = a_.model.heads, tl = static_cast<double>(a_.train.seq_len);
  Set(r, "saved_activation_bytes_per_token_save_everything", static_cast<int64_t>((16 * cw + hd * tl) * act + 4 * f32));
  {
    // The same two counts by layer type, [kept, saved by autograd], bytes a token and block: the two
    // LayerNorms (rstd; autograd: input, mean, rstd), attention (qkv, output and per-row log-sum-exps;
    // autograd: the probabilities instead), the MLP's GELU (its input; autograd: input and output), and
    // the LayerNorms' outputs, which the qkv and fc matmuls need either way.
    Record by;
    Set(by, "layernorm", std::vector<double>{2 * f32, 2 * cw * act + 4 * f32});
    Set(by, "attention", std::vector<double>{4 * cw * act + hd * f32, (4 * cw + hd * tl) * act});
    Set(by, "mlp_gelu", std::vector<double>{4 * cw * act, 8 * cw * act});
    Set(by, "layernorm_outputs", std::vector<double>{2 * cw * act, 2 * cw * act});
    Set(r, "saved_activation_bytes_per_token_by_layer", by);
  }
  Set(r, "pipeline_stages", static_cast<int64_t>(p.stages));
  Set(r, "data_parallel", static_cast<int64_t>(t.data_parallel));
  // The spill store's totals over every worker (zeros where no block offloads).
  std::vector<double> spill(8, 0.0);
  if (acts_.pool() != nullptr) {
    const storage::SpillStats st = acts_.spill_store()->stats();
    const SpillPoolCounters& c = acts_.pool()->counters();
    spill = {static_cast<double>(st.written_bytes),
             static_cast<double>(st.read_bytes),
             st.write_seconds,
             st.read_seconds,
             st.wait_seconds,
             static_cast<double>(c.late_fetches),
             static_cast<double>(c.recomputed),
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
    TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(dir, "the run directory's weights"));
    // The file holds the stage's tensors in declaration order (stage_weights.h); the head's wte copy is
    // the first stage's and is left out.
    TESSEL_ASSIGN_OR_RETURN(std::vector<float> host, params_.HostValues());
    TESSEL_RETURN_IF_ERROR(WriteStageWeights(StrCat(dir, "/stage-", p.stage, ".bin"), a_.model, p, host));
  }
  return r;
}

Status GptStageExecutor::SaveState(StateWriter& out) const {
  TESSEL_RETURN_IF_ERROR(params_.SaveState(out));
  // The validation history, so that a resumed run's summary holds every validation.
  std::vector<double> vals;
  for (const std::vector<double>& row : val_loss_) vals.insert(vals.end(), row.begin(), row.end());
  return out.Write("llm/val_loss",
                   Tensor::Borrow(vals.data(), DType::kF64, {static_cast<int64_t>(val_loss_.size()), 2}));
}

Status GptStageExecutor::LoadState(StateReader& in) {
  TESSEL_RETURN_IF_ERROR(params_.LoadState(in));
  TESSEL_ASSIGN_OR_RETURN(Tensor vals, in.Read("llm/val_loss"));
  if (vals.dtype() != DType::kF64 || vals.ndim() != 2 || vals.dim(1) != 2) {
    return StorageError("saved 'llm/val_loss' is not f64 [n, 2]");
  }
  val_loss_.clear();
  for (int64_t i = 0; i < vals.dim(0); ++i)
    val_loss_.push_back({vals.data<double>()[2 * i], vals.data<double>()[2 * i + 1]});
  last_val_step_ = val_loss_.empty() ? -1 : static_cast<int64_t>(val_loss_.back()[0]);
  return Status();
}

std::unique_ptr<AssignmentPayload> Decode(ByteReader& in) { return DecodeLlmAssignment(in); }

Result<std::unique_ptr<Executor>> Build(std::unique_ptr<AssignmentPayload> payload, const ExecutorContext& context) {
  auto* a = dynamic_cast<LlmStageAssignment*>(payload.get());
  if (a == nullptr) return InternalError("an llm.stage executor got a payload of another kind");
  // The payload's own shape (the planner made it; core/fields.h's decoder checks only bytes), checked
  // before anything is indexed by it. The job's rules were checked by jobs/validate.cc.
  const StagePlacement& p = a->place;
  if (p.first_block < 0 || p.first_block > p.end_block || p.end_block > a->model.layers ||
      a->block_policies.size() != static_cast<size_t>(p.end_block - p.first_block)) {
    return InternalError(StrCat("llm.stage payload: ", a->block_policies.size(), " block policies for blocks [",
                                p.first_block, ", ", p.end_block, ") of ", a->model.layers));
  }
  auto executor = std::make_unique<GptStageExecutor>(std::move(*a), context);
  TESSEL_RETURN_IF_ERROR(executor->Init());
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace

ExecutorFactory LlmStageFactory() { return ExecutorFactory{LlmStageAssignment::kKind, &Decode, &Build}; }

}  // namespace tessel::workers
