// llm.layernorm.fwd/.bwd against llm.c's loops in double, the += semantics of the backward, its
// determinism across thread counts, a bad eps, and finite differences.
#include <gtest/gtest.h>
#include <tessel/ops/llm.h>

#include <cmath>

#include "llm_test_util.h"

namespace tessel::kernel_test {
namespace {

constexpr double kEps = 1e-5;
const tessel_layernorm_params kParams{sizeof(tessel_layernorm_params), kEps};

template <typename T>
class LayernormTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LayernormTest, FloatTypes);

struct LayernormRef {
  std::vector<double> y, mean, rstd;
};

// llm.c layernorm_forward, in double.
template <typename T>
LayernormRef ReferenceForward(const std::vector<T>& x, const std::vector<T>& w, const std::vector<T>& b, int64_t n,
                              int64_t c, double eps) {
  LayernormRef ref{std::vector<double>(static_cast<size_t>(n * c)), std::vector<double>(static_cast<size_t>(n)),
                   std::vector<double>(static_cast<size_t>(n))};
  for (int64_t r = 0; r < n; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[r * c + j];
    m /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) v += (x[r * c + j] - m) * (x[r * c + j] - m);
    v /= static_cast<double>(c);
    const double s = 1.0 / std::sqrt(v + eps);
    for (int64_t j = 0; j < c; ++j) ref.y[r * c + j] = (x[r * c + j] - m) * s * w[j] + b[j];
    ref.mean[r] = m;
    ref.rstd[r] = s;
  }
  return ref;
}

TYPED_TEST(LayernormTest, ForwardMatchesReference) {
  using T = TypeParam;
  ThreadPool pool(2);
  for (const auto& [n, c] : std::vector<std::pair<int64_t, int64_t>>{{10, 8}, {34, 24}, {260, 130}}) {
    SCOPED_TRACE("N " + std::to_string(n) + " C " + std::to_string(c));
    const auto x = RandomValues<T>(n * c, 1, -3, 5), w = RandomValues<T>(c, 2), b = RandomValues<T>(c, 3);
    const LayernormRef ref = ReferenceForward(x, w, b, n, c, kEps);
    Tensor tx = MakeTensor<T>({n, c}, x), tw = MakeTensor<T>({c}, w), tb = MakeTensor<T>({c}, b);
    Tensor ty = Filled<T>({n, c}, T(9)), tmean = Filled<T>({n}, T(9)), trstd = Filled<T>({n}, T(9));
    CallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, kParams, &pool);
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
    ExpectNear(ToVector<T>(ty), ref.y, tol, "Y");
    ExpectNear(ToVector<T>(tmean), ref.mean, tol, "mean");
    ExpectNear(ToVector<T>(trstd), ref.rstd, tol, "rstd");
  }
}

TYPED_TEST(LayernormTest, BackwardAddsIntoTheGradients) {
  using T = TypeParam;
  ThreadPool pool(2);
  const int64_t n = 70, c = 24;  // three blocks of 32 rows
  const auto x = RandomValues<T>(n * c, 4, -2, 2), w = RandomValues<T>(c, 5), b = RandomValues<T>(c, 6);
  const auto dy = RandomValues<T>(n * c, 7);
  const auto dx0 = RandomValues<T>(n * c, 8), dw0 = RandomValues<T>(c, 9), db0 = RandomValues<T>(c, 10);
  // mean and rstd as the forward gives them, in T.
  Tensor tx = MakeTensor<T>({n, c}, x), tw = MakeTensor<T>({c}, w), tb = MakeTensor<T>({c}, b);
  Tensor ty = Filled<T>({n, c}, T(0)), tmean = Filled<T>({n}, T(0)), trstd = Filled<T>({n}, T(0));
  CallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, kParams, &pool);
  const auto mean = ToVector<T>(tmean), rstd = ToVector<T>(trstd);
  // llm.c layernorm_backward, in double.
  std::vector<double> dx(dx0.begin(), dx0.end()), dw(dw0.begin(), dw0.end()), db(db0.begin(), db0.end());
  for (int64_t r = 0; r < n; ++r) {
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int64_t j = 0; j < c; ++j) {
      const double xhat = (x[r * c + j] - static_cast<double>(mean[r])) * rstd[r];
      dnorm_mean += static_cast<double>(w[j]) * dy[r * c + j];
      dnorm_norm_mean += static_cast<double>(w[j]) * dy[r * c + j] * xhat;
    }
    dnorm_mean /= static_cast<double>(c);
    dnorm_norm_mean /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) {
      const double xhat = (x[r * c + j] - static_cast<double>(mean[r])) * rstd[r];
      const double dnorm = static_cast<double>(w[j]) * dy[r * c + j];
      db[j] += dy[r * c + j];
      dw[j] += xhat * dy[r * c + j];
      dx[r * c + j] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * rstd[r];
    }
  }
  Tensor tdy = MakeTensor<T>({n, c}, dy);
  Tensor tdx = MakeTensor<T>({n, c}, dx0), tdw = MakeTensor<T>({c}, dw0), tdb = MakeTensor<T>({c}, db0);
  CallLlm("llm.layernorm.bwd", {&tdy, &tx, &tw, &tmean, &trstd}, {&tdx, &tdw, &tdb}, &pool);
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  ExpectNear(ToVector<T>(tdx), dx, tol, "dX");
  ExpectNear(ToVector<T>(tdw), dw, tol, "dw");
  ExpectNear(ToVector<T>(tdb), db, tol, "db");
}

// The Tempo-style backward from the output gives the backward from the input (the same xhat, rebuilt).
TYPED_TEST(LayernormTest, BackwardFromOutputMatchesBackwardFromInput) {
  using T = TypeParam;
  ThreadPool pool(2);
  const int64_t n = 70, c = 24;
  Tensor tx = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 21, -2, 2));
  // Weights away from zero, as LayerNorm weights are (they start at 1): the rebuild divides by them.
  Tensor tw = MakeTensor<T>({c}, RandomValues<T>(c, 22, 0.5, 1.5)), tb = MakeTensor<T>({c}, RandomValues<T>(c, 23));
  Tensor ty = Filled<T>({n, c}, T(0)), tmean = Filled<T>({n}, T(0)), trstd = Filled<T>({n}, T(0));
  CallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, kParams, &pool);
  Tensor tdy = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 24));
  const auto dx0 = RandomValues<T>(n * c, 25), dw0 = RandomValues<T>(c, 26), db0 = RandomValues<T>(c, 27);
  Tensor ix = MakeTensor<T>({n, c}, dx0), iw = MakeTensor<T>({c}, dw0), ib = MakeTensor<T>({c}, db0);
  Tensor ox = MakeTensor<T>({n, c}, dx0), ow = MakeTensor<T>({c}, dw0), ob = MakeTensor<T>({c}, db0);
  CallLlm("llm.layernorm.bwd", {&tdy, &tx, &tw, &tmean, &trstd}, {&ix, &iw, &ib}, &pool);
  CallLlm("llm.layernorm.bwd_from_output", {&tdy, &ty, &tw, &tb, &trstd}, {&ox, &ow, &ob}, &pool);
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  const auto widen = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  ExpectNear(ToVector<T>(ox), widen(ToVector<T>(ix)), tol, "dX");
  ExpectNear(ToVector<T>(ow), widen(ToVector<T>(iw)), tol, "dw");
  ExpectNear(ToVector<T>(ob), widen(ToVector<T>(ib)), tol, "db");
}

TYPED_TEST(LayernormTest, BackwardFromOutputRefusesAZeroWeight) {
  using T = TypeParam;
  const int64_t n = 4, c = 8;
  std::vector<T> w(c, T(1));
  w[5] = T(0);
  Tensor tdy = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 1)), ty = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 2));
  Tensor tw = MakeTensor<T>({c}, w), tb = MakeTensor<T>({c}, RandomValues<T>(c, 3)), trstd = Filled<T>({n}, T(1));
  Tensor dx = Filled<T>({n, c}, T(0)), dw = Filled<T>({c}, T(0)), db = Filled<T>({c}, T(0));
  const Status st =
      TryCallLlm("llm.layernorm.bwd_from_output", {&tdy, &ty, &tw, &tb, &trstd}, {&dx, &dw, &db}, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("w has a zero"), std::string::npos) << st.message();
}

TYPED_TEST(LayernormTest, BackwardTwiceDoublesTheGradients) {
  using T = TypeParam;
  const int64_t n = 40, c = 16;
  Tensor tx = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 11)), tw = MakeTensor<T>({c}, RandomValues<T>(c, 12));
  Tensor tb = MakeTensor<T>({c}, RandomValues<T>(c, 13)), tdy = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 14));
  Tensor ty = Filled<T>({n, c}, T(0)), tmean = Filled<T>({n}, T(0)), trstd = Filled<T>({n}, T(0));
  CallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, kParams, nullptr);
  std::vector<std::vector<T>> once, twice;
  for (int calls : {1, 2}) {
    Tensor tdx = Filled<T>({n, c}, T(0)), tdw = Filled<T>({c}, T(0)), tdb = Filled<T>({c}, T(0));
    for (int k = 0; k < calls; ++k) {
      CallLlm("llm.layernorm.bwd", {&tdy, &tx, &tw, &tmean, &trstd}, {&tdx, &tdw, &tdb}, nullptr);
    }
    (calls == 1 ? once : twice) = std::vector<std::vector<T>>{ToVector<T>(tdx), ToVector<T>(tdw), ToVector<T>(tdb)};
  }
  for (size_t i = 0; i < once.size(); ++i) {
    std::vector<double> doubled;
    for (T v : once[i]) doubled.push_back(2.0 * static_cast<double>(v));
    ExpectNear(twice[i], doubled, 0.0, "gradient " + std::to_string(i));  // x + x = 2x exactly
  }
}

TYPED_TEST(LayernormTest, IsBitIdenticalForAnyThreadCount) {
  using T = TypeParam;
  const int64_t n = 520, c = 96;  // 17 blocks of 32 rows
  ASSERT_GT(PoolChunks((n + 31) / 32, 1, 2), 1);
  ASSERT_GT(PoolChunks(n, (1 << 14) / c, 2), 1);
  Tensor tx = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 15, -4, 4)), tw = MakeTensor<T>({c}, RandomValues<T>(c, 16));
  Tensor tb = MakeTensor<T>({c}, RandomValues<T>(c, 17)), tdy = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 18));
  std::vector<std::vector<T>> results[2];
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    Tensor ty = Filled<T>({n, c}, T(0)), tmean = Filled<T>({n}, T(0)), trstd = Filled<T>({n}, T(0));
    CallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, kParams, &pool);
    Tensor tdx = Filled<T>({n, c}, T(0.5)), tdw = Filled<T>({c}, T(0.5)), tdb = Filled<T>({c}, T(0.5));
    CallLlm("llm.layernorm.bwd", {&tdy, &tx, &tw, &tmean, &trstd}, {&tdx, &tdw, &tdb}, &pool);
    results[threads - 1] = std::vector<std::vector<T>>{ToVector<T>(ty),  ToVector<T>(tmean), ToVector<T>(trstd),
                                                       ToVector<T>(tdx), ToVector<T>(tdw),   ToVector<T>(tdb)};
  }
  const char* names[] = {"Y", "mean", "rstd", "dX", "dw", "db"};
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_TRUE(SameBits(results[0][i], results[1][i])) << names[i] << " differs between 1 and 2 threads";
  }
}

TEST(LayernormChecks, NegativeOrNanEpsIsInvalid) {
  for (double eps : {-1e-5, std::nan("")}) {
    const tessel_layernorm_params params{sizeof(tessel_layernorm_params), eps};
    Tensor tx = Filled<double>({2, 3}, 1.0), tw = Filled<double>({3}, 1.0), tb = Filled<double>({3}, 0.0);
    Tensor ty = Filled<double>({2, 3}, 0.0), tmean = Filled<double>({2}, 0.0), trstd = Filled<double>({2}, 0.0);
    const Status st = TryCallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, params, nullptr);
    EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  }
}

// dL/dX, dL/dw, dL/db of L = sum(G * Y) by central differences, against the backward from dY = G.
TEST(LayernormGradientCheck, MatchesFiniteDifferences) {
  const int64_t n = 6, c = 10;
  auto x = RandomValues<double>(n * c, 1, -2, 2), w = RandomValues<double>(c, 2), b = RandomValues<double>(c, 3);
  const auto g = RandomValues<double>(n * c, 4);
  Tensor tmean = Filled<double>({n}, 0.0), trstd = Filled<double>({n}, 0.0);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({n, c}, x), tw = MakeTensor<double>({c}, w), tb = MakeTensor<double>({c}, b);
    Tensor ty = Filled<double>({n, c}, 0.0);
    CallLlmWith("llm.layernorm.fwd", {&tx, &tw, &tb}, {&ty, &tmean, &trstd}, kParams, nullptr);
    return Dot(ty, g);
  };
  objective();  // mean and rstd of the unperturbed inputs
  Tensor tx = MakeTensor<double>({n, c}, x), tw = MakeTensor<double>({c}, w), tdy = MakeTensor<double>({n, c}, g);
  Tensor tdx = Filled<double>({n, c}, 0.0), tdw = Filled<double>({c}, 0.0), tdb = Filled<double>({c}, 0.0);
  CallLlm("llm.layernorm.bwd", {&tdy, &tx, &tw, &tmean, &trstd}, {&tdx, &tdw, &tdb}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dw");
  ExpectNear(ToVector<double>(tdb), NumericGrad(b, objective), kGradTol, "db");
}

}  // namespace
}  // namespace tessel::kernel_test
