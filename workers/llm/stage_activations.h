// StageActivations: what one pipeline stage keeps from its forwards for its backwards, and the scratch
// its blocks compute in. One slot per micro-batch in flight (at most min(S - s, M) on stage s), each block
// of a slot as its policy says (llm_settings.h): all its tensors (keep), only its input (recompute: the
// backward re-runs the block into the stage's one recompute scratch), or its input with the rest written to
// the worker's spill file through the offload pool (workers/llm/spill_pool.h) and read back, prefetched,
// for the backward.
//
// Ownership: owns every tensor and the spill store; borrows the assignment and the context. Thread safety:
// one thread. Failure: allocation errors; kStorage when the spill file cannot be opened.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "storage/spill_store.h"
#include "workers/executor.h"
#include "workers/llm/llm_settings.h"
#include "workers/llm/spill_pool.h"

namespace tessel::workers {

// What one block keeps from its forward for its backward, for one micro-batch. `x` is the block's input
// (the residual stream); its output is the next block's `x` (or the stage's output). A recompute block's
// slot entry holds only `x`; its other tensors live in the stage's one recompute scratch.
struct BlockActs {
  Tensor x, ln1, mean1, rstd1, qkv, atty, lse, x2, ln2, mean2, rstd2, fch, gelu;
};

// One micro-batch in flight.
struct Slot {
  std::vector<BlockActs> blocks;
  Tensor out;                // the stage's output: the next stage's input, or the head's
  Tensor tokens, targets;    // first stage: inputs (i32 [B, T]); last stage: targets (i64 [N])
  Tensor lnf, meanf, rstdf;  // last stage: the final LayerNorm
  int64_t send_out = -1;     // the Isend of `out`, if any
};

// The temporaries of a forward and backward, shared by every block and micro-batch.
struct StageScratch {
  Tensor tmp_c, tmp_c2, tmp_4c, tmp_4c2, tmp_3c;
  Tensor dres[2];              // the gradient flowing down the residual stream (alternating micro-batches)
  Tensor logits;               // last stage: [N, V], the logits, then their gradient (written in place)
  Tensor head_bias;            // last stage: [V] zeros (the tied head has no bias)
  Tensor no_bias_grad;         // last stage: 0 rows, so the head's linear backward skips the bias gradient
  Tensor mask, loss, correct;  // last stage: every target counts; the loss and hits of a micro-batch
};

class StageActivations {
 public:
  StageActivations(const LlmStageAssignment& a, const ExecutorContext& context)
      : a_(a), context_(context), policies_(a.block_policies) {}

  // Opens the spill file and the offload pool when a block offloads: before anything else, so that an
  // unwritable directory fails the job before its first step (exit 6).
  Status OpenSpill(int32_t worker);
  // Allocates the slots, the tensors the blocks share and the scratch.
  Status Allocate();

  SpillPolicy policy(size_t l) const { return policies_[l]; }
  const std::vector<SpillPolicy>& policies() const { return policies_; }
  std::vector<Slot>& slots() { return slots_; }
  StageScratch& scratch() { return scratch_; }
  // Saved activations of every slot, plus the offload pool: what the stage keeps resident.
  int64_t resident_bytes() const { return bytes_; }
  // The temporaries every block and micro-batch share (StageScratch), the classifier's logits among them.
  int64_t scratch_bytes() const { return scratch_bytes_; }

  // The tensors block l of `slot` runs its forward into: the slot's own, or for a recompute block the
  // shared scratch with the slot's kept input as its `x`.
  BlockActs& ActsFor(Slot& slot, size_t l);

  // Offload blocks (pool() is null without any).
  SpillPool* pool() { return pool_.get(); }
  const storage::SpillStore* spill_store() const { return spill_store_.get(); }
  int64_t SpillId(const Slot& slot, size_t l) const {
    return static_cast<int64_t>(&slot - slots_.data()) * static_cast<int64_t>(policies_.size()) +
           static_cast<int64_t>(l);
  }
  // Block l's tensors over offload pool buffer `buffer`, with the slot's kept input as its `x`.
  BlockActs OverBuffer(float* buffer, Slot& slot, size_t l) const;
  // Starts reading back the next offload blocks below block `below` (prefetch depth: the pool less one).
  Status PrefetchBelow(const Slot& slot, size_t below);
  // Tells the metrics the spill I/O and fallbacks since the last call.
  void PublishSpill();

 private:
  int64_t N() const { return int64_t{a_.train.microbatch} * a_.train.seq_len; }
  int64_t C() const { return a_.model.width; }
  // A tensor counted in resident_bytes(), and one counted in scratch_bytes().
  Result<Tensor> Alloc(DType dtype, std::vector<int64_t> shape);
  Result<Tensor> AllocScratch(DType dtype, std::vector<int64_t> shape);
  Status AllocateBlockActs(BlockActs& a, bool with_input);
  void ShareLean(BlockActs& a) const;
  // A kept block's tensors (no `x`), as views over one contiguous buffer (an offload pool buffer), each
  // 64-byte aligned, the shared ones (ShareLean) aside; returns the bytes (with base == nullptr it only
  // counts them).
  int64_t ActsOver(void* base, BlockActs* a) const;
  DType act_dtype() const { return ActivationDType(a_.train.precision); }

  const LlmStageAssignment& a_;
  const ExecutorContext& context_;
  std::vector<SpillPolicy> policies_;  // one per block of the stage
  std::vector<Slot> slots_;
  BlockActs recompute_;  // the recompute blocks' one scratch (no `x` of its own); empty without any
  BlockActs lean_;       // x2, mean1, mean2, gelu: written by every forward, kept by none
  Tensor resid_[2];      // the residual stream into kept blocks (alternating)
  StageScratch scratch_;
  int64_t bytes_ = 0;
  int64_t scratch_bytes_ = 0;
  // The offload blocks' spill file and buffers; null without any.
  std::unique_ptr<storage::SpillStore> spill_store_;
  std::unique_ptr<SpillPool> pool_;
  storage::SpillStats spill_reported_;  // what the metrics have been told so far
  SpillPoolCounters pool_reported_;
};

}  // namespace tessel::workers
