// libFuzzer target: the llm.c file readers (storage/llmc.h). The input is written to a file (one per
// process, rewritten each run) and read as each format; what a reader returns is checked against the
// input bytes:
//   - ReadTextTokens: one token per byte, equal to the byte (an empty file is refused);
//   - ReadLlmcTokens with vocabulary 65536: the header's count of uint16 tokens, equal to the file's;
//     with a smaller vocabulary taken from the input, refused exactly when a token is out of range,
//     naming the first such token; WriteLlmcTokens writes the same header fields and tokens back;
//   - ReadLlmcCheckpoint: the header's sizes and the float32 parameters, bit for bit; WriteLlmcCheckpoint
//     writes the same header fields and parameters back, and ReadLlmcCheckpoint reads them again.
//
// Seeds: `llmc_fuzz --write-seeds=DIR` writes a token file, two checkpoints and a text (README.md).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "storage/llmc.h"
#include "tests/fuzz/fuzz_util.h"

namespace tessel::storage {
namespace {

constexpr size_t kHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "llmc_fuzz: %s\n", what.c_str());
  std::abort();
}

std::string ScratchPath(const char* what) { return fuzz::ScratchPath("llmc_fuzz", StrCat(what, ".bin")); }

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int32_t HeaderInt(const uint8_t* data, size_t i) {
  int32_t v;
  std::memcpy(&v, data + 4 * i, 4);
  return v;
}

// The bytes written back equal the input in the header's first `header_ints` and in everything after it.
void CheckWrittenBack(const uint8_t* data, size_t size, size_t header_ints, const std::string& path, const char* what) {
  const std::vector<uint8_t> written = ReadBytes(path);
  if (written.size() != size) Fail(StrCat(what, ": wrote ", written.size(), " bytes for a file of ", size));
  if (std::memcmp(written.data(), data, 4 * header_ints) != 0 ||
      std::memcmp(written.data() + kHeaderBytes, data + kHeaderBytes, size - kHeaderBytes) != 0) {
    Fail(StrCat(what, ": the file written back differs from the one read"));
  }
}

void CheckText(const std::string& path, const uint8_t* data, size_t size) {
  Result<std::vector<int32_t>> tokens = ReadTextTokens(path);
  if (!tokens.ok()) {
    if (size > 0) Fail("ReadTextTokens refuses a non-empty file: " + tokens.status().ToString());
    return;
  }
  if (tokens->size() != size) Fail(StrCat("ReadTextTokens: ", tokens->size(), " tokens for ", size, " bytes"));
  for (size_t i = 0; i < size; ++i) {
    if ((*tokens)[i] != data[i]) Fail(StrCat("ReadTextTokens: token ", i, " is ", (*tokens)[i], ", byte ", data[i]));
  }
}

void CheckTokens(const std::string& path, const uint8_t* data, size_t size) {
  Result<std::vector<int32_t>> tokens = ReadLlmcTokens(path, 65536);
  if (!tokens.ok()) return;
  const int64_t count = HeaderInt(data, 2);
  if (static_cast<int64_t>(tokens->size()) != count)
    Fail(StrCat("ReadLlmcTokens: ", tokens->size(), " tokens, header says ", count));
  if (size != kHeaderBytes + 2 * tokens->size()) Fail(StrCat("ReadLlmcTokens accepted a file of ", size, " bytes"));
  int64_t first_bad = -1;
  const int32_t vocab = 1 + data[kHeaderBytes] * 256 + data[size - 1];  // some tokens in range, some not
  for (size_t i = 0; i < tokens->size(); ++i) {
    uint16_t raw;
    std::memcpy(&raw, data + kHeaderBytes + 2 * i, 2);
    if ((*tokens)[i] != raw) Fail(StrCat("ReadLlmcTokens: token ", i, " is ", (*tokens)[i], ", the file holds ", raw));
    if (first_bad < 0 && raw >= vocab) first_bad = static_cast<int64_t>(i);
  }
  Result<std::vector<int32_t>> bounded = ReadLlmcTokens(path, vocab);
  if (first_bad < 0 && !bounded.ok()) {
    Fail(StrCat("ReadLlmcTokens(vocab ", vocab, ") refuses tokens all in range: ", bounded.status().ToString()));
  }
  if (first_bad >= 0) {
    const std::string names = StrCat(": token ", first_bad, " is ", (*tokens)[first_bad], ", not below");
    if (bounded.ok())
      Fail(StrCat("ReadLlmcTokens(vocab ", vocab, ") accepts token ", first_bad, " = ", (*tokens)[first_bad]));
    if (bounded.status().message().find(names) == std::string::npos) {
      Fail(StrCat("ReadLlmcTokens(vocab ", vocab, ") names the wrong token (expected '", names,
                  "'): ", bounded.status().ToString()));
    }
  }
  const std::string copy = ScratchPath("tokens-copy");
  if (Status st = WriteLlmcTokens(copy, *tokens); !st.ok()) Fail("WriteLlmcTokens: " + st.ToString());
  CheckWrittenBack(data, size, 3, copy, "WriteLlmcTokens");
}

void CheckCheckpoint(const std::string& path, const uint8_t* data, size_t size) {
  Result<LlmcCheckpoint> ck = ReadLlmcCheckpoint(path);
  if (!ck.ok()) return;
  const LlmcConfig& c = ck->config;
  const LlmcConfig header{.max_seq_len = HeaderInt(data, 2),
                          .vocab_size = HeaderInt(data, 3),
                          .padded_vocab_size = HeaderInt(data, 7),
                          .num_layers = HeaderInt(data, 4),
                          .num_heads = HeaderInt(data, 5),
                          .channels = HeaderInt(data, 6)};
  if (!(c == header)) Fail("ReadLlmcCheckpoint: the config differs from the header");
  if (static_cast<int64_t>(ck->params.size()) != LlmcNumParameters(c) || size != kHeaderBytes + 4 * ck->params.size() ||
      std::memcmp(ck->params.data(), data + kHeaderBytes, 4 * ck->params.size()) != 0) {
    Fail("ReadLlmcCheckpoint: the parameters differ from the file's");
  }
  const std::string copy = ScratchPath("checkpoint-copy");
  if (Status st = WriteLlmcCheckpoint(copy, *ck); !st.ok()) Fail("WriteLlmcCheckpoint: " + st.ToString());
  CheckWrittenBack(data, size, 8, copy, "WriteLlmcCheckpoint");
  Result<LlmcCheckpoint> again = ReadLlmcCheckpoint(copy);
  if (!again.ok()) Fail("ReadLlmcCheckpoint refuses what WriteLlmcCheckpoint wrote: " + again.status().ToString());
}

void Check(const uint8_t* data, size_t size) {
  static const std::string input = ScratchPath("input");
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) Fail("cannot write " + input);
  }
  CheckText(input, data, size);
  CheckTokens(input, data, size);
  CheckCheckpoint(input, data, size);
}

// ---- seeds ------------------------------------------------------------------------------------------

LlmcCheckpoint SeedCheckpoint(const LlmcConfig& config) {
  LlmcCheckpoint ck{config, std::vector<float>(static_cast<size_t>(LlmcNumParameters(config)))};
  for (size_t i = 0; i < ck.params.size(); ++i) ck.params[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  return ck;
}

void WriteSeeds(const std::string& dir) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 64; ++i) tokens.push_back((i * 37) % 300);
  if (Status st = WriteLlmcTokens(dir + "/tokens.bin", tokens); !st.ok()) Fail(st.ToString());
  const LlmcConfig ones{
      .max_seq_len = 1, .vocab_size = 1, .padded_vocab_size = 1, .num_layers = 1, .num_heads = 1, .channels = 1};
  const LlmcConfig small{
      .max_seq_len = 4, .vocab_size = 5, .padded_vocab_size = 8, .num_layers = 1, .num_heads = 2, .channels = 4};
  for (const auto& [name, config] :
       {std::pair{"checkpoint_ones.bin", ones}, std::pair{"checkpoint_small.bin", small}}) {
    if (Status st = WriteLlmcCheckpoint(StrCat(dir, "/", name), SeedCheckpoint(config)); !st.ok()) Fail(st.ToString());
  }
  std::ofstream(dir + "/text.txt") << "First Citizen:\nBefore we proceed any further, hear me speak.\n";
}

}  // namespace
}  // namespace tessel::storage

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  tessel::fuzz::WriteSeedsIfAsked(*argc, *argv, tessel::storage::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::storage::Check(data, size);
  return 0;
}
