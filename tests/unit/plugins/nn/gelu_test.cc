// nn.gelu.fwd/.bwd against the definition x * Phi(x) and its derivative, computed here with std::erf.
#include <gtest/gtest.h>

#include <cmath>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class GeluTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GeluTest, FloatTypes);

TYPED_TEST(GeluTest, MatchesTheErfDefinition) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t n = 9000, d = 5;
  ASSERT_GT(PoolChunks(n * d, 1 << 14, 3), 1);  // the kernel's grain: several chunks run
  const std::vector<T> x = RandomValues<T>(n * d, 1, -6, 6), dy = RandomValues<T>(n * d, 2);
  Tensor tx = MakeTensor<T>({n, d}, x), ty = Filled<T>({n, d}, T(9)), tdy = MakeTensor<T>({n, d}, dy);
  Tensor tdx = Filled<T>({n, d}, T(9));
  CallCpu("nn.gelu.fwd", {&tx}, {&ty}, &pool);
  CallCpu("nn.gelu.bwd", {&tdy, &tx}, {&tdx}, &pool);
  std::vector<double> y(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = static_cast<double>(x[i]);
    const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    y[i] = v * cdf;
    dx[i] = static_cast<double>(dy[i]) * (cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
  }
  ExpectNear(ToVector<T>(ty), y, Tolerance<T>() * 5, "Y");
  ExpectNear(ToVector<T>(tdx), dx, Tolerance<T>() * 5, "dX");
}

TEST(Gelu, KnownValues) {
  Tensor tx = MakeTensor<double>({1, 3}, {0.0, 1.0, -1.0}), ty = Filled<double>({1, 3}, 9.0);
  CallCpu("nn.gelu.fwd", {&tx}, {&ty}, nullptr);
  // GELU(1) = Phi(1) = 0.8413447460685429; GELU(-1) = -(1 - Phi(1)).
  ExpectNear(ToVector<double>(ty), std::vector<double>{0.0, 0.8413447460685429, -0.15865525393145707}, 1e-15, "Y");
}

}  // namespace
}  // namespace tessel::kernel_test
