// The stage planner's search (orchestrator/planners/stage_planner.h): each block's policy from [spill],
// the memory a stage holds, the split of the blocks into stages that minimises the slowest stage under the
// memory budget, and the policy choices "auto" (SSDTrain's adaptive keep) and "plan" (Mist's
// co-optimisation) make against the measured costs (stage_calibration.h).
// Thread safety: functions of values. Failure: kUsage when no split fits the budget, naming the shortfall.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "jobs/spec.h"
#include "orchestrator/planners/stage_calibration.h"
#include "workers/llm/llm_settings.h"

namespace tessel::orchestrator {

// The policy of every block of the model (model.layers entries): spill.layer_policies, or spill.policy for
// every block when that is []. An "auto" block starts as kOffload and is marked in `automatic`:
// ChooseAutoPolicies then keeps those whose I/O would not be hidden.
// A "plan" block starts as kRecompute (the least memory) and is marked in `planned`: PlanPolicies then
// chooses it.
struct ResolvedPolicies {
  std::vector<SpillPolicy> policies;
  std::vector<bool> automatic;
  std::vector<bool> planned;
};
Result<ResolvedPolicies> ResolveBlockPolicies(const jobs::JobSpec& spec);

// A stage's blocks, by policy.
struct StageBlocks {
  int32_t keep = 0, recompute = 0, offload = 0;
  int32_t total() const { return keep + recompute + offload; }
};
StageBlocks CountBlocks(const std::vector<SpillPolicy>& policies, int32_t first, int32_t end);

// The bytes stage s of `stages` holds with `blocks`, as the executor allocates them
// (workers/llm/gpt_stage.cc): parameters, gradients and AdamW's two moments, and the host copy the weights
// pass through at start and end (20 bytes a parameter, the last stage's copy of the tied embedding
// included); the saved activations of min(stages - s,
// microbatches) micro-batches (per block and token workers::BlockSavedBytesPerToken: 10 C activations, the
// LayerNorm statistics and the attention's log-sum-exp for a kept block, C for a recomputed or offloaded
// one; the stage's output; the first stage's tokens, the last stage's targets and final LayerNorm); the
// recompute scratch when any block recomputes (one kept block's tensors), the offload pool when any
// offloads; the scratch (15 C floats a token, the forward's shared 7 C + 2, the last stage's one
// logits buffer, which their gradient overwrites, the tied embedding's exchange buffer); and costs.process_bytes.
int64_t StageMemoryBytes(const StageCosts& costs, int32_t stage, int32_t stages, StageBlocks blocks,
                         int32_t microbatches);
// Of it, what the stage's executor holds as saved activations (its peak_resident_activation_bytes): the
// slots of the micro-batches in flight, the forward's shared tensors, the recompute scratch and the
// offload pool.
int64_t StageActivationBytes(const StageCosts& costs, int32_t stage, int32_t stages, StageBlocks blocks,
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
Result<std::vector<StageShare>> SplitStages(const StageCosts& costs, const std::vector<SpillPolicy>& policies,
                                            int32_t stages, int32_t microbatches, int64_t budget,
                                            const std::vector<int32_t>& fixed, const std::string& budget_origin);

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
                                            int64_t budget, std::vector<SpillPolicy>* policies,
                                            std::vector<StageShare>* split);

// spill.policy = "plan" (Mist's co-optimisation on a small scale): after the split (made as if every
// planned block recomputed), each stage's planned blocks are split into offload (the first k), recompute
// and keep (the last j), the (k, j) with the smallest predicted time (recomputed forwards and I/O stall
// included) that fits `budget`, ties to more kept blocks. Each stage's seconds then include its
// recomputed forwards and its predicted stall. Returns the notes for the log.
std::vector<std::string> PlanPolicies(const StageCosts& costs, const std::vector<bool>& planned,
                                      const SpillBandwidth& bandwidth, int32_t stages, int32_t microbatches,
                                      int64_t budget, std::vector<SpillPolicy>* policies,
                                      std::vector<StageShare>* split);

}  // namespace tessel::orchestrator
