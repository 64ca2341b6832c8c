#include "workers/llm/stage_activations.h"

#include <algorithm>

namespace tessel::workers {

Result<Tensor> StageActivations::Alloc(DType dtype, std::vector<int64_t> shape) {
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(dtype, std::move(shape), *context_.device.allocator));
  bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

Result<Tensor> StageActivations::AllocScratch(DType dtype, std::vector<int64_t> shape) {
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(dtype, std::move(shape), *context_.device.allocator));
  scratch_bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

// Exactly BlockSavedBytesPerToken(kKeep) a token (plus the input x when `with_input`), which the
// planner predicts with. What the backward does not need lives in the stage's shared `lean_` tensors
// (after Tempo): the mid-block residual x2 and the LayerNorm means, since both LayerNorms differentiate
// from their outputs (llm.layernorm.bwd_from_output), and the GELU's output, which the backward
// regenerates from the GELU's input (kept anyway for the GELU's own backward) with the same kernel.
Status StageActivations::AllocateBlockActs(BlockActs& a, bool with_input) {
  const int64_t n = N(), c = C(), b = a_.train.microbatch, t = a_.train.seq_len, h = a_.model.heads;
  const DType act = act_dtype();
  if (with_input) {
    TESSEL_ASSIGN_OR_RETURN(a.x, Alloc(act, {n, c}));
  }
  TESSEL_ASSIGN_OR_RETURN(a.ln1, Alloc(act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(a.rstd1, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(a.qkv, Alloc(act, {b, t, 3 * c}));
  TESSEL_ASSIGN_OR_RETURN(a.atty, Alloc(act, {b, t, c}));
  TESSEL_ASSIGN_OR_RETURN(a.lse, Alloc(DType::kF32, {b, h, t}));
  TESSEL_ASSIGN_OR_RETURN(a.ln2, Alloc(act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(a.rstd2, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(a.fch, Alloc(act, {n, 4 * c}));
  ShareLean(a);
  return Status();
}

void StageActivations::ShareLean(BlockActs& a) const {
  a.x2 = ViewOf(lean_.x2, lean_.x2.shape());
  a.mean1 = ViewOf(lean_.mean1, lean_.mean1.shape());
  a.mean2 = ViewOf(lean_.mean2, lean_.mean2.shape());
  a.gelu = ViewOf(lean_.gelu, lean_.gelu.shape());
}

Status StageActivations::Allocate() {
  const int64_t n = N(), c = C(), b = a_.train.microbatch, t = a_.train.seq_len;
  const StagePlacement& p = a_.place;
  const DType act = act_dtype();
  const int64_t count = std::min<int64_t>(p.stages - p.stage, a_.train.microbatches);
  slots_.resize(static_cast<size_t>(count));
  // Shared by every block and micro-batch: the forward's x2, LayerNorm means and GELU output, and the residual stream
  // into a kept block (two, so a block's output never lands on its input). A kept block differentiates
  // from its outputs, so its input is not kept; a recomputed or offloaded block keeps its own.
  TESSEL_ASSIGN_OR_RETURN(lean_.x2, Alloc(act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(lean_.mean1, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(lean_.mean2, Alloc(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(lean_.gelu, Alloc(act, {n, 4 * c}));
  for (Tensor& r : resid_) {
    TESSEL_ASSIGN_OR_RETURN(r, Alloc(act, {n, c}));
  }
  for (Slot& slot : slots_) {
    for (size_t l = 0; l < policies_.size(); ++l) {
      BlockActs a;
      if (policies_[l] == SpillPolicy::kKeep) {
        TESSEL_RETURN_IF_ERROR(AllocateBlockActs(a, /*with_input=*/false));
        a.x = ViewOf(resid_[l % 2], resid_[l % 2].shape());
      } else {
        TESSEL_ASSIGN_OR_RETURN(a.x, Alloc(act, {n, c}));
      }
      slot.blocks.push_back(std::move(a));
    }
    TESSEL_ASSIGN_OR_RETURN(slot.out, Alloc(act, {n, c}));
    if (p.first()) {
      TESSEL_ASSIGN_OR_RETURN(slot.tokens, Alloc(DType::kI32, {b, t}));
    }
    if (p.last()) {
      TESSEL_ASSIGN_OR_RETURN(slot.targets, Alloc(DType::kI64, {n}));
      TESSEL_ASSIGN_OR_RETURN(slot.lnf, Alloc(act, {n, c}));
      TESSEL_ASSIGN_OR_RETURN(slot.meanf, Alloc(DType::kF32, {n}));
      TESSEL_ASSIGN_OR_RETURN(slot.rstdf, Alloc(DType::kF32, {n}));
    }
  }
  // One scratch for every recompute block and micro-batch: a backward runs one block at a time, and a
  // forward is done with a recompute block's tensors as soon as its output is written.
  if (std::find(policies_.begin(), policies_.end(), SpillPolicy::kRecompute) != policies_.end()) {
    TESSEL_RETURN_IF_ERROR(AllocateBlockActs(recompute_, /*with_input=*/false));
  }
  StageScratch& s = scratch_;
  TESSEL_ASSIGN_OR_RETURN(s.tmp_c, AllocScratch(act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(s.tmp_c2, AllocScratch(act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(s.tmp_4c, AllocScratch(act, {n, 4 * c}));
  TESSEL_ASSIGN_OR_RETURN(s.tmp_4c2, AllocScratch(act, {n, 4 * c}));
  TESSEL_ASSIGN_OR_RETURN(s.tmp_3c, AllocScratch(act, {b, t, 3 * c}));
  for (Tensor& d : s.dres) {
    TESSEL_ASSIGN_OR_RETURN(d, AllocScratch(act, {n, c}));
  }
  if (p.last()) {
    // One [N, V] buffer: the classifier writes the logits' gradient over them (nn.softmax_xent in place).
    TESSEL_ASSIGN_OR_RETURN(s.logits, AllocScratch(act, {n, a_.model.vocab}));
    // The tied head is a linear layer without a bias: zeros in, and no bias gradient out (0 rows).
    TESSEL_ASSIGN_OR_RETURN(s.head_bias, AllocScratch(act, {a_.model.vocab}));
    TESSEL_RETURN_IF_ERROR(
        ZeroMemory(s.head_bias.raw(), s.head_bias.device(), s.head_bias.nbytes(), context_.device.stream));
    s.no_bias_grad = Tensor::Borrow(nullptr, DType::kF32, {0}, context_.device.device);
    TESSEL_ASSIGN_OR_RETURN(s.loss, AllocScratch(DType::kF64, {1}));
    TESSEL_ASSIGN_OR_RETURN(s.correct, AllocScratch(DType::kI64, {1}));
    std::vector<uint8_t> ones(static_cast<size_t>(n), 1);
    TESSEL_ASSIGN_OR_RETURN(s.mask, AllocScratch(DType::kU8, {n}));
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(s.mask.raw(), s.mask.device(), ones.data(), Device::kCpu, ones.size(), context_.device.stream));
  }
  return Status();
}

BlockActs& StageActivations::ActsFor(Slot& slot, size_t l) {
  if (policies_[l] != SpillPolicy::kRecompute) return slot.blocks[l];
  recompute_.x = ViewOf(slot.blocks[l].x, slot.blocks[l].x.shape());
  return recompute_;
}

int64_t StageActivations::ActsOver(void* base, BlockActs* a) const {
  const int64_t n = N(), c = C(), b = a_.train.microbatch, t = a_.train.seq_len, h = a_.model.heads;
  const DType act = act_dtype();
  int64_t at = 0;  // bytes
  const auto take = [&](Tensor* out, DType dtype, std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (base != nullptr) {
      *out = Tensor::Borrow(static_cast<char*>(base) + at, dtype, std::move(shape), context_.device.device);
    }
    at += (count * static_cast<int64_t>(DTypeSize(dtype)) + 63) / 64 * 64;
  };
  BlockActs unused;
  BlockActs& v = a != nullptr ? *a : unused;
  take(&v.ln1, act, {n, c});
  take(&v.rstd1, DType::kF32, {n});
  take(&v.qkv, act, {b, t, 3 * c});
  take(&v.atty, act, {b, t, c});
  take(&v.lse, DType::kF32, {b, h, t});
  take(&v.ln2, act, {n, c});
  take(&v.rstd2, DType::kF32, {n});
  take(&v.fch, act, {n, 4 * c});
  if (a != nullptr) ShareLean(*a);
  return at;
}

BlockActs StageActivations::OverBuffer(float* buffer, Slot& slot, size_t l) const {
  BlockActs a;
  ActsOver(buffer, &a);
  a.x = ViewOf(slot.blocks[l].x, slot.blocks[l].x.shape());
  return a;
}

Status StageActivations::OpenSpill(int32_t worker) {
  if (std::find(policies_.begin(), policies_.end(), SpillPolicy::kOffload) == policies_.end()) return Status();
  const LlmSpillSettings& sp = a_.spill;
  const storage::SpillOptions options{sp.dir, StrCat(sp.name, "-w", worker), sp.checksum, sp.budget_bytes};
  TESSEL_ASSIGN_OR_RETURN(spill_store_,
                          context_.open_spill ? context_.open_spill(options) : storage::SpillStore::Open(options));
  const auto offloads = static_cast<int32_t>(std::count(policies_.begin(), policies_.end(), SpillPolicy::kOffload));
  TESSEL_ASSIGN_OR_RETURN(pool_, SpillPool::Create(spill_store_.get(), (ActsOver(nullptr, nullptr) + 3) / 4,
                                                   OffloadBuffers(offloads), context_.device, context_.log));
  bytes_ += pool_->resident_bytes();
  if (context_.log != nullptr) {
    context_.log->Debug(StrCat("spill file ", spill_store_->path(), ": ", OffloadBuffers(offloads), " buffers of ",
                               pool_->bytes(), " bytes"));
  }
  return Status();
}

Status StageActivations::PrefetchBelow(const Slot& slot, size_t below) {
  int32_t ahead = 0;
  for (size_t l = below; l-- > 0 && ahead < pool_->buffers() - 1;) {
    if (policies_[l] != SpillPolicy::kOffload) continue;
    TESSEL_RETURN_IF_ERROR(pool_->Prefetch(SpillId(slot, l)));
    ++ahead;
  }
  return Status();
}

void StageActivations::PublishSpill() {
  if (pool_ == nullptr || context_.metrics == nullptr) return;
  const storage::SpillStats now = spill_store_->stats();
  monitoring::Metrics& m = *context_.metrics;
  m.Add("tessel_spill_written_bytes_total", static_cast<double>(now.written_bytes - spill_reported_.written_bytes));
  m.Add("tessel_spill_read_bytes_total", static_cast<double>(now.read_bytes - spill_reported_.read_bytes));
  m.Add("tessel_spill_wait_seconds_total", now.wait_seconds - spill_reported_.wait_seconds);
  spill_reported_ = now;
  const SpillPoolCounters& c = pool_->counters();
  m.Add("tessel_spill_fallbacks_total", static_cast<double>(c.recomputed - pool_reported_.recomputed), {"recompute"});
  pool_reported_ = c;
}

}  // namespace tessel::workers
