// StagePlanner: plans a GPT job (job.kind = "llm"): splits the model's blocks into pipeline stages, one
// worker per stage and replica (worker w = replica x stages + stage), and hands each an "llm.stage"
// assignment (workers/llm/llm_settings.h).
//
// The split minimises the slowest stage's time per micro-batch (forward + backward; the embedding counts
// on the first stage, the final LayerNorm, output head and loss on the last), under
// [resources] memory_budget_bytes per worker, by a dynamic program over contiguous block ranges. Times
// come from a micro-benchmark run here, on this rank, with the job's kernels and threads: every op of a
// block, of the head and of the embedding at the job's micro-batch shape, best of a few runs. Memory is
// counted: the process's own resident memory on a CPU worker (measured by the calibration), parameters,
// gradients and AdamW moments (16 bytes a parameter), the saved activations of the
// min(stages - s, microbatches) micro-batches 1F1B keeps in flight on stage s under each block's policy
// (keep: every tensor; recompute: the block's input, plus one shared scratch per stage), and the scratch
// buffers. A recompute block costs one more block forward per micro-batch (its forward again, in the
// backward). The step time is predicted as (microbatches + stages - 1) x the slowest stage (1F1B's bubble).
//
// The block policies come from [spill] policy and layer_policies (ResolveBlockPolicies); "auto"
// (ChooseAutoPolicies) and "plan" (PlanPolicies) are resolved against the spill bandwidth measured here.
//
// Before any rank starts it also reads the tokens and the model.init_from checkpoint, so bad data is
// exit 3 and a checkpoint of another shape exit 2 here, not on a worker.
// Thread safety: one thread. Failure: see Planner; an infeasible budget is kUsage with the shortfall.
#pragma once

#include "orchestrator/planners/planner.h"
#include "workers/llm/llm_settings.h"

namespace tessel::orchestrator {

// Measured costs of one micro-batch (forward + backward, seconds), and the shapes its memory follows from.
struct StageCosts {
  double block_seconds = 0, embed_seconds = 0, head_seconds = 0;
  double block_forward_seconds = 0;  // the forward alone, part of block_seconds: a recompute block's extra
  int64_t tokens = 0;  // N = B x T of a micro-batch
  int64_t width = 0, heads = 0, vocab = 0, padded_vocab = 0, context = 0;
  // A CPU worker's resident memory besides its tensors (libraries, BLAS buffers, token data), measured by
  // the calibration; 0 for GPU workers. Part of every stage's memory.
  int64_t process_bytes = 0;
};

// The policy of every block of the model (model.layers entries): spill.layer_policies, or spill.policy for
// every block when that is []. An "auto" block starts as kOffload and is marked in `automatic`:
// ChooseAutoPolicies then keeps those whose I/O would not be hidden.
// A "plan" block starts as kRecompute (the least memory) and is marked in `planned`: PlanPolicies then
// chooses it.
struct ResolvedPolicies {
  std::vector<workers::BlockPolicy> policies;
  std::vector<bool> automatic;
  std::vector<bool> planned;
};
Result<ResolvedPolicies> ResolveBlockPolicies(const jobs::JobSpec& spec);

// Spill bandwidth measured in [spill] dir: bytes a second written (until on disk) and read back (after the
// pages left the page cache), through the spill store itself.
struct SpillBandwidth {
  double write_bytes_per_second = 0, read_bytes_per_second = 0;
};
Result<SpillBandwidth> MeasureSpillBandwidth(const jobs::JobSpec& spec, int64_t slot_bytes);


// A stage's blocks, by policy.
struct StageBlocks {
  int32_t keep = 0, recompute = 0, offload = 0;
  int32_t total() const { return keep + recompute + offload; }
};
StageBlocks CountBlocks(const std::vector<workers::BlockPolicy>& policies, int32_t first, int32_t end);

// The bytes stage s of `stages` holds with `blocks`, as the executor allocates them
// (workers/llm/gpt_stage.cc): parameters, gradients and AdamW's two moments, and the host copy the weights
// pass through at start and end (20 bytes a parameter, the last stage's copy of the tied embedding
// included); the saved activations of min(stages - s,
// microbatches) micro-batches (per block and token workers::BlockSavedFloatsPerToken: 10 C floats, the
// LayerNorm statistics and the attention's log-sum-exp for a kept block, C for a recomputed or offloaded
// one; the stage's output; the first stage's tokens, the last stage's targets and final LayerNorm); the
// recompute scratch when any block recomputes (one kept block's tensors), the offload pool when any
// offloads; the scratch (15 C floats a token, the forward's shared 7 C + 2, the last stage's logits
// and their gradient, the tied embedding's exchange buffer); and costs.process_bytes.
int64_t StageMemoryBytes(const StageCosts& costs, int32_t stage, int32_t stages, StageBlocks blocks,
                         int32_t microbatches);

// One stage of a split: blocks [first, end), predicted time per micro-batch and peak memory.
struct StageShare {
  int32_t first = 0, end = 0;
  StageBlocks blocks;
  double seconds = 0;
  int64_t memory_bytes = 0;
};

// The split of the blocks (one policy each, first block first) minimising the slowest stage under `budget`
// bytes per worker (0 = none); `fixed` (blocks per stage) overrides the choice. kUsage naming the
// shortfall when no split fits.
Result<std::vector<StageShare>> SplitStages(const StageCosts& costs, const std::vector<workers::BlockPolicy>& policies,
                                            int32_t stages,
                                            int32_t microbatches, int64_t budget, const std::vector<int32_t>& fixed,
                                            const std::string& budget_origin);

// The I/O stall (seconds per micro-batch) of a stage whose blocks offload where `offload` is true: each
// offloaded block's activations (`block_bytes`) are written after its forward and read back, at most
// `prefetch` blocks ahead, for its backward, through one disk queue (SSDTrain's timeline). `between` is
// the time from the stage's last forward to its first backward of the micro-batch (the head, and the later
// stages); the first reads may start at its beginning.
double OffloadStallSeconds(const std::vector<bool>& offload, double forward_seconds, double backward_seconds,
                           double between_seconds, double block_bytes, const SpillBandwidth& bandwidth,
                           int32_t prefetch);
// SSDTrain's adaptive keep: for each stage of `split`, the automatic blocks offload from the first on,
// and the last ones are kept while keeping them removes an I/O stall above 2% of the stage's compute
// (and the budget allows). Returns the notes for the log.
std::vector<std::string> ChooseAutoPolicies(const StageCosts& costs, const std::vector<bool>& automatic,
                                            const SpillBandwidth& bandwidth, int32_t stages, int32_t microbatches,
                                            int64_t budget, std::vector<workers::BlockPolicy>* policies,
                                            std::vector<StageShare>* split);

// spill.policy = "plan" (Mist's co-optimisation on a small scale): after the split (made as if every
// planned block recomputed), each stage's planned blocks are split into offload (the first k), recompute
// and keep (the last j), the (k, j) with the smallest predicted time (recomputed forwards and I/O stall
// included) that fits `budget`, ties to more kept blocks. Each stage's seconds then include its
// recomputed forwards and its predicted stall. Returns the notes for the log.
std::vector<std::string> PlanPolicies(const StageCosts& costs, const std::vector<bool>& planned,
                                      const SpillBandwidth& bandwidth, int32_t stages, int32_t microbatches,
                                      int64_t budget, std::vector<workers::BlockPolicy>* policies,
                                      std::vector<StageShare>* split);

class StagePlanner final : public Planner {
 public:
  Result<Plan> MakePlan(const jobs::JobSpec& spec, int32_t num_workers, const Logger& log) override;
  void Print(const jobs::JobSpec& spec, const Plan& plan, std::ostream& out) const override;
  void Publish(const Plan& plan, monitoring::Metrics& metrics) const override;
};

}  // namespace tessel::orchestrator
