// The job's settings as a GPT stage runs them: the one named function per struct of the "llm.stage"
// payload (workers/llm/llm_settings.h), reading the validated job and deriving what the job leaves open
// (the padded vocabulary, the micro-batch size, the sequence length). The stage planner calls them, and so
// can a test that needs a stage's settings as a job would give them.
// Thread safety: reentrant. Failure: none (the job was validated).
#pragma once

#include "jobs/spec.h"
#include "workers/llm/llm_settings.h"

namespace tessel::orchestrator {

// model.*: padded_vocab is vocab_size rounded up to a multiple of 128 (llm.c's padding); the checkpoint's
// own value replaces it when model.init_from is set.
workers::GptConfig ConfigFor(const jobs::JobSpec& spec);
// train.* and pipeline.*: microbatch = train.microbatch_size, or batch_size / (microbatches x
// data_parallel); seq_len = train.seq_len, or model.context.
workers::LlmTrainSettings TrainFor(const jobs::JobSpec& spec);
// data.*: batches are shuffled with job.seed.
workers::LlmDataSettings DataFor(const jobs::JobSpec& spec);

}  // namespace tessel::orchestrator
