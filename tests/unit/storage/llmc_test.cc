#include "storage/llmc.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/storage/test_util.h"
#include "tests/unit/test_data.h"

namespace tessel::storage {
namespace {

using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteText;

// Bytes of an llm.c file: a 256-int header (the given leading ints, zeros after), then `payload`.
std::string LlmcFile(const std::vector<int32_t>& header_ints, const std::string& payload) {
  std::vector<int32_t> header(256, 0);
  std::copy(header_ints.begin(), header_ints.end(), header.begin());
  std::string bytes(reinterpret_cast<const char*>(header.data()), header.size() * sizeof(int32_t));
  return bytes + payload;
}

template <typename T>
std::string Packed(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Expects `status` to carry `code` and a message that names `path` and contains `fragment`.
void ExpectError(const Status& status, Code code, const std::string& path, const std::string& fragment) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

LlmcConfig SmallConfig() {
  LlmcConfig c;
  c.max_seq_len = 8;
  c.vocab_size = 250;
  c.padded_vocab_size = 256;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 4;
  return c;
}

std::vector<int32_t> HeaderOf(const LlmcConfig& c) {
  return {kLlmcCheckpointMagic, kLlmcCheckpointVersion, c.max_seq_len, c.vocab_size, c.num_layers, c.num_heads,
          c.channels,           c.padded_vocab_size};
}

// Random floats with a few awkward values (negative zero, a denormal, the extremes) among them.
std::vector<float> RandomParams(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> p(static_cast<size_t>(n));
  for (float& v : p) v = normal(rng);
  p[0] = -0.0f;
  p[1] = std::numeric_limits<float>::denorm_min();
  p[2] = std::numeric_limits<float>::max();
  p[3] = std::numeric_limits<float>::lowest();
  return p;
}

// ---- text --------------------------------------------------------------------------------------------

TEST(LlmcText, EachByteIsOneToken) {
  ScratchDir dir;
  const std::string path = dir.File("t.txt");
  WriteText(path, std::string("a\0\xff\n", 4));
  Result<std::vector<int32_t>> tokens = ReadTextTokens(path);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(*tokens, (std::vector<int32_t>{97, 0, 255, 10}));
}

TEST(LlmcText, LongTextCrossesChunkBoundaries) {
  ScratchDir dir;
  const std::string path = dir.File("t.txt");
  std::string text(3 * 4096 + 17, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>((i * 37 + 11) % 256);
  WriteText(path, text);
  Result<std::vector<int32_t>> tokens = ReadTextTokens(path);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_EQ(tokens->size(), text.size());
  for (size_t i = 0; i < text.size(); ++i) ASSERT_EQ((*tokens)[i], static_cast<unsigned char>(text[i])) << i;
}

TEST(LlmcText, EmptyFileIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("empty.txt");
  WriteText(path, "");
  ExpectError(ReadTextTokens(path).status(), Code::kBadData, path, "empty");
}

TEST(LlmcText, MissingFileIsStorageError) {
  ScratchDir dir;
  const std::string path = dir.File("absent.txt");
  ExpectError(ReadTextTokens(path).status(), Code::kStorage, path, "cannot open");
}

TEST(LlmcText, DirectoryIsBadData) {
  ScratchDir dir;
  ExpectError(ReadTextTokens(dir.path().string()).status(), Code::kBadData, dir.path().string(), "not a regular file");
}

TEST(LlmcText, ReadsTinyShakespeare) {
  const std::string path = test_data::DataDir() + "/tinyshakespeare/input.txt";
  TESSEL_NEED_DATA_FILE(path);
  Result<std::vector<int32_t>> tokens = ReadTextTokens(path);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(static_cast<int64_t>(tokens->size()), static_cast<int64_t>(std::filesystem::file_size(path)));
  const std::string first = "First Citizen:";
  ASSERT_GE(tokens->size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ((*tokens)[i], first[i]) << i;
  for (int32_t t : *tokens) ASSERT_TRUE(t >= 0 && t < 256) << t;
}

// ---- token files ----------------------------------------------------------------------------------------

TEST(LlmcTokens, RoundTripIsExact) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(2 * 4096 + 5);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 65536);
  tokens[0] = 0;
  tokens[1] = 65535;
  ASSERT_TRUE(WriteLlmcTokens(path, tokens).ok());
  EXPECT_EQ(dir.List(), std::vector<std::string>{"tok.bin"});  // no temporary left behind

  // The bytes are llm.c's: header, then uint16 tokens.
  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), 1024 + 2 * tokens.size());
  int32_t head[3];
  std::memcpy(head, bytes.data(), sizeof(head));
  EXPECT_EQ(head[0], 20240520);
  EXPECT_EQ(head[1], 1);
  EXPECT_EQ(head[2], static_cast<int32_t>(tokens.size()));
  uint16_t second;
  std::memcpy(&second, bytes.data() + 1024 + 2, 2);
  EXPECT_EQ(second, 65535);

  Result<std::vector<int32_t>> back = ReadLlmcTokens(path, 65536);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, tokens);
}

TEST(LlmcTokens, ReadsAFileWrittenByHand) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240520, 1, 3}, Packed<uint16_t>({5, 0, 255})));
  Result<std::vector<int32_t>> tokens = ReadLlmcTokens(path, 256);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(*tokens, (std::vector<int32_t>{5, 0, 255}));
}

TEST(LlmcTokens, TokenOutsideTheVocabularyNamesIndexAndValue) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  std::vector<uint16_t> tokens(5000, 7);
  tokens[4500] = 256;
  tokens[4700] = 300;
  WriteText(path, LlmcFile({20240520, 1, 5000}, Packed(tokens)));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "token 4500 is 256");
  EXPECT_TRUE(ReadLlmcTokens(path, 301).ok());
}

TEST(LlmcTokens, WrongMagicIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240326, 1, 2}, Packed<uint16_t>({1, 2})));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "magic");
}

TEST(LlmcTokens, WrongVersionIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240520, 2, 2}, Packed<uint32_t>({1, 2})));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "version");
}

TEST(LlmcTokens, TruncatedPayloadIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240520, 1, 3}, Packed<uint16_t>({1, 2, 3})).substr(0, 1024 + 5));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "truncated");
}

TEST(LlmcTokens, ExtraBytesAreBadData) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240520, 1, 3}, Packed<uint16_t>({1, 2, 3, 4})));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "2 extra bytes");
}

TEST(LlmcTokens, ShortHeaderIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240520, 1, 0}, "").substr(0, 100));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "shorter than the 1024-byte header");
}

TEST(LlmcTokens, NonPositiveCountIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  WriteText(path, LlmcFile({20240520, 1, 0}, ""));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "token count");
  WriteText(path, LlmcFile({20240520, 1, -4}, ""));
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kBadData, path, "token count");
}

TEST(LlmcTokens, MissingFileIsStorageError) {
  ScratchDir dir;
  const std::string path = dir.File("absent.bin");
  ExpectError(ReadLlmcTokens(path, 256).status(), Code::kStorage, path, "cannot open");
}

TEST(LlmcTokens, WriteRefusesTokensThatDoNotFitUint16) {
  ScratchDir dir;
  const std::string path = dir.File("tok.bin");
  ExpectError(WriteLlmcTokens(path, {1, 65536}), Code::kBadData, path, "token 1 is 65536");
  ExpectError(WriteLlmcTokens(path, {-1}), Code::kBadData, path, "token 0 is -1");
  EXPECT_TRUE(dir.List().empty());
}

// ---- checkpoints ---------------------------------------------------------------------------------------

TEST(LlmcCheckpoint, TensorsFollowTrainGpt2Order) {
  const LlmcConfig c = SmallConfig();  // Vp 256, maxT 8, L 2, C 4
  const std::vector<LlmcTensor> t = LlmcTensors(c);
  const std::vector<std::string> names = {"wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
                                          "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};
  ASSERT_EQ(t.size(), names.size());
  int64_t offset = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].name, names[i]);
    EXPECT_EQ(t[i].offset, offset) << t[i].name;
    int64_t numel = 1;
    for (int64_t d : t[i].shape) numel *= d;
    EXPECT_EQ(t[i].numel, numel) << t[i].name;
    offset += numel;
  }
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{256, 4}));
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{2, 12, 4}));
  EXPECT_EQ(t[10].shape, (std::vector<int64_t>{2, 16, 4}));
  EXPECT_EQ(t[12].shape, (std::vector<int64_t>{2, 4, 16}));
  EXPECT_EQ(t[15].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(LlmcNumParameters(c), offset);
}

TEST(LlmcCheckpoint, Gpt2SmallHasLlmcsParameterCount) {
  LlmcConfig c;
  c.max_seq_len = 1024;
  c.vocab_size = 50257;
  c.padded_vocab_size = 50304;
  c.num_layers = 12;
  c.num_heads = 12;
  c.channels = 768;
  EXPECT_EQ(LlmcNumParameters(c), 124475904);  // what train_gpt2.c prints for gpt2_124M.bin
}

TEST(LlmcCheckpoint, RoundTripIsBitExact) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  LlmcCheckpoint ck;
  ck.config = SmallConfig();
  ck.params = RandomParams(LlmcNumParameters(ck.config), 3);
  ASSERT_TRUE(WriteLlmcCheckpoint(path, ck).ok());
  EXPECT_EQ(dir.List(), std::vector<std::string>{"ck.bin"});

  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes, LlmcFile(HeaderOf(ck.config), Packed(ck.params)));

  Result<LlmcCheckpoint> back = ReadLlmcCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->config, ck.config);
  ASSERT_EQ(back->params.size(), ck.params.size());
  EXPECT_EQ(std::memcmp(back->params.data(), ck.params.data(), ck.params.size() * sizeof(float)), 0);
}

TEST(LlmcCheckpoint, WriteReplacesAnExistingFile) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  LlmcCheckpoint a;
  a.config = SmallConfig();
  a.params = RandomParams(LlmcNumParameters(a.config), 1);
  LlmcCheckpoint b = a;
  b.config.num_layers = 1;
  b.params = RandomParams(LlmcNumParameters(b.config), 2);
  ASSERT_TRUE(WriteLlmcCheckpoint(path, a).ok());
  ASSERT_TRUE(WriteLlmcCheckpoint(path, b).ok());
  Result<LlmcCheckpoint> back = ReadLlmcCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->config, b.config);
  EXPECT_EQ(back->params, b.params);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"ck.bin"});
}

TEST(LlmcCheckpoint, FailedWriteLeavesNothingBehind) {
  ScratchDir dir;
  LlmcCheckpoint ck;
  ck.config = SmallConfig();
  ck.params = RandomParams(LlmcNumParameters(ck.config), 1);
  // A missing directory: the temporary cannot be created.
  const std::string nowhere = dir.File("no/such/dir/ck.bin");
  ExpectError(WriteLlmcCheckpoint(nowhere, ck), Code::kStorage, nowhere, "cannot create");
  // A directory where the file should go: the rename fails, and the temporary is removed.
  const std::string occupied = dir.File("ck.bin");
  std::filesystem::create_directory(occupied);
  ExpectError(WriteLlmcCheckpoint(occupied, ck), Code::kStorage, occupied, "rename");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"ck.bin"});
  EXPECT_TRUE(std::filesystem::is_directory(occupied));
}

TEST(LlmcCheckpoint, WriteRefusesParamsThatDoNotMatchTheConfig) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  LlmcCheckpoint ck;
  ck.config = SmallConfig();
  ck.params.assign(static_cast<size_t>(LlmcNumParameters(ck.config) - 1), 0.0f);
  ExpectError(WriteLlmcCheckpoint(path, ck), Code::kInternal, path, "parameters");
  ck.config.num_heads = 3;
  ExpectError(WriteLlmcCheckpoint(path, ck), Code::kInternal, path, "num_heads");
  EXPECT_TRUE(dir.List().empty());
}

// A valid checkpoint's bytes with the header ints replaced as given ({index, value}).
std::string CheckpointBytes(const LlmcConfig& c, std::vector<std::pair<int, int32_t>> edits = {}, int64_t params = -1) {
  std::vector<int32_t> header = HeaderOf(c);
  for (const auto& [i, v] : edits) header[static_cast<size_t>(i)] = v;
  const int64_t n = params >= 0 ? params : LlmcNumParameters(c);
  return LlmcFile(header, Packed(std::vector<float>(static_cast<size_t>(n), 0.5f)));
}

TEST(LlmcCheckpoint, WrongMagicIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  WriteText(path, CheckpointBytes(SmallConfig(), {{0, 20240520}}));
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "magic");
}

TEST(LlmcCheckpoint, WrongVersionIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  WriteText(path, CheckpointBytes(SmallConfig(), {{1, 5}}));
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "(version) is 5");
}

TEST(LlmcCheckpoint, TruncatedPayloadIsBadData) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  const std::string bytes = CheckpointBytes(SmallConfig());
  WriteText(path, bytes.substr(0, bytes.size() - 3));
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "truncated");
}

TEST(LlmcCheckpoint, ExtraBytesAreBadData) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  WriteText(path, CheckpointBytes(SmallConfig()) + "abcd");
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "4 extra bytes");
}

TEST(LlmcCheckpoint, InconsistentHeaderIsBadDataNamingTheField) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  const LlmcConfig c = SmallConfig();
  struct Case {
    std::vector<std::pair<int, int32_t>> edits;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{{2, 0}}, "max_seq_len"},
      {{{3, -1}}, "vocab_size"},
      {{{4, 0}}, "num_layers"},
      {{{5, 0}}, "num_heads"},
      {{{6, 0}}, "channels"},
      {{{7, 0}}, "padded_vocab_size"},
      {{{5, 3}}, "not a multiple of header[5] (num_heads) 3"},
      {{{7, 200}}, "padded_vocab_size) 200 is less than header[3] (vocab_size) 250"},
      {{{6, 1 << 30}, {5, 1}, {4, 1 << 30}}, "overflow"},
  };
  for (const Case& k : cases) {
    WriteText(path, CheckpointBytes(c, k.edits));
    ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, k.fragment);
  }
}

TEST(LlmcCheckpoint, SizesThatDoNotMatchTheFileAreBadData) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  // A header claiming a huge model over a small payload: refused before anything is allocated.
  WriteText(path, CheckpointBytes(SmallConfig(), {{4, 1 << 20}, {6, 1 << 12}, {5, 1}}, 100));
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "truncated");
}

TEST(LlmcCheckpoint, NonFiniteParameterNamesTheTensor) {
  ScratchDir dir;
  const std::string path = dir.File("ck.bin");
  LlmcCheckpoint ck;
  ck.config = SmallConfig();
  ck.params = RandomParams(LlmcNumParameters(ck.config), 5);
  const std::vector<LlmcTensor> tensors = LlmcTensors(ck.config);
  const LlmcTensor& fcw = tensors[10];
  ck.params[static_cast<size_t>(fcw.offset + 9)] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(WriteLlmcCheckpoint(path, ck).ok());
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "fcw[9]");
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "NaN");

  ck.params[static_cast<size_t>(fcw.offset + 9)] = 0.0f;
  ck.params.back() = -std::numeric_limits<float>::infinity();
  ASSERT_TRUE(WriteLlmcCheckpoint(path, ck).ok());
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kBadData, path, "lnfb[3] (flat index");
}

TEST(LlmcCheckpoint, MissingFileIsStorageError) {
  ScratchDir dir;
  const std::string path = dir.File("absent.bin");
  ExpectError(ReadLlmcCheckpoint(path).status(), Code::kStorage, path, "cannot open");
}

}  // namespace
}  // namespace tessel::storage
