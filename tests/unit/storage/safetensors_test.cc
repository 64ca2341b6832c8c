// safetensors (storage/safetensors.h) and Hugging Face's GPT-2 layout over it (storage/hf_gpt2.h): round
// trips, the dtypes read, and every malformed header or config refused with the file and the cause.
// transformers' own files are tests/integration/hf_gpt2.sh's.
#include "storage/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "storage/hf_gpt2.h"
#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteText;

// A safetensors file from its header's JSON and its data bytes.
std::string File(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

void ExpectBad(const std::string& path, const std::string& bytes, const std::string& fragment) {
  WriteText(path, bytes);
  Result<SafetensorsFile> f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok()) << fragment;
  EXPECT_EQ(f.status().code(), Code::kBadData) << f.status().ToString();
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
}

TEST(Safetensors, WritesAndReadsBackWithMetadata) {
  ScratchDir dir;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f};
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"a", {2, 3}, a.data()}, {"b", {1}, b.data()}}, {{"format", "pt"}}).ok());
  EXPECT_EQ((ReadBytes(path).size() - 8 - 24 - 4) % 8, 0u) << "the data starts 8-byte aligned";
  Result<SafetensorsFile> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->entries().size(), 2u);
  const SafetensorsEntry* e = f->Find("a");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e->dtype, "F32");
  std::vector<float> got(6);
  ASSERT_TRUE(f->ReadFloats(*e, got.data()).ok());
  EXPECT_EQ(got, a);
  EXPECT_EQ(f->Find("c"), nullptr);
}

TEST(Safetensors, HalfAndBfloat16AreWidened) {
  ScratchDir dir;
  // F16: 1.0 (0x3c00), -2.0 (0xc000), the smallest subnormal (0x0001, 2^-24), 65504 (0x7bff).
  const std::vector<uint16_t> half = {0x3c00, 0xc000, 0x0001, 0x7bff};
  // BF16: 1.0 (0x3f80), -0.15625 (0xbe20).
  const std::vector<uint16_t> bf = {0x3f80, 0xbe20};
  std::string data(reinterpret_cast<const char*>(half.data()), 8);
  data += std::string(reinterpret_cast<const char*>(bf.data()), 4);
  const std::string path = dir.File("h.safetensors");
  WriteText(path, File(R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})",
                       data));
  Result<SafetensorsFile> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<float> h(4), b(2);
  ASSERT_TRUE(f->ReadFloats(*f->Find("h"), h.data()).ok());
  ASSERT_TRUE(f->ReadFloats(*f->Find("b"), b.data()).ok());
  EXPECT_EQ(h, (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f}));
  EXPECT_EQ(b, (std::vector<float>{1.0f, -0.15625f}));
}

TEST(Safetensors, EveryMalformedFileNamesItselfAndTheCause) {
  ScratchDir dir;
  const std::string p = dir.File("bad.safetensors");
  const std::string four = Floats({1, 2, 3, 4});
  const std::string ok = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  ExpectBad(p, "abc", "too short for a safetensors file");
  ExpectBad(p, File(ok, four).substr(0, 30), "the header length is 55 bytes, but the file has 22");
  ExpectBad(p, File("{nope", four), "invalid JSON");
  ExpectBad(p, File("[1, 2]", four), "the header is not a JSON object");
  ExpectBad(p, File(R"({"w":{"shape":[4],"data_offsets":[0,16]}})", four), "tensor 'w': no \"dtype\" string");
  ExpectBad(p, File(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", four), "not a size");
  ExpectBad(p, File(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", four), "is not [begin, end]");
  ExpectBad(p, File(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}})", four),
            "data_offsets [0, 32] are not within the 16 bytes of data (truncated?)");
  ExpectBad(p, File(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", four),
            "16 bytes for 3 values of F32 (12 bytes)");
  ExpectBad(p,
            File(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 four),
            "begins at data byte 4, expected 8 (it overlaps the tensor before it)");
  ExpectBad(p, File(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four), "(a gap before it)");
  ExpectBad(p, File(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four),
            "the tensors end at data byte 8 but the file holds 16");
  ExpectBad(p, File(R"({"__metadata__":{"format":1}})", ""), "__metadata__.format is not a string");
  // Read, not opened: a dtype Tessel does not convert, and a value that is not finite.
  WriteText(p, File(R"({"w":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})", four));
  Result<SafetensorsFile> f = SafetensorsFile::Open(p);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<float> out(4);
  EXPECT_NE(f->ReadFloats(*f->Find("w"), out.data()).message().find("is I32; Tessel reads F32, F16 and BF16"),
            std::string::npos);
  WriteText(p, File(ok, Floats({1, std::numeric_limits<float>::quiet_NaN(), 3, 4})));
  Result<SafetensorsFile> g = SafetensorsFile::Open(p);
  ASSERT_TRUE(g.ok());
  const Status st = g->ReadFloats(*g->Find("w"), out.data());
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_NE(st.message().find("tensor 'w'[1] is NaN"), std::string::npos) << st.message();
}

// ---- Hugging Face's GPT-2 ------------------------------------------------------------------------

LlmcCheckpoint Random(int32_t vocab) {
  LlmcCheckpoint ck;
  ck.config = {16, vocab, (vocab + 127) / 128 * 128, 2, 2, 8};
  ck.params.resize(static_cast<size_t>(LlmcNumParameters(ck.config)));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  for (float& v : ck.params) v = normal(rng);
  for (const LlmcTensor& t : LlmcTensors(ck.config)) {  // llm.c's padded rows of wte are zero
    if (t.name == "wte") {
      std::fill(ck.params.begin() + t.offset + int64_t{vocab} * 8, ck.params.begin() + t.offset + t.numel, 0.0f);
    }
  }
  return ck;
}

TEST(HfGpt2, RoundTripsThroughTheHuggingFaceLayout) {
  for (const int32_t vocab : {256, 300}) {
    ScratchDir dir;
    const LlmcCheckpoint ck = Random(vocab);
    ASSERT_TRUE(WriteHfGpt2(dir.path().string(), ck).ok());
    Result<LlmcCheckpoint> back = ReadGpt2Weights(dir.path().string());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->config, ck.config);
    EXPECT_EQ(back->params, ck.params) << "vocab " << vocab;
    // A Conv1D weight is stored [in, out]: c_attn of block 0 is qkvw [3C, C] transposed.
    Result<SafetensorsFile> f = SafetensorsFile::Open((dir.path() / kHfWeightsName).string());
    ASSERT_TRUE(f.ok());
    const SafetensorsEntry* e = f->Find("transformer.h.0.attn.c_attn.weight");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->shape, (std::vector<int64_t>{8, 24}));
    std::vector<float> w(8 * 24);
    ASSERT_TRUE(f->ReadFloats(*e, w.data()).ok());
    int64_t qkvw = 0;
    for (const LlmcTensor& t : LlmcTensors(ck.config)) qkvw = t.name == "qkvw" ? t.offset : qkvw;
    EXPECT_EQ(w[1 * 24 + 5], ck.params[static_cast<size_t>(qkvw + 5 * 8 + 1)]);  // [in 1, out 5] = qkvw[5][1]
    EXPECT_EQ(f->Find("transformer.wte.weight")->shape, (std::vector<int64_t>{vocab, 8}));
    EXPECT_EQ(f->Find("lm_head.weight"), nullptr) << "tied: not written";
  }
}

TEST(HfGpt2, AConfigOfAnotherModelIsRefusedNamingTheKey) {
  ScratchDir dir;
  ASSERT_TRUE(WriteHfGpt2(dir.path().string(), Random(256)).ok());
  const std::string config = (dir.path() / kHfConfigName).string();
  const std::string good = ReadBytes(config);
  const auto refused = [&](const std::string& from, const std::string& to, const std::string& fragment) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    WriteText(config, text);
    const Status st = ReadHfGpt2(dir.path().string()).status();
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    EXPECT_NE(st.message().find(config + ": " + fragment), std::string::npos) << st.message();
  };
  refused("\"model_type\": \"gpt2\"", "\"model_type\": \"llama\"", "model_type: \"llama\"; Tessel reads a GPT-2");
  refused("\"activation_function\": \"gelu_new\"", "\"activation_function\": \"relu\"",
          "activation_function: \"relu\"; Tessel's GPT-2 has GPT-2's tanh GELU");
  refused("\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": 1e-06", "layer_norm_epsilon: 1e-06");
  refused("\"n_inner\": null", "\"n_inner\": 7", "n_inner: 7; Tessel's MLP is 4 x n_embd wide (32)");
  refused("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false", "tie_word_embeddings: false");
  refused("\"n_head\": 2", "\"n_head\": 3", "");  // 8 channels do not split into 3 heads
  refused("\"n_embd\": 8", "\"n_embd\": -8", "n_embd: -8 is not a positive size");
  WriteText(config, good);
  EXPECT_TRUE(ReadHfGpt2(dir.path().string()).ok());
}

}  // namespace
}  // namespace tessel::storage
