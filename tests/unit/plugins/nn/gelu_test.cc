// nn.gelu.fwd/.bwd against the definition x * Phi(x) and its derivative, computed here with std::erf;
// nn.gelu_tanh.fwd/.bwd against GPT-2's tanh form and its derivative (written with 1 - tanh^2, not the
// kernel's 1 / cosh^2), in double.
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

template <typename T>
class GeluTanhTest : public ::testing::Test {};
TYPED_TEST_SUITE(GeluTanhTest, FloatTypes);

TYPED_TEST(GeluTanhTest, MatchesTheTanhDefinition) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t n = 9000, d = 5;
  ASSERT_GT(PoolChunks(n * d, 1 << 14, 3), 1);  // the kernel's grain: several chunks run
  const std::vector<T> x = RandomValues<T>(n * d, 1, -6, 6), dy = RandomValues<T>(n * d, 2);
  Tensor tx = MakeTensor<T>({n, d}, x), ty = Filled<T>({n, d}, T(9)), tdy = MakeTensor<T>({n, d}, dy);
  Tensor tdx = Filled<T>({n, d}, T(9));
  CallCpu("nn.gelu_tanh.fwd", {&tx}, {&ty}, &pool);
  CallCpu("nn.gelu_tanh.bwd", {&tdy, &tx}, {&tdx}, &pool);
  const double s = std::sqrt(2 / M_PI);
  std::vector<double> y(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = static_cast<double>(x[i]);
    const double t = std::tanh(s * (v + 0.044715 * v * v * v));
    y[i] = 0.5 * v * (1 + t);
    dx[i] = static_cast<double>(dy[i]) * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * s * (1 + 3 * 0.044715 * v * v));
  }
  ExpectNear(ToVector<T>(ty), y, Tolerance<T>() * 5, "Y");
  ExpectNear(ToVector<T>(tdx), dx, Tolerance<T>() * 5, "dX");
}

// Far out, cosh overflows to inf: the derivative is 1 on the right and 0 on the left, never NaN.
TYPED_TEST(GeluTanhTest, LargeInputsHaveFiniteGradients) {
  using T = TypeParam;
  Tensor tx = MakeTensor<T>({1, 4}, {T(-300), T(-30), T(30), T(300)}), tdy = Filled<T>({1, 4}, T(2));
  Tensor ty = Filled<T>({1, 4}, T(9)), tdx = Filled<T>({1, 4}, T(9));
  CallCpu("nn.gelu_tanh.fwd", {&tx}, {&ty}, nullptr);
  CallCpu("nn.gelu_tanh.bwd", {&tdy, &tx}, {&tdx}, nullptr);
  EXPECT_EQ(ToVector<T>(ty), (std::vector<T>{T(0), T(0), T(30), T(300)}));
  EXPECT_EQ(ToVector<T>(tdx), (std::vector<T>{T(0), T(0), T(2), T(2)}));
}

TEST(GeluTanh, KnownValues) {
  Tensor tx = MakeTensor<double>({1, 4}, {0.0, 1.0, -1.0, 3.0}), ty = Filled<double>({1, 4}, 9.0);
  Tensor tdy = Filled<double>({1, 4}, 1.0), tdx = Filled<double>({1, 4}, 9.0);
  CallCpu("nn.gelu_tanh.fwd", {&tx}, {&ty}, nullptr);
  CallCpu("nn.gelu_tanh.bwd", {&tdy, &tx}, {&tdx}, nullptr);
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GELU_tanh(1) = 0.84119199..., not erf's 0.84134474...
  ExpectNear(ToVector<double>(ty),
             std::vector<double>{0.0, 0.8411919906082768, -0.15880800939172324, 2.996362607918227}, 1e-15, "Y");
  ExpectNear(ToVector<double>(tdx),
             std::vector<double>{0.5, 1.0829640838457826, -0.08296408384578255, 1.0115841666309695}, 1e-14, "dX");
}

}  // namespace
}  // namespace tessel::kernel_test
