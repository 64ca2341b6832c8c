// nn.gemm against a naive triple loop, on both of the kernel's strategies: row blocks of C for tall
// products, and split inner dimension with fixed-order partial sums for short, deep ones.
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class GemmTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmTest, FloatTypes);

template <typename T>
std::vector<double> NaiveGemm(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c0, int64_t m,
                              int64_t k, int64_t n, bool ta, bool tb, double alpha, double beta) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        sum += av * bv;
      }
      c[i * n + j] = alpha * sum + beta * static_cast<double>(c0[i * n + j]);
    }
  }
  return c;
}

template <typename T>
void CheckGemm(int64_t m, int64_t k, int64_t n, bool ta, bool tb, double alpha, double beta) {
  SCOPED_TRACE("m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n) + " ta " +
               std::to_string(ta) + " tb " + std::to_string(tb));
  ThreadPool pool(3);
  const auto a = RandomValues<T>(m * k, 1), b = RandomValues<T>(k * n, 2), c0 = RandomValues<T>(m * n, 3);
  Tensor ta_ = MakeTensor<T>(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, a);
  Tensor tb_ = MakeTensor<T>(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, b);
  Tensor tc = MakeTensor<T>({m, n}, c0);
  const tessel_gemm_params params{sizeof(tessel_gemm_params), ta ? 1 : 0, tb ? 1 : 0, alpha, beta};
  CallCpuWith("nn.gemm", {&ta_, &tb_}, {&tc}, params, &pool);
  // float: sums of up to a few thousand products of values in [-1, 1].
  const double tol = std::is_same_v<T, float> ? 2e-5 * std::sqrt(static_cast<double>(k)) : 1e-11;
  ExpectNear(ToVector<T>(tc), NaiveGemm(a, b, c0, m, k, n, ta, tb, alpha, beta), tol, "C");
}

TYPED_TEST(GemmTest, TallProductsSplitByRowsOfC) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) CheckGemm<TypeParam>(700, 20, 9, ta, tb, 1.0, 0.0);
  }
}

TYPED_TEST(GemmTest, DeepProductsSplitTheInnerDimension) {
  // m and n small, k large: the weight-gradient shape X^T dY.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) CheckGemm<TypeParam>(6, 5000, 7, ta, tb, 0.5, 0.0);
  }
}

TYPED_TEST(GemmTest, BetaAccumulatesIntoC) {
  CheckGemm<TypeParam>(300, 8, 5, false, false, 2.0, 0.5);
  CheckGemm<TypeParam>(5, 3000, 4, true, false, -1.0, 1.0);
}

TEST(GemmChecks, ShapesThatDoNotChainAreRefused) {
  Tensor a = Filled<double>({4, 3}, 1.0), b = Filled<double>({4, 5}, 1.0), c = Filled<double>({4, 5}, 0.0);
  const tessel_gemm_params params{sizeof(tessel_gemm_params), 0, 0, 1.0, 0.0};
  const Status st = TryCallCpu("nn.gemm", {&a, &b}, {&c}, nullptr, &params, sizeof(params));
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_NE(st.message().find("do not chain"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tessel::kernel_test
