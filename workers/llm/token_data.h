// The tokens an llm job trains and validates on, and which tokens each batch reads.
//
// Splits: a text file (each byte a token) or an llm.c token file is split at (1 - val_fraction) of its
// length: the head trains, the tail validates; an llm.c job may name its own validation file instead.
// "generated_text" makes text in memory (GenerateText) so the demo needs no data.
//
// Batches (BatchPlan): a global batch is G sequences of T tokens. "sequential" is llm.c's data loader
// without shuffling: batch k reads the G x T + 1 tokens from offset k x G x T (sequence j from offset
// k x G x T + j x T, its targets shifted by one), starting again at 0 when the next batch would run past
// the end. "shuffled" cuts the split into sequences at multiples of T and visits them in a seeded random
// order per pass. A batch is the same whatever the number of stages, replicas or micro-batches: the
// worker that trains sequence j is decided by j alone.
// Thread safety: values; a BatchPlan caches its shuffled order, so one thread per plan. Failure: kBadData
// naming the file when a split is too short.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "workers/llm/llm_settings.h"

namespace tessel::workers {

struct TokenSplits {
  std::vector<int32_t> train, val;
  std::string train_name, val_name;  // the files they came from, for messages
};

// Reads (or generates) the tokens and splits them. kBadData naming the file: unreadable or malformed
// files, token ids >= vocab, a training split shorter than one batch (G x T + 1 tokens), a validation
// split (when val_fraction > 0 or val_tokens is set) shorter than one batch too.
Result<TokenSplits> LoadTokenSplits(const LlmDataSettings& data, int32_t vocab, int64_t global_batch, int64_t seq_len);

// Whether the job validates: a held-out tail, or (llmc) a validation file.
bool HasValidation(const LlmDataSettings& data);

// `bytes` bytes of English-like text from a seeded word-level Markov chain: learnable structure (a
// model's loss falls well below ln 256) without any data file.
std::string GenerateText(int64_t bytes, uint64_t seed);

class BatchPlan {
 public:
  BatchPlan(int64_t num_tokens, int64_t seq_len, int64_t sequences, bool shuffled, uint64_t seed);
  // Batches before the plan starts again from the beginning (>= 1 when the split holds a batch).
  int64_t batches_per_pass() const { return per_pass_; }
  // The offset of the first token of sequence j of batch k; the sequence is tokens [start, start + T] (T +
  // 1 tokens: inputs the first T, targets the last T).
  int64_t Start(int64_t batch, int64_t j) const;

 private:
  int64_t seq_len_, sequences_, per_pass_ = 0, slots_ = 0;
  bool shuffled_;
  uint64_t seed_;
  mutable int64_t cached_pass_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace tessel::workers
