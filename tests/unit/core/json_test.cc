// core/json.*: what FormatJson writes, ParseJson reads back exactly (doubles to the bit, integers as
// integers, keys in order), and malformed text is an error naming the file and the place.
#include "core/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tessel {
namespace {

using ::testing::HasSubstr;

TEST(Json, ReadsBackWhatItWrites) {
  Json doc = {{"format", "tessel-checkpoint"}, {"step", int64_t{4294967295}}, {"ok", true}};
  doc["shards"] = Json::array({{{"file", "worker-0.h5"}, {"loss", 0.125}}});
  doc["none"] = nullptr;
  doc["text"] = "quote \" slash \\ tab \t line\n bell \x07";
  for (JsonLayout layout : {JsonLayout::kCompact, JsonLayout::kIndented}) {
    auto back = ParseJson(FormatJson(doc, layout), "test");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, doc);
    EXPECT_TRUE(back->at("step").is_number_integer());
    EXPECT_EQ(back->at("text").get<std::string>(), "quote \" slash \\ tab \t line\n bell \x07");
  }
}

TEST(Json, DoublesReadBackBitIdentical) {
  const std::vector<double> awkward = {0.1,
                                       1.0 / 3.0,
                                       5e-324,  // the smallest subnormal
                                       2.2250738585072014e-308,
                                       1.7976931348623157e308,
                                       -0.0,
                                       0.30000000000000004,
                                       1e23,
                                       -123456.78901234567,
                                       1.0,
                                       std::nextafter(1.0, 2.0)};
  Json doc = {{"step_loss", awkward}};
  for (JsonLayout layout : {JsonLayout::kCompact, JsonLayout::kIndented}) {
    auto back = ParseJson(FormatJson(doc, layout), "summary.json");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    const std::vector<double> read = back->at("step_loss").get<std::vector<double>>();
    ASSERT_EQ(read.size(), awkward.size());
    for (size_t i = 0; i < awkward.size(); ++i) {
      EXPECT_TRUE(back->at("step_loss")[i].is_number_float()) << awkward[i] << " came back as an integer";
      EXPECT_EQ(std::memcmp(&read[i], &awkward[i], sizeof(double)), 0)
          << "wrote " << awkward[i] << " as " << back->at("step_loss")[i].dump() << ", read " << read[i];
    }
  }
}

TEST(Json, IntegersStayIntegers) {
  const Json doc = {{"max", std::numeric_limits<int64_t>::max()},
                    {"min", std::numeric_limits<int64_t>::min()},
                    {"past_2_53", int64_t{9007199254740993}},
                    {"crc32", uint32_t{4294967295u}}};
  const std::string text = FormatJson(doc, JsonLayout::kCompact);
  EXPECT_EQ(text, R"({"max":9223372036854775807,"min":-9223372036854775808,"past_2_53":9007199254740993,)"
                  R"("crc32":4294967295})");
  auto back = ParseJson(text, "t");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->at("max").get<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(back->at("min").get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(back->at("past_2_53").get<int64_t>(), 9007199254740993);
  EXPECT_TRUE(back->at("crc32").is_number_integer());
}

TEST(Json, CompactObjectKeepsInsertionOrder) {
  Json doc = {{"job", "a\"b"}, {"workers", 2}};
  doc["loss"] = {1.5, 0.25};
  doc["rows"] = Json::array({{{"ok", true}}});
  doc["a_last"] = 0;
  EXPECT_EQ(FormatJson(doc, JsonLayout::kCompact),
            R"({"job":"a\"b","workers":2,"loss":[1.5,0.25],"rows":[{"ok":true}],"a_last":0})");
  auto back = ParseJson(R"({"z": 1, "a": 2, "m": 3})", "t");
  ASSERT_TRUE(back.ok());
  std::vector<std::string> keys;
  for (const auto& [key, value] : back->items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
}

TEST(Json, NonFiniteBecomesNullAndControlCharsEscape) {
  const Json doc = {std::numeric_limits<double>::infinity(), std::nan(""), "x\ny\x01"};
  EXPECT_EQ(FormatJson(doc, JsonLayout::kCompact), "[null,null,\"x\\ny\\u0001\"]");
}

TEST(Json, InvalidUtf8IsReplacedNotThrown) {
  const Json doc = {{"error", "cannot open /data/\xff\xfe.tsv"}};
  EXPECT_EQ(FormatJson(doc, JsonLayout::kCompact), "{\"error\":\"cannot open /data/\xEF\xBF\xBD\xEF\xBF\xBD.tsv\"}");
}

TEST(Json, IndentedPrintsEmptyContainersCompactly) {
  const Json doc = {{"a", Json::array()}, {"b", {{"c", 1}}}};
  EXPECT_EQ(FormatJson(doc, JsonLayout::kIndented), "{\n  \"a\": [],\n  \"b\": {\n    \"c\": 1\n  }\n}");
}

TEST(Json, UnicodeEscapesBecomeUtf8) {
  auto doc = ParseJson(R"(["\u0041\u00e9\u20ac\ud83d\ude00", -1.5e3, []])", "t");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)[0].get<std::string>(), "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ((*doc)[1].get<double>(), -1500.0);
  EXPECT_TRUE((*doc)[2].empty());
}

TEST(Json, MalformedTextNamesTheFileAndThePlace) {
  for (const char* bad :
       {"", "{", "{\"a\" 1}", "[1,]", "{\"a\": tru}", "\"open", "[1] 2", "{\"a\":1,}", "01x", "[\"\xff\"]"}) {
    auto doc = ParseJson(bad, "manifest.json");
    ASSERT_FALSE(doc.ok()) << bad;
    EXPECT_EQ(doc.status().code(), Code::kBadData);
    EXPECT_THAT(doc.status().message(), HasSubstr("manifest.json: invalid JSON at byte ")) << bad;
    EXPECT_THAT(doc.status().message(), HasSubstr(", column ")) << bad;
    EXPECT_THAT(doc.status().message(), ::testing::Not(HasSubstr("json.exception"))) << bad;
  }
  // The byte counts from 0, the line and column from 1: the lexer gives up at the newline after "tru".
  auto doc = ParseJson("{\n  \"step\": 3,\n  \"ok\": tru\n}", "m.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.status().message(), HasSubstr("m.json: invalid JSON at byte 26 (line 3, column 12): "));
  EXPECT_THAT(doc.status().message(), HasSubstr("invalid literal"));
  EXPECT_THAT(ParseJson("", "e.json").status().message(),
              HasSubstr("e.json: invalid JSON at byte 0 (line 1, column 1): "));
  // A number beyond a double's range is refused (it would read back as infinity), naming the token.
  auto huge = ParseJson("{\"a\": 1e999}", "h.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::kBadData);
  EXPECT_EQ(huge.status().message(), "h.json: invalid JSON: number overflow parsing '1e999'");
}

TEST(Json, DeepNestingNeitherRecursesNorCrashes) {
  const size_t depth = 200000;
  auto doc = ParseJson(std::string(depth, '[') + std::string(depth, ']'), "deep");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto open = ParseJson(std::string(depth, '['), "open");
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(open.status().message(), HasSubstr("open: invalid JSON at byte 200000"));
}

}  // namespace
}  // namespace tessel
