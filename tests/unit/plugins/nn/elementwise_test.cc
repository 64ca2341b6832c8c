// nn.add against a loop, also in place (C the same buffer as A or B); nn.sum_squares against a sum in
// double, over several of the kernel's chunks, with the same bits at 1, 2 and 3 threads.
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class ElementwiseTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ElementwiseTest, FloatTypes);

TYPED_TEST(ElementwiseTest, AddMatchesALoop) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t n = 100003;
  ASSERT_GT(PoolChunks(n, 1 << 15, 3), 1);  // the kernel's grain: several chunks run
  const auto a = RandomValues<T>(n, 1), b = RandomValues<T>(n, 2);
  Tensor ta = MakeTensor<T>({n}, a), tb = MakeTensor<T>({n}, b), tc = Filled<T>({n}, T(9));
  CallCpu("nn.add", {&ta, &tb}, {&tc}, &pool);
  std::vector<T> expect(a.size());
  for (size_t i = 0; i < a.size(); ++i) expect[i] = a[i] + b[i];  // one rounding, as the kernel's
  EXPECT_EQ(ToVector<T>(tc), expect);
}

TYPED_TEST(ElementwiseTest, AddInPlace) {
  using T = TypeParam;
  ThreadPool pool(2);
  const int64_t n = 70001;
  const auto a = RandomValues<T>(n, 1), b = RandomValues<T>(n, 2);
  std::vector<T> expect(a.size());
  for (size_t i = 0; i < a.size(); ++i) expect[i] = a[i] + b[i];
  Tensor ta = MakeTensor<T>({n}, a), tb = MakeTensor<T>({n}, b);
  CallCpu("nn.add", {&ta, &tb}, {&ta}, &pool);  // A += B
  EXPECT_EQ(ToVector<T>(ta), expect);
  Tensor ta2 = MakeTensor<T>({n}, a);
  CallCpu("nn.add", {&ta2, &tb}, {&tb}, &pool);  // B = A + B
  EXPECT_EQ(ToVector<T>(tb), expect);
}

TYPED_TEST(ElementwiseTest, SumSquaresMatchesADoubleSum) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (const int64_t n : {int64_t{0}, int64_t{5}, int64_t{300001}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const auto x = RandomValues<T>(n, 1, -3, 3);
    Tensor tx = MakeTensor<T>({n}, x), s = Filled<double>({1}, 7.0);
    CallCpu("nn.sum_squares", {&tx}, {&s}, &pool);
    double expect = 0;
    for (T v : x) expect += static_cast<double>(v) * static_cast<double>(v);
    // Accumulated in double whatever T: float inputs lose nothing either.
    EXPECT_NEAR(s.data<double>()[0], expect, 1e-12 * std::max(1.0, expect));
  }
}

TYPED_TEST(ElementwiseTest, SumSquaresSameBitsAtAnyThreadCount) {
  using T = TypeParam;
  const int64_t n = 1000003;  // 16 of the kernel's chunks of 65536
  const auto x = RandomValues<T>(n, 4);
  Tensor tx = MakeTensor<T>({n}, x);
  std::vector<double> sums;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    Tensor s = Filled<double>({1}, 0.0);
    CallCpu("nn.sum_squares", {&tx}, {&s}, &pool);
    sums.push_back(s.data<double>()[0]);
  }
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(sums[0], sums[2]);
}

TEST(ElementwiseChecks, AddOfDifferentLengthsIsRefused) {
  Tensor a = Filled<double>({4}, 1.0), b = Filled<double>({5}, 1.0), c = Filled<double>({4}, 0.0);
  const Status st = TryCallCpu("nn.add", {&a, &b}, {&c}, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'B'"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tessel::kernel_test
