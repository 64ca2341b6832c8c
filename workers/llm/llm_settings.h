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
#include "workers/assignment.h"

namespace tessel::workers {

// GPT-2's shape (llm.c's GPT2Config): blocks, residual width C, heads, positions, vocabulary, and the
// vocabulary padded for the embedding table (wte has padded_vocab rows; only the first vocab are scored).
struct GptConfig {
  int32_t layers = 4;
  int32_t width = 256;
  int32_t heads = 4;
  int32_t context = 256;
  int32_t vocab = 256;
  int32_t padded_vocab = 256;
  bool operator==(const GptConfig&) const = default;
};

struct LlmTrainSettings {
  int32_t steps = 1;
  int32_t microbatch = 1;     // B: sequences per micro-batch
  int32_t seq_len = 256;      // T
  int32_t microbatches = 1;   // M per step and replica
  int32_t data_parallel = 1;  // D
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0, grad_clip = 0;
  int32_t warmup_steps = 0;
  double final_lr_fraction = 1;
  int32_t val_every = 0;
  int32_t val_batches = 20;
  // Sequences in a global batch: B x M x D.
  int64_t global_batch() const { return int64_t{microbatch} * microbatches * data_parallel; }
  bool operator==(const LlmTrainSettings&) const = default;
};

// The learning rate of 0-based step `s` (llm.c's get_learning_rate): linear warm-up over warmup_steps,
// then a cosine from lr towards lr x final_lr_fraction, which it would reach at s = steps (one past the
// last step, as in llm.c).
double LearningRate(const LlmTrainSettings& t, int64_t s);

enum class TokenSource : int32_t { kText = 0, kLlmc = 1, kGenerated = 2 };

struct LlmDataSettings {
  TokenSource source = TokenSource::kText;
  std::string text;                      // kText
  std::string train_tokens, val_tokens;  // kLlmc (val_tokens "" = the tail of train_tokens)
  double val_fraction = 0.1;
  int64_t generated_bytes = 1 << 20;  // kGenerated
  uint64_t generated_seed = 1;
  bool shuffled = false;
  uint64_t shuffle_seed = 0;
  bool operator==(const LlmDataSettings&) const = default;
};

struct StagePlacement {
  int32_t stage = 0, stages = 1;
  int32_t first_block = 0, end_block = 0;  // blocks [first_block, end_block)
  int32_t replica = 0;
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  bool operator==(const StagePlacement&) const = default;
};

// What one block keeps from its forward for its backward, per micro-batch in flight ([spill] policy and
// layer_policies, resolved by the planner: "auto" never reaches a worker).
//   kKeep:      every tensor of the block (BlockSavedFloatsPerToken(kKeep) floats a token);
//   kRecompute: only the block's input; the backward re-runs the block's forward into one scratch shared
//               by the stage's recompute blocks (one extra block forward per micro-batch);
//   kOffload:   only the block's input stays; the rest is written to the worker's spill file (DESIGN.md
//               "Spill store") through a pool of OffloadBuffers() buffers of a kept block's tensors less
//               its input, and read back, prefetched, for the backward (workers/llm/spill_pool.h). When
//               the disk is full or a read fails its checksum the block is recomputed from its input.
enum class BlockPolicy : int32_t { kKeep = 0, kRecompute = 1, kOffload = 2 };
std::string_view BlockPolicyName(BlockPolicy policy);  // "keep", "recompute", "offload"

// Floats a token that one block holds per micro-batch in flight under `policy`: kept, 10 C (ln1, qkv
// (3 C), atty, ln2, fch (4 C)) + the two LayerNorms' rstd + the heads' log-sum-exps (after Tempo: both
// LayerNorms differentiate from their outputs, so neither the block's input, nor the mid-block residual,
// nor the means are kept; the GELU's output is regenerated from its input in the backward; attention
// keeps no T x T matrix); recomputed or offloaded,
// its input x (C). Against saving everything (16 C + 4 + heads, and T heads for attention's
// probabilities), the executor allocates exactly these (workers/llm/gpt_stage.cc) and the planner
// predicts with them (an offloading stage adds its pool: OffloadPoolFloatsPerToken).
int64_t BlockSavedFloatsPerToken(BlockPolicy policy, int64_t width, int64_t heads);
// Floats a token of the one scratch a stage with any recompute block holds (and of one offload buffer):
// a kept block's tensors (the block's input stays in its micro-batch's slot).
int64_t RecomputeScratchFloatsPerToken(int64_t width, int64_t heads);
// The offload pool of a stage with `offload_blocks` offloaded blocks: one buffer computing (or in a
// backward) and the others written or prefetched, at most kOffloadBuffers, at most one per block and one.
constexpr int32_t kOffloadBuffers = 4;
int32_t OffloadBuffers(int32_t offload_blocks);
int64_t OffloadPoolFloatsPerToken(int64_t width, int64_t heads, int32_t offload_blocks);

// [spill]: where an offloading stage's spill file goes (storage/spill_store.h).
struct LlmSpillSettings {
  std::string dir = "/tmp/tessel-spill";
  std::string name = "tessel";  // the file stem; the worker and the pid are added
  bool checksum = false;
  int64_t budget_bytes = 0;
  bool operator==(const LlmSpillSettings&) const = default;
};

class LlmStageAssignment final : public AssignmentPayload {
 public:
  static constexpr std::string_view kKind = "llm.stage";
  std::string_view kind() const override { return kKind; }
  void Encode(ByteWriter& out) const override;
  std::string Describe() const override;

  GptConfig model;
  LlmTrainSettings train;
  LlmDataSettings data;
  StagePlacement place;
  std::string init_from;  // an llm.c checkpoint, or "" to initialise from the seed
  // One entry per block of the stage, blocks [place.first_block, place.end_block) in order.
  std::vector<BlockPolicy> block_policies;
  LlmSpillSettings spill;
};

std::unique_ptr<AssignmentPayload> DecodeLlmAssignment(ByteReader& in);

}  // namespace tessel::workers
