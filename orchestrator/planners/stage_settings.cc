#include "orchestrator/planners/stage_settings.h"

#include "jobs/carry.h"

namespace tessel::orchestrator {

// Each struct is carried from the schema rows (jobs/carry.h); only the renamed and derived fields are named.
workers::GptConfig ConfigFor(const jobs::JobSpec& spec) {
  auto c =
      jobs::CarryFrom<workers::GptConfig>(spec, {.sections = {"model"},
                                                 .renamed = {{"width", "model.hidden"}, {"vocab", "model.vocab_size"}},
                                                 .derived = {"padded_vocab"}});
  c.padded_vocab = (c.vocab + 127) / 128 * 128;
  return c;
}

workers::LlmTrainSettings TrainFor(const jobs::JobSpec& spec) {
  auto s = jobs::CarryFrom<workers::LlmTrainSettings>(
      spec, {.sections = {"train", "pipeline"}, .renamed = {}, .derived = {"microbatch", "seq_len"}});
  const jobs::TrainSection& t = spec.train;
  s.microbatch = t.microbatch_size > 0 ? t.microbatch_size : t.batch_size / (s.microbatches * s.data_parallel);
  s.seq_len = t.seq_len > 0 ? t.seq_len : spec.model.context;
  return s;
}

workers::LlmDataSettings DataFor(const jobs::JobSpec& spec) {
  return jobs::CarryFrom<workers::LlmDataSettings>(
      spec, {.sections = {"data"},
             .renamed = {{"generated_seed", "data.synthetic.seed"}, {"shuffle_seed", "job.seed"}},
             .derived = {}});
}

}  // namespace tessel::orchestrator
