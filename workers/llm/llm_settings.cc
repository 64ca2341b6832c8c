#include "workers/llm/llm_settings.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/logging.h"
#include "storage/spill_store.h"

namespace tessel::workers {

double LearningRate(const LlmTrainSettings& t, int64_t s) {
  if (s < t.warmup_steps) return t.lr * static_cast<double>(s + 1) / t.warmup_steps;
  if (t.steps <= t.warmup_steps) return t.lr;
  const double min_lr = t.lr * t.final_lr_fraction;
  const double ratio = static_cast<double>(s - t.warmup_steps) / (t.steps - t.warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (t.lr - min_lr);
}

DType ActivationDType(Precision precision) { return precision == Precision::kBf16 ? DType::kBF16 : DType::kF32; }

int64_t BlockSavedBytesPerToken(SpillPolicy policy, int64_t width, int64_t heads, Precision precision) {
  const auto act = static_cast<int64_t>(DTypeSize(ActivationDType(precision)));
  return policy == SpillPolicy::kKeep ? 10 * width * act + (2 + heads) * 4 : width * act;
}

int64_t RecomputeScratchBytesPerToken(int64_t width, int64_t heads, Precision precision) {
  return BlockSavedBytesPerToken(SpillPolicy::kKeep, width, heads, precision);
}

int32_t OffloadBuffers(int32_t offload_blocks) {
  return offload_blocks <= 0 ? 0 : std::min(kOffloadBuffers, offload_blocks + 1);
}

int64_t OffloadPoolBytes(int64_t tokens, int64_t width, int64_t heads, int32_t offload_blocks, Precision precision) {
  constexpr int64_t kPage = 4096;
  const int64_t buffer = tokens * RecomputeScratchBytesPerToken(width, heads, precision);
  return OffloadBuffers(offload_blocks) * ((buffer + kPage - 1) / kPage * kPage);
}

std::string LlmStageAssignment::Describe() const {
  int64_t recompute = 0, offload = 0;
  for (SpillPolicy b : block_policies) {
    recompute += b == SpillPolicy::kRecompute ? 1 : 0;
    offload += b == SpillPolicy::kOffload ? 1 : 0;
  }
  return StrCat("gpt2 stage ", place.stage, " of ", place.stages, " (replica ", place.replica, "): blocks ",
                place.first_block, "..", place.end_block - 1, place.first() ? ", embedding" : "",
                place.last() ? ", head" : "", recompute > 0 ? StrCat(", ", recompute, " recomputed") : "",
                offload > 0 ? StrCat(", ", offload, " offloaded to ", storage::SpillDirectory(spill.dir)) : "");
}

std::string LlmStageAssignment::SizedBy() const {
  return StrCat("model.hidden = ", model.width, ", blocks ", place.first_block, "..", place.end_block - 1,
                " of model.layers = ", model.layers, " on this stage (pipeline.stages = ", place.stages, "), ",
                int64_t{train.microbatch} * train.seq_len,
                " tokens a micro-batch (train.microbatch_size x train.seq_len), ", train.microbatches,
                " micro-batches in flight at most, and model.vocab_size = ", model.vocab);
}

std::unique_ptr<AssignmentPayload> DecodeLlmAssignment(ByteReader& in) {
  auto a = std::make_unique<LlmStageAssignment>();
  DecodeFields(*a, in);
  if (!in.ok()) return nullptr;
  return a;
}

}  // namespace tessel::workers
