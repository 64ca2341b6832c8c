// gather.rows on CPU, through the registry as a worker calls it: exact copies of the rows against a
// reference loop for many row widths (odd ones, ones that are not whole 16-float vectors, ones that are
// whole cache lines), at 1 and 2 threads, large outputs (streamed) and small ones, repeated ids, empty
// batches and bad ids.
#include <gtest/gtest.h>
#include <tessel/ops/gather.h>

#include <cstring>
#include <limits>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class GatherRowsTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GatherRowsTest, FloatTypes);

std::vector<int64_t> UniformIds(int64_t m, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(m));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  return ids;
}

template <typename T>
std::vector<T> ReferenceGather(const std::vector<T>& table, int64_t d, const std::vector<int64_t>& ids) {
  std::vector<T> y;
  y.reserve(ids.size() * static_cast<size_t>(d));
  for (int64_t id : ids) {
    for (int64_t c = 0; c < d; ++c) y.push_back(table[static_cast<size_t>(id * d + c)]);
  }
  return y;
}

// Y must equal the reference bit for bit (a copy), and the table must be unchanged.
template <typename T>
void ExpectGather(int64_t n, int64_t d, const std::vector<int64_t>& ids, ThreadPool* pool) {
  const int64_t m = static_cast<int64_t>(ids.size());
  const std::vector<T> table = RandomValues<T>(n * d, static_cast<uint64_t>(n * 31 + d));
  Tensor tt = MakeTensor<T>({n, d}, table), tids = MakeTensor<int64_t>({m}, ids), ty = Filled<T>({m, d}, T(-7));
  CallCpu("gather.rows", {&tt, &tids}, {&ty}, pool);
  const std::vector<T> expected = ReferenceGather(table, d, ids);
  ASSERT_EQ(std::memcmp(ty.data<T>(), expected.data(), expected.size() * sizeof(T)), 0)
      << "Y differs from table[ids] (n " << n << ", d " << d << ", m " << m << ")";
  EXPECT_EQ(ToVector<T>(tt), table) << "the table must be unchanged";
}

TYPED_TEST(GatherRowsTest, MatchesReferenceLoopForEveryWidth) {
  using T = TypeParam;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t d : {1, 3, 7, 15, 16, 17, 31, 32, 33, 100, 128, 130, 512}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", d " + std::to_string(d));
      ExpectGather<T>(997, d, UniformIds(3001, 997, static_cast<uint64_t>(d)), &pool);
    }
  }
}

TYPED_TEST(GatherRowsTest, LargeBatchOfWholeLinesIsStreamedAcrossThreads) {
  using T = TypeParam;
  // 512-byte rows and 8 MiB of output: streaming stores, in several chunks per thread.
  const int64_t d = 512 / static_cast<int64_t>(sizeof(T)), m = 16384;
  ASSERT_GT(PoolChunks(m, (256 << 10) / 512, 2), 2);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    SCOPED_TRACE("threads " + std::to_string(threads));
    ExpectGather<T>(5000, d, UniformIds(m, 5000, 3), &pool);
  }
}

TYPED_TEST(GatherRowsTest, RepeatedIdsCopyTheSameRowEachTime) {
  using T = TypeParam;
  ThreadPool pool(2);
  ExpectGather<T>(10, 33, std::vector<int64_t>(2000, 4), &pool);
  std::vector<int64_t> alternating(5000);
  for (size_t i = 0; i < alternating.size(); ++i) alternating[i] = static_cast<int64_t>(i % 3) * 4;
  ExpectGather<T>(9, 64, alternating, &pool);
}

TYPED_TEST(GatherRowsTest, EmptyBatchIsANoOp) {
  using T = TypeParam;
  ThreadPool pool(2);
  Tensor tt = Filled<T>({5, 3}, T(1)), tids = MakeTensor<int64_t>({0}, {}), ty = Filled<T>({0, 3}, T(0));
  CallCpu("gather.rows", {&tt, &tids}, {&ty}, &pool);
  Tensor empty_table = Filled<T>({0, 3}, T(0));
  CallCpu("gather.rows", {&empty_table, &tids}, {&ty}, &pool);
}

TEST(GatherRowsChecks, OutputThatIsNotLineAlignedIsStillExact) {
  // 512-byte rows into an output 4 bytes past a line boundary: regular stores, same rows.
  const int64_t n = 400, d = 128, m = 9000;
  const std::vector<float> table = RandomValues<float>(n * d, 5);
  const std::vector<int64_t> ids = UniformIds(m, n, 6);
  std::vector<float> storage(static_cast<size_t>(m * d + 32));
  char* raw = reinterpret_cast<char*>(storage.data());
  float* base = reinterpret_cast<float*>(raw + (68 - reinterpret_cast<uintptr_t>(raw) % 64) % 64);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(base) % 64, 4u);
  Tensor tt = MakeTensor<float>({n, d}, table), tids = MakeTensor<int64_t>({m}, ids);
  Tensor ty = Tensor::Borrow(base, DType::kF32, {m, d});
  ThreadPool pool(2);
  CallCpu("gather.rows", {&tt, &tids}, {&ty}, &pool);
  const std::vector<float> expected = ReferenceGather(table, d, ids);
  EXPECT_EQ(std::memcmp(base, expected.data(), expected.size() * sizeof(float)), 0);
}

TEST(GatherRowsChecks, IdOutOfRangeIsBadDataNamingPositionIdAndN) {
  const int64_t n = 6, d = 2;
  for (int64_t bad :
       {int64_t{6}, int64_t{-1}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      Tensor tt = Filled<float>({n, d}, 1.0f), tids = MakeTensor<int64_t>({4}, {0, 5, bad, 1});
      Tensor ty = Filled<float>({4, d}, 0.0f);
      const Status st = TryCallCpu("gather.rows", {&tt, &tids}, {&ty}, &pool);
      EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
      EXPECT_NE(st.message().find("ids[2] = " + std::to_string(bad) + " is out of range [0, 6)"), std::string::npos)
          << st.message();
    }
  }
}

TEST(GatherRowsChecks, FirstBadPositionIsReportedWhateverChunkFindsOne) {
  // Several chunks at 2 threads; two bad ids, the later one in an earlier-finishing chunk maybe: the
  // message names the smaller position.
  const int64_t n = 100, d = 64, m = 40000;
  std::vector<int64_t> ids = UniformIds(m, n, 8);
  ids[31000] = -5;
  ids[7001] = 100;
  ThreadPool pool(2);
  ASSERT_GT(PoolChunks(m, (256 << 10) / 256, 2), 2);
  Tensor tt = Filled<float>({n, d}, 2.0f), tids = MakeTensor<int64_t>({m}, ids), ty = Filled<float>({m, d}, 0.0f);
  const Status st = TryCallCpu("gather.rows", {&tt, &tids}, {&ty}, &pool);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_NE(st.message().find("ids[7001] = 100 is out of range [0, 100)"), std::string::npos) << st.message();
}

TEST(GatherRowsChecks, EmptyRowsStillCheckTheIds) {
  Tensor tt = Filled<float>({4, 0}, 0.0f), ty = Filled<float>({3, 0}, 0.0f);
  Tensor good = MakeTensor<int64_t>({3}, {0, 3, 1}), bad = MakeTensor<int64_t>({3}, {0, 4, 1});
  CallCpu("gather.rows", {&tt, &good}, {&ty}, nullptr);
  const Status st = TryCallCpu("gather.rows", {&tt, &bad}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_NE(st.message().find("ids[1] = 4"), std::string::npos) << st.message();
}

TEST(GatherRowsChecks, EmptyTableRefusesEveryId) {
  Tensor tt = Filled<float>({0, 4}, 0.0f), tids = MakeTensor<int64_t>({1}, {0}), ty = Filled<float>({1, 4}, 0.0f);
  const Status st = TryCallCpu("gather.rows", {&tt, &tids}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_NE(st.message().find("ids[0] = 0 is out of range [0, 0)"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::kernel_test
