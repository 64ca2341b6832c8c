// A pipeline stage's trained weights on disk, and the whole model assembled from them.
//
// At the end of a run, each stage of replica 0 writes RUN_DIR/weights/stage-<s>.bin: a header of 16
// int32 (magic 20241122, version 1, layers, width, heads, context, vocab, padded vocab, stage, stages,
// first block, end block, zero padding) then its parameters as float32: wte and wpe (first stage), each
// block's 12 tensors (ln1w ... fcprojb, llm.c's order within a block, block after block), lnfw and lnfb
// (last stage). `tessel export llmc RUN_DIR OUT.bin` (AssembleLlmc) checks that the stages cover every block
// once with one shape, and lays them out as an llm.c GPT-2 checkpoint.
// Thread safety: reentrant. Failure: kStorage writing; kBadData for a missing, foreign or partial stage.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "storage/llmc.h"
#include "workers/llm/llm_settings.h"

namespace tessel::workers {

inline constexpr int32_t kStageWeightsMagic = 20241122;

// The llm.c config of a Tessel GPT shape.
storage::LlmcConfig ToLlmc(const GptConfig& config);

// The names of a block's tensors, in llm.c's order ("ln1w", ..., "fcprojb"), and their shapes for width C.
const std::vector<std::string>& BlockTensorNames();
std::vector<int64_t> BlockTensorShape(const std::string& name, int64_t width);

// `values` holds the stage's tensors in the order above. Written to PATH.tmp, then renamed.
Status WriteStageWeights(const std::string& path, const GptConfig& config, const StagePlacement& place,
                         const std::vector<float>& values);

// Reads RUN_DIR/weights/stage-*.bin and assembles the llm.c checkpoint.
Result<storage::LlmcCheckpoint> AssembleLlmc(const std::string& run_dir);

}  // namespace tessel::workers
