// The JSON reader (core/json_reader.*): what Tessel writes with JsonWriter reads back, and malformed text
// is an error naming the place.
#include "core/json_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json_writer.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

TEST(JsonReader, ReadsBackWhatJsonWriterWrites) {
  JsonWriter w;
  w.BeginObject().Field("format", "tessel-checkpoint").Field("step", int64_t{4294967295}).Field("ok", true);
  w.Key("shards").BeginArray();
  w.BeginObject().Field("file", "worker-0.h5").Field("loss", 0.125).EndObject();
  w.EndArray().Key("none").Null().Field("text", "quote \" slash \\ tab \t line\n").EndObject();
  auto doc = ParseJson(w.str(), "test");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  ASSERT_TRUE(doc->is_object());
  EXPECT_EQ(doc->Find("format")->string(), "tessel-checkpoint");
  EXPECT_EQ(doc->Find("step")->number(), 4294967295.0);
  EXPECT_TRUE(doc->Find("ok")->boolean());
  ASSERT_TRUE(doc->Find("shards")->is_array());
  ASSERT_EQ(doc->Find("shards")->items().size(), 1u);
  EXPECT_EQ(doc->Find("shards")->items()[0].Find("loss")->number(), 0.125);
  EXPECT_EQ(doc->Find("none")->kind(), JsonValue::Kind::kNull);
  EXPECT_EQ(doc->Find("text")->string(), "quote \" slash \\ tab \t line\n");
  EXPECT_EQ(doc->Find("absent"), nullptr);
}

TEST(JsonReader, UnicodeEscapesBecomeUtf8) {
  auto doc = ParseJson(R"(["\u0041\u00e9\u20ac", -1.5e3, []])", "t");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->items()[0].string(), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(doc->items()[1].number(), -1500.0);
  EXPECT_TRUE(doc->items()[2].items().empty());
}

TEST(JsonReader, MalformedTextNamesTheFileAndTheOffset) {
  for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "{\"a\": tru}", "\"open", "[1] 2", "{\"a\":1,}", "01x"}) {
    auto doc = ParseJson(bad, "manifest.json");
    ASSERT_FALSE(doc.ok()) << bad;
    EXPECT_EQ(doc.status().code(), Code::kBadData);
    EXPECT_THAT(doc.status().message(), HasSubstr("manifest.json: invalid JSON at byte")) << bad;
  }
  std::string deep(100, '[');
  EXPECT_THAT(ParseJson(deep, "d").status().message(), HasSubstr("nested too deeply"));
}

}  // namespace
}  // namespace tessel
