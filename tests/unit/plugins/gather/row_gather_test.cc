// The CPU row gather of libtessel_gather.so (plugins/gather/row_gather.cc) on its own: both store kinds
// against a reference loop, whatever the widths, offsets and ranges, and the choice between them.
#include "row_gather.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace tessel::kernels::gather {
namespace {

// A 64-byte aligned byte buffer.
struct Bytes {
  std::vector<char> storage;
  char* data;
  explicit Bytes(size_t n) : storage(n + 64) {
    data = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  }
};

std::vector<int64_t> RandomIds(int64_t m, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(m));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  return ids;
}

void ExpectGathered(const char* table, int64_t row_bytes, const std::vector<int64_t>& ids, int64_t begin, int64_t end,
                    const char* out, const std::string& what) {
  for (int64_t i = begin; i < end; ++i) {
    ASSERT_EQ(std::memcmp(out + i * row_bytes, table + ids[i] * row_bytes, static_cast<size_t>(row_bytes)), 0)
        << what << ": row " << i << " (id " << ids[i] << ")";
  }
}

TEST(RowGather, EveryStoreKindCopiesTheRowsOfARange) {
  const int64_t n = 300, m = 500;
  for (int64_t row_bytes : {4, 12, 64, 132, 192, 512, 2048}) {
    for (Stores stores : {Stores::kRegular, Stores::kStreaming}) {
      if (stores == Stores::kStreaming && row_bytes % 64 != 0) continue;
      SCOPED_TRACE("row_bytes " + std::to_string(row_bytes) +
                   (stores == Stores::kStreaming ? ", streaming" : ", regular"));
      Bytes table(static_cast<size_t>(n * row_bytes)), out(static_cast<size_t>(m * row_bytes));
      for (int64_t i = 0; i < n * row_bytes; ++i) table.data[i] = static_cast<char>(i * 7 + i / 251);
      std::memset(out.data, 0x5a, static_cast<size_t>(m * row_bytes));
      const std::vector<int64_t> ids = RandomIds(m, n, static_cast<uint64_t>(row_bytes));
      // A range that starts and ends inside the output: the rows outside it stay as they were.
      GatherRows(table.data, row_bytes, ids.data(), 3, m - 5, out.data, stores);
      ExpectGathered(table.data, row_bytes, ids, 3, m - 5, out.data, "gathered");
      for (int64_t i : {int64_t{0}, int64_t{2}, m - 5, m - 1}) {
        EXPECT_EQ(out.data[i * row_bytes], 0x5a) << "row " << i << " is outside the range";
      }
    }
  }
}

TEST(RowGather, RangesShorterThanThePrefetchDistance) {
  const int64_t n = 50, row_bytes = 256;
  Bytes table(static_cast<size_t>(n * row_bytes)), out(static_cast<size_t>(n * row_bytes));
  for (int64_t i = 0; i < n * row_bytes; ++i) table.data[i] = static_cast<char>(i % 253);
  const std::vector<int64_t> ids = RandomIds(n, n, 9);
  ASSERT_GT(PrefetchDistance(row_bytes), 2);
  for (Stores stores : {Stores::kRegular, Stores::kStreaming}) {
    GatherRows(table.data, row_bytes, ids.data(), 10, 11, out.data, stores);
    GatherRows(table.data, row_bytes, ids.data(), 11, 13, out.data, stores);
    GatherRows(table.data, row_bytes, ids.data(), 13, 13, out.data, stores);  // empty
    ExpectGathered(table.data, row_bytes, ids, 10, 13, out.data, "short ranges");
  }
}

TEST(RowGather, StreamsOnlyLargeOutputsOfWholeAlignedLines) {
  Bytes out(128);
  const int64_t large = kStreamingMinBytes / 512;
  const bool can_stream = std::string(StreamingIsa()) != "none";
  EXPECT_EQ(ChooseStores(out.data, 512, large), can_stream ? Stores::kStreaming : Stores::kRegular);
  EXPECT_EQ(ChooseStores(out.data, 512, large - 1), Stores::kRegular) << "too small: leave it in cache";
  EXPECT_EQ(ChooseStores(out.data, 132, large * 4), Stores::kRegular) << "rows are not whole lines";
  EXPECT_EQ(ChooseStores(out.data + 4, 512, large), Stores::kRegular) << "the output is not line-aligned";
  EXPECT_EQ(ChooseStores(out.data, 0, large), Stores::kRegular);
}

TEST(RowGather, PrefetchesAboutFourKibAhead) {
  EXPECT_EQ(PrefetchDistance(128), 32);
  EXPECT_EQ(PrefetchDistance(512), 8);
  EXPECT_EQ(PrefetchDistance(2048), 4);
  EXPECT_EQ(PrefetchDistance(4), 32);
  EXPECT_EQ(PrefetchDistance(1 << 20), 4);
}

TEST(RowGather, IdsInRangeCatchesNegativeAndTooLargeIds) {
  const std::vector<int64_t> ids = {0, 4, 2, -1, 5, INT64_MIN, INT64_MAX, 3};
  EXPECT_TRUE(IdsInRange(ids.data(), 0, 3, 5));
  EXPECT_FALSE(IdsInRange(ids.data(), 0, 4, 5));  // -1
  EXPECT_FALSE(IdsInRange(ids.data(), 4, 5, 5));  // == n
  EXPECT_FALSE(IdsInRange(ids.data(), 5, 6, 5));
  EXPECT_FALSE(IdsInRange(ids.data(), 6, 7, 5));
  EXPECT_TRUE(IdsInRange(ids.data(), 7, 8, 5));
  EXPECT_TRUE(IdsInRange(ids.data(), 3, 3, 5)) << "an empty range";
  EXPECT_FALSE(IdsInRange(ids.data(), 0, 1, 0)) << "nothing is in range of an empty table";
}

}  // namespace
}  // namespace tessel::kernels::gather
