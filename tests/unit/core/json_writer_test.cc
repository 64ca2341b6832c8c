#include "core/json_writer.h"

#include <gtest/gtest.h>

#include <limits>

namespace tessel {
namespace {

TEST(JsonWriter, CompactObjectWithNestedArrays) {
  JsonWriter w(false);
  w.BeginObject().Field("job", "a\"b").Field("workers", int64_t{2});
  w.Field("loss", std::vector<double>{1.5, 0.25});
  w.Key("rows").BeginArray().BeginObject().Field("ok", true).EndObject().EndArray();
  w.EndObject();
  EXPECT_EQ(w.str(), R"({"job":"a\"b","workers":2,"loss":[1.5,0.25],"rows":[{"ok":true}]})");
}

TEST(JsonWriter, NonFiniteBecomesNullAndControlCharsEscape) {
  JsonWriter w(false);
  w.BeginArray().Number(std::numeric_limits<double>::infinity()).String("x\ny\x01").EndArray();
  EXPECT_EQ(w.str(), "[null,\"x\\ny\\u0001\"]");
}

TEST(JsonWriter, PrettyPrintsEmptyContainersCompactly) {
  JsonWriter w(true);
  w.BeginObject().Key("a").BeginArray().EndArray().EndObject();
  EXPECT_EQ(w.str(), "{\n  \"a\": []\n}");
}

}  // namespace
}  // namespace tessel
