// Each setting is declared once (DESIGN.md "Executors"): a worker-side settings struct carries no default
// of its own, and a payload's decoder checks only what bytes can get wrong, never a rule of the job that
// jobs/validate.cc owns. Both are checked here for every payload and settings struct a worker receives;
// tests/unit/check_settings.cmake also refuses a member with an initialiser in their headers (a member
// outside the field list, which these checks could not see).
//
// How this catches the drift it was written for (llm_settings.h once had lr = 3e-4 and beta2 = 0.95
// where the job's defaults are 0.01 and 0.999): LlmStageAssignment{}'s train.lr would read 0.0003, and
// ZeroByDefault fails naming "train.lr"; a decoder that refused seq_len > context would refuse the
// hostile payload of DecodersCheckOnlyBytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/fields.h"
#include "workers/assignment.h"
#include "workers/llm/llm_settings.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {
namespace {

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// Every leaf field of a default-constructed T is its type's zero ("", empty, the enum's first value).
template <Fielded T>
void ExpectZeroByDefault(const char* name) {
  T value{};
  ForEachLeafField(value, [&](const std::string& path, auto& f) {
    using F = std::remove_cvref_t<decltype(f)>;
    EXPECT_TRUE(f == F{}) << name << ": " << path << " has a default of its own (" << DescribeFields(value)
                          << "); a worker-side value comes from the validated job or is derived in one named "
                             "function";
  });
}

// Values of each field's type that a job could never hold, different for every field, in two passes: in
// pass 0 the numbers are negative and grow with the field's position, in pass 1 they are large, odd and
// shrink. A decoder that repeats a rule of the job fails one of them: a range (`layers >= 1`) in pass 0,
// an order between two fields (`seq_len <= context`) in one pass or the other, a divisibility
// (`width % heads == 0`) in pass 1.
template <typename F>
void MakeHostile(F& f, int pass, int& k) {
  ++k;
  if constexpr (Choice<F>) {
    f = static_cast<F>((pass == 0 ? k : ChoiceCount<F>() - 1 - k % ChoiceCount<F>()) % ChoiceCount<F>());
  } else if constexpr (std::is_same_v<F, bool>) {
    f = pass == 0;
  } else if constexpr (std::is_floating_point_v<F>) {
    f = pass == 0 ? -2.5 - k : 1e9 - k;
  } else if constexpr (std::is_integral_v<F> && std::is_signed_v<F>) {
    f = static_cast<F>(pass == 0 ? -1000 + 7 * k : 30001 - 2 * k);
  } else if constexpr (std::is_integral_v<F>) {
    f = static_cast<F>(pass == 0 ? 0xFFFFFFFFFFull - k : 30001 - 2 * k);
  } else if constexpr (std::is_same_v<F, std::string>) {
    f = pass == 0 ? "not/a path" : "";
  } else if constexpr (IsVector<F>::value) {
    f.resize(pass == 0 ? 3 : 1);
    for (auto& e : f) MakeHostile(e, pass, k);
  }
}

template <Fielded T>
void Fill(T& value, int pass) {
  int k = 0;
  ForEachLeafField(value, [&](const std::string&, auto& f) { MakeHostile(f, pass, k); });
}

TEST(PayloadFields, WorkerSideStructsHaveNoDefaultsOfTheirOwn) {
  ExpectZeroByDefault<WorkerSettings>("WorkerSettings");
  ExpectZeroByDefault<RgnnSettings>("RgnnSettings");
  ExpectZeroByDefault<SamplingSettings>("SamplingSettings");
  ExpectZeroByDefault<RgnnSampledAssignment>("RgnnSampledAssignment");
  ExpectZeroByDefault<PartFile>("PartFile");
  ExpectZeroByDefault<GptConfig>("GptConfig");
  ExpectZeroByDefault<LlmTrainSettings>("LlmTrainSettings");
  ExpectZeroByDefault<LlmDataSettings>("LlmDataSettings");
  ExpectZeroByDefault<StagePlacement>("StagePlacement");
  ExpectZeroByDefault<LlmSpillSettings>("LlmSpillSettings");
  ExpectZeroByDefault<LlmStageAssignment>("LlmStageAssignment");
}

std::vector<uint8_t> Bytes(const AssignmentPayload& p) {
  ByteWriter out;
  p.Encode(out);
  return out.Take();
}

TEST(PayloadFields, DecodersCheckOnlyBytes) {
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(StrCat("pass ", pass));
    {
      LlmStageAssignment a;
      Fill(a, pass);
      const std::vector<uint8_t> bytes = Bytes(a);
      ByteReader in(bytes.data(), bytes.size());
      auto back = DecodeLlmAssignment(in);
      ASSERT_NE(back, nullptr) << "llm.stage refused values only the job's rules forbid: " << in.error();
      EXPECT_TRUE(FieldsEqual(dynamic_cast<LlmStageAssignment&>(*back), a)) << back->DescribeSettings();
      EXPECT_TRUE(in.done());
    }
    {
      RgnnSettings s;
      Fill(s, pass);
      storage::WorkerPartition empty;  // a valid partition of an empty graph: the bytes under test are the settings'
      empty.offsets = {0, 0};
      empty.type_offsets = {0, 0};
      empty.rel_ptr = {0};
      RgnnAssignment a(s, empty);
      const std::vector<uint8_t> bytes = Bytes(a);
      ByteReader in(bytes.data(), bytes.size());
      auto back = DecodeRgnnAssignment(in);
      ASSERT_NE(back, nullptr) << "rgnn.full refused values only the job's rules forbid: " << in.error();
      EXPECT_EQ(dynamic_cast<RgnnAssignment&>(*back).settings, s);
    }
    {
      RgnnSettings s;
      Fill(s, pass);
      PartFile source;
      Fill(source, pass);
      if (source.file.empty()) source.file = "parts/part-0.h5";  // an empty file means "sent inline"
      RgnnAssignment a(s, source);
      const std::vector<uint8_t> bytes = Bytes(a);
      ByteReader in(bytes.data(), bytes.size());
      auto back = DecodeRgnnAssignment(in);
      ASSERT_NE(back, nullptr) << "rgnn.full with a part file refused: " << in.error();
      const auto& b = dynamic_cast<RgnnAssignment&>(*back);
      EXPECT_EQ(b.settings, s);
      EXPECT_EQ(b.source, source);
      EXPECT_TRUE(in.done());
      EXPECT_NE(b.SizedBy().find(source.file), std::string::npos) << b.SizedBy();
    }
    {
      RgnnSampledAssignment a;
      Fill(a, pass);
      a.graph = std::make_shared<const SampledGraph>();
      a.owned_features = {1.5f, -2};
      const std::vector<uint8_t> bytes = Bytes(a);
      ByteReader in(bytes.data(), bytes.size());
      auto back = DecodeRgnnSampledAssignment(in);
      ASSERT_NE(back, nullptr) << "rgnn.sampled refused values only the job's rules forbid: " << in.error();
      auto& b = dynamic_cast<RgnnSampledAssignment&>(*back);
      EXPECT_TRUE(FieldsEqual(b, a)) << b.DescribeSettings();
      EXPECT_EQ(b.owned_features, a.owned_features);
    }
    {
      WorkerSettings s;
      Fill(s, pass);
      ByteWriter out;
      EncodeSettings(s, out);
      const std::vector<uint8_t> bytes = out.Take();
      ByteReader in(bytes.data(), bytes.size());
      EXPECT_EQ(DecodeSettings(in), s);
      EXPECT_TRUE(in.ok()) << "the worker settings refused values only the job's rules forbid: " << in.error();
    }
  }
}

TEST(PayloadFields, DecodersRefuseWhatBytesGetWrongNamingTheField) {
  LlmStageAssignment a;
  a.block_policies = {SpillPolicy::kKeep};
  std::vector<uint8_t> bytes = Bytes(a);
  // Truncated anywhere: refused, never read past the end.
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    ByteReader in(bytes.data(), cut);
    EXPECT_EQ(DecodeLlmAssignment(in), nullptr) << "cut at " << cut;
    EXPECT_FALSE(in.ok());
  }
  // An enum out of its range: where the bytes of one policy differ from another's is the policy.
  a.block_policies = {SpillPolicy::kPlan};
  bytes = Bytes(a);
  LlmStageAssignment other = a;
  other.block_policies = {SpillPolicy::kKeep};
  const std::vector<uint8_t> other_bytes = Bytes(other);
  ASSERT_EQ(bytes.size(), other_bytes.size());
  size_t at = 0;
  while (at < bytes.size() && bytes[at] == other_bytes[at]) ++at;
  ASSERT_LT(at, bytes.size());
  const int32_t bad = ChoiceCount<SpillPolicy>();
  std::memcpy(bytes.data() + at, &bad, sizeof bad);
  ByteReader in(bytes.data(), bytes.size());
  EXPECT_EQ(DecodeLlmAssignment(in), nullptr);
  EXPECT_NE(in.error().find("block_policies[0] = 5 is not one of its 5 values"), std::string::npos) << in.error();
}

TEST(PayloadFields, DescriptionsNameEveryField) {
  LlmStageAssignment a;
  a.train.lr = 0.25;
  a.data.format = DataFormat::kLlmc;
  a.block_policies = {SpillPolicy::kOffload, SpillPolicy::kKeep};
  const std::string text = a.DescribeSettings();
  for (const char* want : {"model.layers=0", "train.lr=0.25", "data.format=llmc", "place.stage=0", "init_from=\"\"",
                           "block_policies=[offload,keep]", "spill.checksum=false"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " in: " << text;
  }
}

// A worker reads only the part the plan named: of the graph partition.json names, part K of N.
TEST(PartFile, ReadsOnlyThePartThePlanNamed) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / StrCat("tessel-part-file-test-", ::getpid());
  std::filesystem::create_directories(dir);
  storage::WorkerPartition p;
  p.part = 1;
  p.num_parts = 2;
  p.offsets = {0, 0, 0};
  p.type_offsets = {0, 0};
  p.rel_ptr = {0};
  p.graph_hash = "00000000000000aa";
  const std::string file = (dir / "part-1.h5").string();
  ASSERT_TRUE(storage::WritePartitionFile(p, file).ok());
  EXPECT_TRUE(ReadPartFile({file, "00000000000000aa", 1, 2}).ok());
  const auto error = [](const PartFile& ref) {
    Result<storage::WorkerPartition> r = ReadPartFile(ref);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kBadData);
    return r.status().message();
  };
  EXPECT_THAT(error({file, "00000000000000bb", 1, 2}),
              ::testing::HasSubstr(file + ": cut from the graph with hash 00000000000000aa, but the partition.json "
                                          "beside it names 00000000000000bb"));
  EXPECT_THAT(error({file, "00000000000000aa", 0, 2}),
              ::testing::HasSubstr("holds part 1 of 2, but the plan needs part 0 of 2"));
  EXPECT_THAT(error({file, "00000000000000aa", 1, 3}), ::testing::HasSubstr("but the plan needs part 1 of 3"));
  EXPECT_THAT(error({(dir / "part-9.h5").string(), "00000000000000aa", 9, 10}),
              ::testing::HasSubstr("part-9.h5: cannot open partition file"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::workers
