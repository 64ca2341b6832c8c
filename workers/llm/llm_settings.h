// What a GPT pipeline-stage worker receives: the model's shape, the training and data settings, and
// where its stage sits (which blocks, which replica) and what each of its blocks keeps for the backward,
// together the "llm.stage" assignment payload made by the stage planner
// (orchestrator/planners/stage_planner.h). Values resolved by the coordinator.
//
// Worker w runs stage w % stages of replica w / stages: a replica's stages are consecutive workers, so
// stage s sends activations to worker w + 1 and gradients to worker w - 1.
// Thread safety: values. Failure: DecodeLlmAssignment fails the reader on malformed bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_io.h"
#include "core/choices.h"
#include "core/fields.h"
#include "core/tensor.h"
#include "workers/assignment.h"

namespace tessel::workers {

// Each struct's fields are declared once, in its list (core/fields.h): the list gives the members (no
// defaults: every value comes from the stage planner's ConfigFor/TrainFor/DataFor, which read the
// validated job), the wire encoding, equality and the description.

// GPT-2's shape (llm.c's GPT2Config): blocks, residual width C, heads, positions, vocabulary, and the
// vocabulary padded for the embedding table (wte has padded_vocab rows; only the first vocab are scored).
#define TESSEL_GPT_CONFIG_FIELDS(X) \
  X(int32_t, layers)                \
  X(int32_t, width)                 \
  X(int32_t, heads)                 \
  X(int32_t, context)               \
  X(int32_t, vocab)                 \
  X(int32_t, padded_vocab)
struct GptConfig {
  TESSEL_FIELDS(GptConfig, TESSEL_GPT_CONFIG_FIELDS)
};

// [train] and [pipeline] as a stage runs them: microbatch B sequences of seq_len T, microbatches M per
// step and replica, data_parallel D replicas.
#define TESSEL_LLM_TRAIN_FIELDS(X) \
  X(int32_t, steps)                \
  X(int32_t, microbatch)           \
  X(int32_t, seq_len)              \
  X(int32_t, microbatches)         \
  X(int32_t, data_parallel)        \
  X(double, lr)                    \
  X(double, beta1)                 \
  X(double, beta2)                 \
  X(double, eps)                   \
  X(double, weight_decay)          \
  X(double, grad_clip)             \
  X(int32_t, warmup_steps)         \
  X(double, final_lr_fraction)     \
  X(int32_t, val_every)            \
  X(int32_t, val_batches)          \
  X(Precision, precision)
struct LlmTrainSettings {
  TESSEL_FIELDS(LlmTrainSettings, TESSEL_LLM_TRAIN_FIELDS)
  // Sequences in a global batch: B x M x D.
  int64_t global_batch() const { return int64_t{microbatch} * microbatches * data_parallel; }
};

// The learning rate of 0-based step `s` (llm.c's get_learning_rate): linear warm-up over warmup_steps,
// then a cosine from lr towards lr x final_lr_fraction, which it would reach at s = steps (one past the
// last step, as in llm.c).
double LearningRate(const LlmTrainSettings& t, int64_t s);

// Where the tokens come from: format kText (text), kLlmc (train_tokens, val_tokens; val_tokens "" = the
// tail of train_tokens) or kGeneratedText (generated_bytes from generated_seed); order kShuffled draws
// batches with shuffle_seed.
#define TESSEL_LLM_DATA_FIELDS(X) \
  X(DataFormat, format)           \
  X(std::string, text)            \
  X(std::string, train_tokens)    \
  X(std::string, val_tokens)      \
  X(double, val_fraction)         \
  X(int64_t, generated_bytes)     \
  X(uint64_t, generated_seed)     \
  X(BatchOrder, order)            \
  X(uint64_t, shuffle_seed)
struct LlmDataSettings {
  TESSEL_FIELDS(LlmDataSettings, TESSEL_LLM_DATA_FIELDS)
};

// Blocks [first_block, end_block) of the model, as stage `stage` of `stages` in replica `replica`.
#define TESSEL_STAGE_PLACEMENT_FIELDS(X) \
  X(int32_t, stage)                      \
  X(int32_t, stages)                     \
  X(int32_t, first_block)                \
  X(int32_t, end_block)                  \
  X(int32_t, replica)
struct StagePlacement {
  TESSEL_FIELDS(StagePlacement, TESSEL_STAGE_PLACEMENT_FIELDS)
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
};

// What one block keeps from its forward for its backward, per micro-batch in flight ([spill] policy and
// layer_policies, resolved by the planner: a block's SpillPolicy (core/choices.h) is never kAuto or kPlan).
//   kKeep:      every tensor of the block (BlockSavedFloatsPerToken(kKeep) floats a token);
//   kRecompute: only the block's input; the backward re-runs the block's forward into one scratch shared
//               by the stage's recompute blocks (one extra block forward per micro-batch);
//   kOffload:   only the block's input stays; the rest is written to the worker's spill file (DESIGN.md
//               "Spill store") through a pool of OffloadBuffers() buffers of a kept block's tensors less
//               its input, and read back, prefetched, for the backward (workers/llm/spill_pool.h). When
//               the disk is full or a read fails its checksum the block is recomputed from its input.
// The dtype of a stage's activations, working weights and activation gradients under `precision` (bf16
// or f32); the LayerNorm statistics, log-sum-exps, parameter gradients, master weights and AdamW's moments
// are f32 either way.
DType ActivationDType(Precision precision);

// Bytes a token that one block holds per micro-batch in flight under `policy`: kept, 10 C activations (ln1, qkv
// (3 C), atty, ln2, fch (4 C)) + the two LayerNorms' rstd + the heads' log-sum-exps (after Tempo: both
// LayerNorms differentiate from their outputs, so neither the block's input, nor the mid-block residual,
// nor the means are kept; the GELU's output is regenerated from its input in the backward; attention
// keeps no T x T matrix); recomputed or offloaded,
// its input x (C). Against saving everything (16 C + 4 + heads, and T heads for attention's
// probabilities), the executor allocates exactly these (workers/llm/gpt_stage.cc) and the planner
// predicts with them (an offloading stage adds its pool: OffloadPoolBytes). The activations take
// ActivationDType(precision)'s bytes, the 2 + heads statistics 4 bytes each.
int64_t BlockSavedBytesPerToken(SpillPolicy policy, int64_t width, int64_t heads, Precision precision);
// Bytes a token of the one scratch a stage with any recompute block holds (and of one offload buffer):
// a kept block's tensors (the block's input stays in its micro-batch's slot).
int64_t RecomputeScratchBytesPerToken(int64_t width, int64_t heads, Precision precision);
// The offload pool of a stage with `offload_blocks` offloaded blocks: one buffer computing (or in a
// backward) and the others written or prefetched, at most kOffloadBuffers, at most one per block and one.
constexpr int32_t kOffloadBuffers = 4;
int32_t OffloadBuffers(int32_t offload_blocks);
// Its bytes for micro-batches of `tokens` tokens: each buffer is rounded up to whole 4 KiB pages, as the
// pool allocates it (workers/llm/spill_pool.cc), so that every spill write is of whole pages.
int64_t OffloadPoolBytes(int64_t tokens, int64_t width, int64_t heads, int32_t offload_blocks, Precision precision);

// [spill]: where an offloading stage's spill file goes (storage/spill_store.h); name is the file stem
// (the job's name; the worker and the pid are added).
#define TESSEL_LLM_SPILL_FIELDS(X) \
  X(std::string, dir)              \
  X(std::string, name)             \
  X(bool, checksum)                \
  X(int64_t, budget_bytes)
struct LlmSpillSettings {
  TESSEL_FIELDS(LlmSpillSettings, TESSEL_LLM_SPILL_FIELDS)
};

// The "llm.stage" payload. init_from: an llm.c checkpoint, or "" to initialise from the seed.
// block_policies: one per block of the stage, blocks [place.first_block, place.end_block) in order.
#define TESSEL_LLM_STAGE_FIELDS(X)            \
  X(GptConfig, model)                         \
  X(LlmTrainSettings, train)                  \
  X(LlmDataSettings, data)                    \
  X(StagePlacement, place)                    \
  X(std::string, init_from)                   \
  X(std::vector<SpillPolicy>, block_policies) \
  X(LlmSpillSettings, spill)
class LlmStageAssignment final : public AssignmentPayload {
 public:
  static constexpr std::string_view kKind = "llm.stage";
  std::string_view kind() const override { return kKind; }
  void Encode(ByteWriter& out) const override { EncodeFields(*this, out); }
  std::string Describe() const override;
  std::string DescribeSettings() const override { return DescribeFields(*this); }
  std::string SizedBy() const override;

  TESSEL_FIELD_LIST(TESSEL_LLM_STAGE_FIELDS)
};

std::unique_ptr<AssignmentPayload> DecodeLlmAssignment(ByteReader& in);

}  // namespace tessel::workers
