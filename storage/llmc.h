// The file formats of Karpathy's llm.c (train_gpt2.c), which the GPT job kind reads and writes:
//   - a text file: each byte is one token (vocabulary 256);
//   - a token file: a header of 256 int32 (magic 20240520, version 1, [2] = number of tokens), then that
//     many uint16 tokens;
//   - a GPT-2 checkpoint: a header of 256 int32 (magic 20240326, version 3, [2] maxT, [3] V, [4] L, [5] NH,
//     [6] C, [7] Vp), then every parameter tensor as float32, in train_gpt2.c's order (LlmcTensors).
// Every integer and float is little-endian, as llm.c writes them on x86 and ARM.
//
// Reading: one pass. The header is read and checked against the file's size before anything is
// allocated, then the payload is read in one go straight into the returned vector and converted in place.
// Failure: a file that cannot be opened, or a read that fails (EIO), is kStorage; a file whose bytes are
// not what its format says is kBadData. Every message starts with the path ("x.bin: ...").
// Writing: a checkpoint goes to PATH.tmp, is flushed to disk and renamed into place, so PATH is either the
// old file or the whole new one; a token file is written the same way. Failure: kStorage (disk full, no
// permission), with nothing left at PATH.tmp.
// Ownership: results are values the caller owns. Thread safety: plain functions; any thread may call them,
// as long as no two calls write the same path at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessel::storage {

inline constexpr int32_t kLlmcTokensMagic = 20240520;
inline constexpr int32_t kLlmcTokensVersion = 1;
inline constexpr int32_t kLlmcCheckpointMagic = 20240326;
inline constexpr int32_t kLlmcCheckpointVersion = 3;
inline constexpr int64_t kLlmcHeaderInts = 256;

// Each byte of a text file is one token (vocabulary 256). kBadData naming the file when it is empty or
// not a regular file; kStorage when it cannot be opened or read.
Result<std::vector<int32_t>> ReadTextTokens(const std::string& path);

// An llm.c token file. kBadData naming the file for: a wrong magic or version, a negative or zero token
// count, a file shorter or longer than the header says, a token id >= vocab (naming its index and value).
// kStorage when it cannot be opened or read. `vocab` must be positive (else kInternal).
Result<std::vector<int32_t>> ReadLlmcTokens(const std::string& path, int32_t vocab);

// Writes an llm.c token file (for tests, tools and the peers): header + uint16 tokens. A token outside
// [0, 65536) or more than 2^31 - 1 tokens is kBadData naming the index and value; I/O failure kStorage.
Status WriteLlmcTokens(const std::string& path, const std::vector<int32_t>& tokens);

struct LlmcConfig {
  int32_t max_seq_len = 0, vocab_size = 0, padded_vocab_size = 0, num_layers = 0, num_heads = 0, channels = 0;
  bool operator==(const LlmcConfig&) const = default;
};

// The parameter tensors of train_gpt2.c, in its order: wte [Vp,C], wpe [maxT,C], ln1w [L,C], ln1b [L,C],
// qkvw [L,3C,C], qkvb [L,3C], attprojw [L,C,C], attprojb [L,C], ln2w [L,C], ln2b [L,C], fcw [L,4C,C],
// fcb [L,4C], fcprojw [L,C,4C], fcprojb [L,C], lnfw [C], lnfb [C]. `offset` is the tensor's first
// element in the flat parameter array. Linear weights are [out, in], as llm.c stores them.
struct LlmcTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
};
// The sizes come from `config` as they are; the caller passes a config with positive fields (every
// config a reader returns has them).
std::vector<LlmcTensor> LlmcTensors(const LlmcConfig& config);
int64_t LlmcNumParameters(const LlmcConfig& config);
// Checks a config's sizes as the readers do (positive, C % NH == 0, Vp >= V, no overflow); `where` starts
// the message and `code` is its code.
Status ValidateLlmcConfig(const LlmcConfig& config, std::string_view where, Code code);

struct LlmcCheckpoint {
  LlmcConfig config;
  std::vector<float> params;  // every tensor, in LlmcTensors order
};

// An llm.c GPT-2 checkpoint (version 3, float32). kBadData naming the file (and the field) for: a wrong
// magic or version; a non-positive size; C % NH != 0; Vp < V; a file size that differs from the one the
// header implies (truncated or trailing bytes); a NaN or Inf parameter (naming the tensor and index).
// kStorage when it cannot be opened or read.
Result<LlmcCheckpoint> ReadLlmcCheckpoint(const std::string& path);

// Writes an llm.c checkpoint to PATH.tmp, then renames it into place (kStorage on failure, nothing
// half-written left at PATH). A config that a reader would refuse, or params whose size is not
// LlmcNumParameters(config), is kInternal (the caller's bug) and writes nothing.
Status WriteLlmcCheckpoint(const std::string& path, const LlmcCheckpoint& checkpoint);

}  // namespace tessel::storage
