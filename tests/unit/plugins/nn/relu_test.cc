// nn.relu.fwd/.bwd against the definition.
#include <gtest/gtest.h>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class ReluTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ReluTest, FloatTypes);

TYPED_TEST(ReluTest, ForwardClampsNegativesAndBackwardMasksByOutput) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t n = 20000, d = 7;
  ASSERT_GT(PoolChunks(n * d, 1 << 15, 3), 1);  // the kernel's grain: several chunks run
  std::vector<T> x = RandomValues<T>(n * d, 1);
  x[0] = T(0);  // relu'(0) = 0 by the convention dX = dY where Y > 0
  const std::vector<T> dy = RandomValues<T>(n * d, 2);
  Tensor tx = MakeTensor<T>({n, d}, x), ty = Filled<T>({n, d}, T(4));
  CallCpu("nn.relu.fwd", {&tx}, {&ty}, &pool);
  Tensor tdy = MakeTensor<T>({n, d}, dy), tdx = Filled<T>({n, d}, T(4));
  CallCpu("nn.relu.bwd", {&tdy, &ty}, {&tdx}, &pool);
  const std::vector<T> y = ToVector<T>(ty), dx = ToVector<T>(tdx);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], x[i] > 0 ? x[i] : T(0)) << i;
    ASSERT_EQ(dx[i], x[i] > 0 ? dy[i] : T(0)) << i;
  }
}

}  // namespace
}  // namespace tessel::kernel_test
