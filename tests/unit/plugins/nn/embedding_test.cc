// nn.embedding.fwd/.bwd (a row gather and its scatter-add adjoint) against naive loops, the backward's
// determinism across thread counts, bad ids, finite differences, and CUDA against CPU.
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include <cstring>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

// The kernels' grain: 1 << 14 elements per task, i.e. (1 << 14) / D rows.
constexpr int64_t kRowGrainD4 = (1 << 14) / 4;

template <typename T>
class EmbeddingTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(EmbeddingTest, FloatTypes);

// Ids with many repeats: half of the rows hit a few hot ids, the rest spread over [0, v).
std::vector<int64_t> RepeatedIds(int64_t m, int64_t v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(m));
  for (int64_t& id : ids)
    id = rng() % 2 == 0 ? static_cast<int64_t>(rng() % 5) * (v / 5) : static_cast<int64_t>(rng() % v);
  return ids;
}

TYPED_TEST(EmbeddingTest, ForwardGathersRows) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t v = 3000, d = 4, m = 20000;
  ASSERT_GT(PoolChunks(m, kRowGrainD4, 3), 1);
  const auto w = RandomValues<T>(v * d, 1);
  const auto ids = RepeatedIds(m, v, 2);
  std::vector<double> y(static_cast<size_t>(m * d));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < d; ++c) y[i * d + c] = w[ids[i] * d + c];
  }
  Tensor tw = MakeTensor<T>({v, d}, w), tids = MakeTensor<int64_t>({m}, ids), ty = Filled<T>({m, d}, T(7));
  CallCpu("nn.embedding.fwd", {&tw, &tids}, {&ty}, &pool);
  ExpectNear(ToVector<T>(ty), y, 0.0, "Y");  // a copy: exact
  EXPECT_EQ(ToVector<T>(tw), w) << "W must be unchanged";
}

TYPED_TEST(EmbeddingTest, BackwardSumsRepeatedIdsIntoZeroedRows) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t v = 10000, d = 4, m = 30000;
  ASSERT_GT(PoolChunks(v, kRowGrainD4, 3), 1);
  const auto dy = RandomValues<T>(m * d, 3);
  const auto ids = RepeatedIds(m, v, 4);
  std::vector<double> dw(static_cast<size_t>(v * d), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < d; ++c) dw[ids[i] * d + c] += static_cast<double>(dy[i * d + c]);
  }
  Tensor tdy = MakeTensor<T>({m, d}, dy), tids = MakeTensor<int64_t>({m}, ids), tdw = Filled<T>({v, d}, T(9));
  CallCpu("nn.embedding.bwd", {&tdy, &tids}, {&tdw}, &pool);
  // The hot ids sum a few thousand values of [-1, 1].
  ExpectNear(ToVector<T>(tdw), dw, std::is_same_v<T, float> ? 1e-4 : 1e-11, "dW");
}

TYPED_TEST(EmbeddingTest, BackwardIsBitIdenticalForAnyThreadCount) {
  using T = TypeParam;
  const int64_t v = 8000, d = 4, m = 40000;
  ASSERT_GT(PoolChunks(v, kRowGrainD4, 2), 1);
  const auto dy = RandomValues<T>(m * d, 5, -10, 10);
  const auto ids = RepeatedIds(m, v, 6);
  Tensor tdy = MakeTensor<T>({m, d}, dy), tids = MakeTensor<int64_t>({m}, ids);
  std::vector<std::vector<T>> results;
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    Tensor tdw = Filled<T>({v, d}, T(9));
    CallCpu("nn.embedding.bwd", {&tdy, &tids}, {&tdw}, &pool);
    results.push_back(ToVector<T>(tdw));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    ASSERT_EQ(results[i].size(), results[0].size());
    EXPECT_EQ(std::memcmp(results[i].data(), results[0].data(), results[0].size() * sizeof(T)), 0)
        << "dW differs between 1 thread and " << (1 << i) << " threads";
  }
}

TEST(EmbeddingChecks, IdOutOfRangeIsBadData) {
  const int64_t v = 6, d = 2;
  for (int64_t bad : {int64_t{6}, int64_t{-1}}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    Tensor tw = Filled<double>({v, d}, 1.0), tids = MakeTensor<int64_t>({4}, {0, 5, bad, 1});
    Tensor ty = Filled<double>({4, d}, 0.0);
    Status st = TryCallCpu("nn.embedding.fwd", {&tw, &tids}, {&ty}, nullptr);
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    EXPECT_NE(st.message().find("ids[2]"), std::string::npos) << st.message();
    Tensor tdy = Filled<double>({4, d}, 1.0), tdw = Filled<double>({v, d}, 0.0);
    st = TryCallCpu("nn.embedding.bwd", {&tdy, &tids}, {&tdw}, nullptr);
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    EXPECT_NE(st.message().find("ids[2]"), std::string::npos) << st.message();
  }
}

TEST(EmbeddingChecks, EmptyIdsGiveZeroGradient) {
  Tensor tw = Filled<double>({3, 2}, 1.0), tids = MakeTensor<int64_t>({0}, {}), ty = Filled<double>({0, 2}, 0.0);
  CallCpu("nn.embedding.fwd", {&tw, &tids}, {&ty}, nullptr);
  Tensor tdy = Filled<double>({0, 2}, 0.0), tdw = Filled<double>({3, 2}, 5.0);
  CallCpu("nn.embedding.bwd", {&tdy, &tids}, {&tdw}, nullptr);
  EXPECT_EQ(ToVector<double>(tdw), std::vector<double>(6, 0.0));
}

// dL/dW of L = sum(G * Y), Y = W[ids], by central differences, against the backward from dY = G.
TEST(EmbeddingGradientCheck, MatchesFiniteDifferences) {
  const int64_t v = 5, d = 3, m = 7;
  auto w = RandomValues<double>(v * d, 1);
  const std::vector<int64_t> ids = {2, 0, 2, 4, 2, 0, 1};  // row 3 unused, rows 0 and 2 repeated
  const auto gy = RandomValues<double>(m * d, 2);
  Tensor tids = MakeTensor<int64_t>({m}, ids);
  auto objective = [&] {
    Tensor tw = MakeTensor<double>({v, d}, w), ty = Filled<double>({m, d}, 0.0);
    CallCpu("nn.embedding.fwd", {&tw, &tids}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tdy = MakeTensor<double>({m, d}, gy), tdw = Filled<double>({v, d}, 3.0);
  CallCpu("nn.embedding.bwd", {&tdy, &tids}, {&tdw}, nullptr);
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dW");
}

template <typename T>
class EmbeddingCrossDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireCudaKernels({"nn.embedding.fwd", "nn.embedding.bwd"}); }
  // float: atomics sum the repeated ids in another order.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }
};
TYPED_TEST_SUITE(EmbeddingCrossDeviceTest, FloatTypes);

TYPED_TEST(EmbeddingCrossDeviceTest, MatchesCpu) {
  using T = TypeParam;
  const int64_t v = 700, d = 33, m = 5000;
  Tensor ids = MakeTensor<int64_t>({m}, RepeatedIds(m, v, 7));
  CompareDevices("nn.embedding.fwd", {MakeTensor<T>({v, d}, RandomValues<T>(v * d, 1)), ids}, {Filled<T>({m, d}, T(3))},
                 this->Tol());
  CompareDevices("nn.embedding.bwd", {MakeTensor<T>({m, d}, RandomValues<T>(m * d, 2)), ids}, {Filled<T>({v, d}, T(3))},
                 this->Tol());
}

}  // namespace
}  // namespace tessel::kernel_test
