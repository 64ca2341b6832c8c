// What the stage planner measures before it splits a GPT (orchestrator/planners/stage_planner.h): the
// kernels of one block, the head and the embedding at the job's micro-batch shape, on this rank with the
// job's plugins and threads; and the spill bandwidth of [spill] dir through the spill store itself.
// Thread safety: one thread. Failure: plugin errors (a missing op), storage errors (the spill directory).
#pragma once

#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "core/status.h"
#include "jobs/spec.h"
#include "workers/llm/llm_settings.h"

namespace tessel::orchestrator {

// Measured costs of one micro-batch (forward + backward, seconds), and the shapes its memory follows from.
struct StageCosts {
  double block_seconds = 0, embed_seconds = 0, head_seconds = 0;
  double block_forward_seconds = 0;  // the forward alone, part of block_seconds: a recompute block's extra
  int64_t tokens = 0;                // N = B x T of a micro-batch
  int64_t width = 0, heads = 0, vocab = 0, padded_vocab = 0, context = 0;
  Precision precision = Precision::kFp32;  // the job's: what the activations take (the kernels ran in it)
  // A CPU worker's resident memory besides its tensors (libraries, BLAS buffers, token data), measured by
  // the calibration; 0 for GPU workers. Part of every stage's memory.
  int64_t process_bytes = 0;
  Device device = Device::kCpu;    // where the kernels were timed
  double calibration_seconds = 0;  // what the calibration took, loading the plugins included
  std::string note;                // why a GPU job was timed on the CPU; "" otherwise
};

// Times the kernels of one block, the head and the embedding at the job's micro-batch shape on this
// rank, with the job's plugins and threads: the best of a few runs of each. A job that runs on GPUs
// (job.device "cuda", or "auto" where this rank sees one) is timed on this rank's first GPU, on a stream
// of its own; where this rank sees none, on its CPU, with a note saying so.
Result<StageCosts> Calibrate(const jobs::JobSpec& spec, const workers::GptConfig& model,
                             const workers::LlmTrainSettings& train);

// Spill bandwidth measured in [spill] dir: bytes a second written (until on disk) and read back (after the
// pages left the page cache), through the spill store itself, with at most a quarter of the free space.
// Both 0 when the directory had too little free space to measure (under 1 MiB) or filled up during the
// probe: the planner then treats it as full (nothing is chosen to offload).
struct SpillBandwidth {
  double write_bytes_per_second = 0, read_bytes_per_second = 0;
  int64_t free_bytes = -1;  // the directory's free space before the probe; -1: unknown
  int64_t probe_bytes = 0;  // what the probe wrote (and read back)
  bool measured() const { return probe_bytes > 0; }
};
Result<SpillBandwidth> MeasureSpillBandwidth(const jobs::JobSpec& spec, int64_t slot_bytes);

}  // namespace tessel::orchestrator
