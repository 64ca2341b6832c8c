// Record: named values that cross ranks (encode/decode) and land in summary.json (JSON).
#include "core/record.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace tessel {
namespace {

Record Sample() {
  Record inner;
  Set(inner, "edge_cut", int64_t{12});
  Record r;
  Set(r, "loss", std::vector<double>{1.0, 0.5});
  Set(r, "accuracy", 0.75);
  Set(r, "correct", int64_t{3});
  Set(r, "name", "aifb");
  Set(r, "ok", true);
  Set(r, "partition", inner);
  Set(r, "val_loss", NumberRows{{{10, 2.5}, {20, 2.25}}});
  return r;
}

TEST(Record, SetReplacesInPlaceAndMergeAppends) {
  Record r = Sample();
  Set(r, "accuracy", 0.8);
  EXPECT_EQ(r[1].name, "accuracy");
  EXPECT_EQ(FindNumber(r, "accuracy"), 0.8);
  Record more;
  Set(more, "extra", int64_t{1});
  Set(more, "correct", int64_t{4});
  Merge(r, more);
  EXPECT_EQ(r.size(), 8u);
  EXPECT_EQ(FindNumber(r, "correct"), 4);
  EXPECT_EQ(FindNumber(r, "name"), std::nullopt) << "not a number";
  EXPECT_EQ(Find(r, "missing"), nullptr);
}

TEST(Record, RoundTripsThroughBytes) {
  ByteWriter w;
  EncodeRecord(Sample(), w);
  const std::vector<uint8_t> bytes = w.Take();
  ByteReader in(bytes.data(), bytes.size());
  const Record r = DecodeRecord(in);
  ASSERT_TRUE(in.ok()) << in.error();
  EXPECT_TRUE(in.done());
  EXPECT_EQ(RecordJson(Sample()), RecordJson(r));
  for (size_t n = 0; n < bytes.size(); ++n) {
    ByteReader cut(bytes.data(), n);
    (void)DecodeRecord(cut);
    EXPECT_FALSE(cut.ok()) << "a prefix of " << n << " bytes decoded";
  }
}

// Found by tests/fuzz/protocol_fuzz (corpus/protocol/regression-record-bool): a bool byte other than 0
// or 1 was read as true, so a corrupt message passed as another value.
TEST(Record, RefusesABoolByteOtherThanZeroOrOne) {
  const std::vector<uint8_t> bytes = {
      1,   0,   0,   0,   0,   0,   0,   0,                  // one field
      9,   0,   0,   0,   0,   0,   0,   0,                  // its name's length
      'c', 'o', 'n', 'v', 'e', 'r', 'g', 'e', 'd', 3, 0x25,  // "converged", kind bool, 0x25
  };
  ByteReader in(bytes.data(), bytes.size());
  (void)DecodeRecord(in);
  EXPECT_FALSE(in.ok());
  EXPECT_EQ(in.error(), "record field 'converged': bool = 37 is not a boolean");
  for (uint8_t b : {0, 1}) {
    std::vector<uint8_t> good = bytes;
    good.back() = b;
    ByteReader ok(good.data(), good.size());
    const Record r = DecodeRecord(ok);
    ASSERT_TRUE(ok.ok()) << ok.error();
    EXPECT_EQ(std::get<bool>(Find(r, "converged")->data), b == 1);
  }
}

TEST(Record, WritesJsonInOrder) {
  // Doubles stay doubles ("1.0", "10.0") and int64 fields stay integers ("3", "12").
  EXPECT_EQ(FormatJson(RecordJson(Sample()), JsonLayout::kCompact),
            "{\"loss\":[1.0,0.5],\"accuracy\":0.75,\"correct\":3,\"name\":\"aifb\",\"ok\":true,"
            "\"partition\":{\"edge_cut\":12},\"val_loss\":[[10.0,2.5],[20.0,2.25]]}");
  EXPECT_EQ(FormatScalars(Sample()), "accuracy 0.7500, correct 3, name aifb");
}

// Issue 32 row 12: a learning rate of 1e308 was printed with 309 digits, one of 3e-5 as 0.0000.
TEST(Record, FormatsExtremeScalarsShort) {
  Record r;
  Set(r, "lr", 1e308);
  Set(r, "small", 3e-5);
  Set(r, "loss", 5.5452);
  EXPECT_EQ(FormatScalars(r), "lr 1e+308, small 3e-05, loss 5.5452");
}

}  // namespace
}  // namespace tessel
