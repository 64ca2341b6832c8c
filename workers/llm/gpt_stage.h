// GptStageExecutor: one pipeline stage of a GPT-2 decoder (exactly llm.c's train_gpt2.c block), trained
// with the 1F1B schedule across the stages of its replica and data-parallel across replicas. The "llm"
// job kind's executor (DESIGN.md "Executors"); its assignment comes from the stage planner.
//
// A step (one global batch of B x M x D sequences, one AdamW update):
//   1F1B over the M micro-batches of this replica: stage s runs min(S - s - 1, M) forwards, then
//   alternates one forward and one backward, then drains the backwards; activations go to worker w + 1
//   and their gradients come back from it (point-to-point MPI, polled); a stage keeps the saved
//   activations of at most min(S - s, M) micro-batches, each block as its policy says (the payload's
//   block_policies): all its tensors (keep), or only its input (recompute: the backward re-runs the
//   block's forward into one scratch shared by the stage's recompute blocks; the same bits as keep);
//   the tied embedding: the first and last stage each hold wte (the last for the output head) and add
//   each other's gradient, so both copies take the same update;
//   the replicas of a stage sum their gradients; the global gradient norm is clipped (train.grad_clip);
//   AdamW with decoupled weight decay on the 2-D parameters, at llm.c's learning-rate schedule.
// The loss is the mean cross-entropy over all B x T x M x D targets, the same on every worker.
//
// Ownership: borrows the ExecutorContext. Thread safety: one thread. Failure: kernel errors, kRankFailed
// when a neighbouring stage stops answering (timeouts.step_seconds), kBadData for bad tokens.
#pragma once

#include "workers/executor.h"

namespace tessel::workers {

// The registry entry for "llm.stage".
ExecutorFactory LlmStageFactory();

}  // namespace tessel::workers
