#include "orchestrator/planners/stage_settings.h"

namespace tessel::orchestrator {

workers::GptConfig ConfigFor(const jobs::JobSpec& spec) {
  workers::GptConfig c;
  c.layers = spec.model.layers;
  c.width = spec.model.hidden;
  c.heads = spec.model.heads;
  c.context = spec.model.context;
  c.vocab = spec.model.vocab_size;
  c.padded_vocab = (c.vocab + 127) / 128 * 128;
  return c;
}

workers::LlmTrainSettings TrainFor(const jobs::JobSpec& spec) {
  const jobs::TrainSection& t = spec.train;
  workers::LlmTrainSettings s;
  s.steps = t.steps;
  s.microbatches = spec.pipeline.microbatches;
  s.data_parallel = spec.pipeline.data_parallel;
  s.microbatch = t.microbatch_size > 0 ? t.microbatch_size : t.batch_size / (s.microbatches * s.data_parallel);
  s.seq_len = t.seq_len > 0 ? t.seq_len : spec.model.context;
  s.lr = t.lr;
  s.beta1 = t.beta1;
  s.beta2 = t.beta2;
  s.eps = t.eps;
  s.weight_decay = t.weight_decay;
  s.grad_clip = t.grad_clip;
  s.warmup_steps = t.warmup_steps;
  s.final_lr_fraction = t.final_lr_fraction;
  s.val_every = t.val_every;
  s.val_batches = t.val_batches;
  s.precision = t.precision;
  return s;
}

workers::LlmDataSettings DataFor(const jobs::JobSpec& spec) {
  const jobs::DataSection& d = spec.data;
  workers::LlmDataSettings s;
  s.format = d.format;
  s.text = d.text;
  s.train_tokens = d.train_tokens;
  s.val_tokens = d.val_tokens;
  s.val_fraction = d.val_fraction;
  s.generated_bytes = d.generated_bytes;
  s.generated_seed = d.synthetic.seed;
  s.order = d.order;
  s.shuffle_seed = spec.job.seed;
  return s;
}

}  // namespace tessel::orchestrator
