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

#include <string>

#include "jobs/spec.h"
#include "orchestrator/planners/planner.h"
#include "orchestrator/planners/stage_calibration.h"
#include "orchestrator/planners/stage_search.h"

namespace tessel::orchestrator {

class StagePlanner final : public Planner {
 public:
  Result<Plan> MakePlan(const jobs::JobSpec& spec, int32_t num_workers, const Logger& log) override;
  void Print(const jobs::JobSpec& spec, const Plan& plan, std::ostream& out) const override;
  void Publish(const Plan& plan, monitoring::Metrics& metrics) const override;
  std::string Length(const jobs::JobSpec& spec) const override {
    return StrCat(spec.train.steps, " steps, ", spec.pipeline.stages, " stages");
  }
};

}  // namespace tessel::orchestrator
