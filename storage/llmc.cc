#include "storage/llmc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/file_descriptor.h"
#include "core/logging.h"
#include "core/safe_file.h"
#include "storage/binary_file.h"
#include "storage/feature_check.h"

namespace tessel::storage {
namespace {

// The files are little-endian and read without conversion.
static_assert(std::endian::native == std::endian::little, "llm.c files are read as little-endian bytes in place");

constexpr int64_t kHeaderBytes = kLlmcHeaderInts * static_cast<int64_t>(sizeof(int32_t));
using Header = std::array<int32_t, kLlmcHeaderInts>;

// Reads and checks the 256-int header: the file must hold it, and carry `magic` and `version`.
Result<Header> ReadHeader(const OpenFile& file, const std::string& path, int32_t magic, int32_t version,
                          std::string_view what) {
  if (file.size < kHeaderBytes) {
    return BadDataError(
        StrCat(path, ": ", file.size, " bytes, shorter than the ", kHeaderBytes, "-byte header of an ", what));
  }
  Header header;
  TESSEL_RETURN_IF_ERROR(ReadAt(file, header.data(), kHeaderBytes, 0, path));
  if (header[0] != magic) {
    return BadDataError(StrCat(path, ": header[0] (magic) is ", header[0], ", expected ", magic, " for an ", what));
  }
  if (header[1] != version) {
    return BadDataError(StrCat(path, ": header[1] (version) is ", header[1], ", expected ", version, " for an ", what,
                               version == kLlmcCheckpointVersion && magic == kLlmcCheckpointMagic
                                   ? " (float32; version 5 is bf16, which Tessel does not read)"
                                   : ""));
  }
  return header;
}

// "header says N bytes, the file has M": the message for a size that does not match the header.
Status SizeMismatch(const std::string& path, int64_t expected, int64_t actual, std::string_view what) {
  if (actual < expected) {
    return BadDataError(StrCat(path, ": the header implies ", expected, " bytes (", what, ") but the file has only ",
                               actual, " (truncated?)"));
  }
  return BadDataError(StrCat(path, ": the header implies ", expected, " bytes (", what, ") but the file has ", actual,
                             " (", actual - expected, " extra bytes after the data)"));
}

// out[0, n) holds n values of Src stored packed at byte k * n of out's own storage (k = 4 - sizeof(Src)):
// widens them to int32 in place, front to back, one chunk at a time. A chunk's sources are copied aside
// first, so its writes may cover them; the writes of chunk [b, e) end at byte 4e, which is at most where
// the next chunk's sources begin (k * n + sizeof(Src) * e, because k * e <= k * n). So one buffer serves as
// both the read target and the result, and the widening loop vectorises. Returns the index of the first
// value >= bound, or -1.
template <typename Src>
int64_t WidenInPlace(int32_t* out, int64_t n, int64_t bound) {
  static_assert(std::is_unsigned_v<Src> && sizeof(Src) < sizeof(int32_t));
  constexpr int64_t kChunk = 4096;
  const unsigned char* src = reinterpret_cast<const unsigned char*>(out) + (sizeof(int32_t) - sizeof(Src)) * n;
  Src chunk[kChunk];
  int64_t first_bad = -1;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t m = std::min(kChunk, n - begin);
    std::memcpy(chunk, src + begin * static_cast<int64_t>(sizeof(Src)), static_cast<size_t>(m) * sizeof(Src));
    Src largest = 0;
    for (int64_t i = 0; i < m; ++i) {
      out[begin + i] = static_cast<int32_t>(chunk[i]);
      largest = std::max(largest, chunk[i]);
    }
    if (first_bad < 0 && static_cast<int64_t>(largest) >= bound) {
      for (int64_t i = 0; i < m && first_bad < 0; ++i) {
        if (out[begin + i] >= bound) first_bad = begin + i;
      }
    }
  }
  return first_bad;
}

// Reads n packed Src values at `offset` into a fresh int32 vector (one read, then widened in place).
template <typename Src>
Result<std::vector<int32_t>> ReadWidened(const OpenFile& file, const std::string& path, int64_t n, int64_t offset,
                                         int64_t bound, int64_t* first_bad) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  TESSEL_RETURN_IF_ERROR(
      ReadAt(file, bytes + (sizeof(int32_t) - sizeof(Src)) * n, n * static_cast<int64_t>(sizeof(Src)), offset, path));
  *first_bad = WidenInPlace<Src>(out.data(), n, bound);
  return out;
}

// The tensors with their shapes only (numel and offset 0): their products may overflow for a hostile header.
std::vector<LlmcTensor> TensorShapes(const LlmcConfig& config) {
  const int64_t vp = config.padded_vocab_size, t = config.max_seq_len, l = config.num_layers, c = config.channels;
  return {
      {"wte", {vp, c}},           {"wpe", {t, c}},      {"ln1w", {l, c}},        {"ln1b", {l, c}},
      {"qkvw", {l, 3 * c, c}},    {"qkvb", {l, 3 * c}}, {"attprojw", {l, c, c}}, {"attprojb", {l, c}},
      {"ln2w", {l, c}},           {"ln2b", {l, c}},     {"fcw", {l, 4 * c, c}},  {"fcb", {l, 4 * c}},
      {"fcprojw", {l, c, 4 * c}}, {"fcprojb", {l, c}},  {"lnfw", {c}},           {"lnfb", {c}},
  };
}

// The parameter count, or nullopt when it does not fit in int64 (an absurd header).
std::optional<int64_t> CheckedNumParameters(const LlmcConfig& c) {
  int64_t total = 0;
  for (const LlmcTensor& t : TensorShapes(c)) {
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (__builtin_mul_overflow(numel, d, &numel)) return std::nullopt;
    }
    if (__builtin_add_overflow(total, numel, &total)) return std::nullopt;
  }
  return total;
}

// Checks the sizes of a config; `where` names the file (or "checkpoint to write X").
Status ValidateConfig(const LlmcConfig& c, std::string_view where, Code code) {
  const std::pair<const char*, int32_t> fields[] = {
      {"header[2] (max_seq_len)", c.max_seq_len}, {"header[3] (vocab_size)", c.vocab_size},
      {"header[4] (num_layers)", c.num_layers},   {"header[5] (num_heads)", c.num_heads},
      {"header[6] (channels)", c.channels},       {"header[7] (padded_vocab_size)", c.padded_vocab_size}};
  for (const auto& [name, value] : fields) {
    if (value <= 0) return Status(code, StrCat(where, ": ", name, " is ", value, "; it must be positive"));
  }
  if (c.channels % c.num_heads != 0) {
    return Status(code, StrCat(where, ": header[6] (channels) ", c.channels,
                               " is not a multiple of header[5] (num_heads) ", c.num_heads));
  }
  if (c.padded_vocab_size < c.vocab_size) {
    return Status(code, StrCat(where, ": header[7] (padded_vocab_size) ", c.padded_vocab_size,
                               " is less than header[3] (vocab_size) ", c.vocab_size));
  }
  if (!CheckedNumParameters(c)) return Status(code, StrCat(where, ": the header's sizes overflow a 64-bit count"));
  return Status::Ok();
}

}  // namespace

Result<std::vector<int32_t>> ReadTextTokens(const std::string& path) {
  TESSEL_ASSIGN_OR_RETURN(OpenFile file, OpenForReading(path));
  if (file.size == 0) return BadDataError(StrCat(path, ": empty text file (no tokens)"));
  int64_t first_bad = -1;
  TESSEL_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                          ReadWidened<uint8_t>(file, path, file.size, 0, int64_t{256}, &first_bad));
  return tokens;
}

Result<std::vector<int32_t>> ReadLlmcTokens(const std::string& path, int32_t vocab) {
  if (vocab <= 0) return InternalError(StrCat(path, ": ReadLlmcTokens needs a positive vocabulary, got ", vocab));
  TESSEL_ASSIGN_OR_RETURN(OpenFile file, OpenForReading(path));
  TESSEL_ASSIGN_OR_RETURN(Header header,
                          ReadHeader(file, path, kLlmcTokensMagic, kLlmcTokensVersion, "llm.c token file"));
  const int64_t count = header[2];
  if (count <= 0) return BadDataError(StrCat(path, ": header[2] (token count) is ", count, "; it must be positive"));
  const int64_t expected = kHeaderBytes + count * static_cast<int64_t>(sizeof(uint16_t));
  if (file.size != expected) {
    return SizeMismatch(path, expected, file.size, StrCat("1024-byte header + ", count, " uint16 tokens"));
  }
  int64_t first_bad = -1;
  TESSEL_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                          ReadWidened<uint16_t>(file, path, count, kHeaderBytes, vocab, &first_bad));
  if (first_bad >= 0) {
    return BadDataError(StrCat(path, ": token ", first_bad, " is ", tokens[static_cast<size_t>(first_bad)],
                               ", not below the vocabulary size ", vocab));
  }
  return tokens;
}

Status WriteLlmcTokens(const std::string& path, const std::vector<int32_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return BadDataError(StrCat(path, ": ", tokens.size(), " tokens do not fit the int32 count of an llm.c token file"));
  }
  std::vector<uint16_t> packed(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 0xffff) {
      return BadDataError(StrCat(path, ": token ", i, " is ", tokens[i], "; an llm.c token file holds [0, 65536)"));
    }
    packed[i] = static_cast<uint16_t>(tokens[i]);
  }
  Header header{};
  header[0] = kLlmcTokensMagic;
  header[1] = kLlmcTokensVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  AtomicFileWriter out(path);
  TESSEL_RETURN_IF_ERROR(out.Open());
  TESSEL_RETURN_IF_ERROR(out.Write(header.data(), kHeaderBytes));
  TESSEL_RETURN_IF_ERROR(out.Write(packed.data(), static_cast<int64_t>(packed.size() * sizeof(uint16_t))));
  return out.Commit();
}

std::vector<LlmcTensor> LlmcTensors(const LlmcConfig& config) {
  std::vector<LlmcTensor> tensors = TensorShapes(config);
  int64_t offset = 0;
  for (LlmcTensor& tensor : tensors) {
    tensor.numel = 1;
    for (int64_t d : tensor.shape) tensor.numel *= d;
    tensor.offset = offset;
    offset += tensor.numel;
  }
  return tensors;
}

int64_t LlmcNumParameters(const LlmcConfig& config) {
  const std::vector<LlmcTensor> tensors = LlmcTensors(config);
  return tensors.back().offset + tensors.back().numel;
}

Result<LlmcCheckpoint> ReadLlmcCheckpoint(const std::string& path) {
  TESSEL_ASSIGN_OR_RETURN(OpenFile file, OpenForReading(path));
  TESSEL_ASSIGN_OR_RETURN(
      Header header, ReadHeader(file, path, kLlmcCheckpointMagic, kLlmcCheckpointVersion, "llm.c GPT-2 checkpoint"));
  LlmcCheckpoint ck;
  ck.config.max_seq_len = header[2];
  ck.config.vocab_size = header[3];
  ck.config.num_layers = header[4];
  ck.config.num_heads = header[5];
  ck.config.channels = header[6];
  ck.config.padded_vocab_size = header[7];
  TESSEL_RETURN_IF_ERROR(ValidateConfig(ck.config, path, Code::kBadData));
  const int64_t n = *CheckedNumParameters(ck.config);
  // Compared without multiplying n (which may be absurd): the file must hold exactly n floats after the header.
  const int64_t payload = file.size - kHeaderBytes;
  if (payload % static_cast<int64_t>(sizeof(float)) != 0 || payload / static_cast<int64_t>(sizeof(float)) != n) {
    const bool fits = n <= (std::numeric_limits<int64_t>::max() - kHeaderBytes) / static_cast<int64_t>(sizeof(float));
    if (!fits) return BadDataError(StrCat(path, ": the header implies ", n, " parameters, more than any file holds"));
    return SizeMismatch(path, kHeaderBytes + n * static_cast<int64_t>(sizeof(float)), file.size,
                        StrCat("1024-byte header + ", n, " float32 parameters"));
  }
  ck.params.resize(static_cast<size_t>(n));
  TESSEL_RETURN_IF_ERROR(ReadAt(file, ck.params.data(), n * static_cast<int64_t>(sizeof(float)), kHeaderBytes, path));
  const int64_t bad = FirstNonFinite(ck.params.data(), n);
  if (bad >= 0) {
    for (const LlmcTensor& t : LlmcTensors(ck.config)) {
      if (bad < t.offset + t.numel) {
        const float v = ck.params[static_cast<size_t>(bad)];
        return BadDataError(StrCat(path, ": parameter ", t.name, "[", bad - t.offset, "] (flat index ", bad, ") is ",
                                   std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf"), "; parameters must be finite"));
      }
    }
  }
  return ck;
}

Status WriteLlmcCheckpoint(const std::string& path, const LlmcCheckpoint& checkpoint) {
  const LlmcConfig& c = checkpoint.config;
  TESSEL_RETURN_IF_ERROR(ValidateConfig(c, StrCat(path, ": checkpoint to write"), Code::kInternal));
  const int64_t n = LlmcNumParameters(c);
  if (static_cast<int64_t>(checkpoint.params.size()) != n) {
    return InternalError(
        StrCat(path, ": checkpoint to write has ", checkpoint.params.size(), " parameters; its config needs ", n));
  }
  Header header{};
  header[0] = kLlmcCheckpointMagic;
  header[1] = kLlmcCheckpointVersion;
  header[2] = c.max_seq_len;
  header[3] = c.vocab_size;
  header[4] = c.num_layers;
  header[5] = c.num_heads;
  header[6] = c.channels;
  header[7] = c.padded_vocab_size;
  AtomicFileWriter out(path);
  TESSEL_RETURN_IF_ERROR(out.Open());
  TESSEL_RETURN_IF_ERROR(out.Write(header.data(), kHeaderBytes));
  TESSEL_RETURN_IF_ERROR(out.Write(checkpoint.params.data(), n * static_cast<int64_t>(sizeof(float))));
  return out.Commit();
}

Status ValidateLlmcConfig(const LlmcConfig& config, std::string_view where, Code code) {
  return ValidateConfig(config, where, code);
}

}  // namespace tessel::storage
