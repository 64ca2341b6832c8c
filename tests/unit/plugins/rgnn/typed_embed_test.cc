// rgnn.typed_embed.fwd/.bwd (the typed linear of a one-hot input) against naive lookups.
#include <gtest/gtest.h>

#include <numeric>

#include "rgnn_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class TypedEmbedTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TypedEmbedTest, FloatTypes);

// An injective row_id: input row m uses embedding row perm[m] of V >= M rows.
std::vector<int64_t> RowIds(int64_t m, int64_t v, uint64_t seed) {
  std::vector<int64_t> ids(static_cast<size_t>(v));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(static_cast<size_t>(m));
  return ids;
}

TYPED_TEST(TypedEmbedTest, ForwardLooksUpTheRowOfEachSource) {
  using T = TypeParam;
  ThreadPool pool(3);
  const Graph g = RandomGraph({}, 4);
  const int64_t v = g.m + 3, d = 5;
  const auto w = RandomValues<T>(g.r * v * d, 1);
  const auto row_id = RowIds(g.m, v, 2);
  std::vector<double> y(static_cast<size_t>(g.num_uniq() * d));
  for (int64_t u = 0; u < g.num_uniq(); ++u) {
    const int64_t r = RelationOfUniq(g, u);
    for (int64_t j = 0; j < d; ++j) y[u * d + j] = w[(r * v + row_id[g.uniq_src[u]]) * d + j];
  }
  GraphTensors gt = ToTensors<T>(g);
  Tensor tw = MakeTensor<T>({g.r, v, d}, w), trow = MakeTensor<int64_t>({g.m}, row_id);
  Tensor ty = Filled<T>({g.num_uniq(), d}, T(3));
  CallCpu("rgnn.typed_embed.fwd", {&tw, &gt.uniq_ptr, &gt.uniq_src, &trow}, {&ty}, &pool);
  ExpectNear(ToVector<T>(ty), y, 0.0, "Y");  // a copy: exact
}

TYPED_TEST(TypedEmbedTest, BackwardScattersIntoZeroedWeights) {
  using T = TypeParam;
  ThreadPool pool(3);
  const Graph g = RandomGraph({.num_relations = 6, .num_edges = 50}, 6);
  const int64_t v = g.m + 2, d = 3;
  const auto dy = RandomValues<T>(g.num_uniq() * d, 1);
  const auto row_id = RowIds(g.m, v, 3);
  std::vector<double> dw(static_cast<size_t>(g.r * v * d), 0.0);
  for (int64_t u = 0; u < g.num_uniq(); ++u) {
    const int64_t r = RelationOfUniq(g, u);
    for (int64_t j = 0; j < d; ++j) dw[(r * v + row_id[g.uniq_src[u]]) * d + j] += dy[u * d + j];
  }
  GraphTensors gt = ToTensors<T>(g);
  Tensor tdy = MakeTensor<T>({g.num_uniq(), d}, dy), trow = MakeTensor<int64_t>({g.m}, row_id);
  Tensor tdw = Filled<T>({g.r, v, d}, T(9));
  CallCpu("rgnn.typed_embed.bwd", {&tdy, &gt.uniq_ptr, &gt.uniq_src, &trow}, {&tdw}, &pool);
  ExpectNear(ToVector<T>(tdw), dw, 0.0, "dW");  // row_id is injective: one term per row, exact
}

TEST(TypedEmbedChecks, RowIdOutOfRangeIsBadData) {
  const Graph g = RandomGraph({}, 4);
  GraphTensors gt = ToTensors<double>(g);
  const int64_t v = g.m;
  std::vector<int64_t> row_id(static_cast<size_t>(g.m), 0);
  row_id[3] = v;
  Tensor tw = Filled<double>({g.r, v, 2}, 1.0), trow = MakeTensor<int64_t>({g.m}, row_id);
  Tensor ty = Filled<double>({g.num_uniq(), 2}, 0.0);
  const workers::Kernel* kernel = BuiltinRegistry().Find("rgnn.typed_embed.fwd", Device::kCpu).value();
  const Status st = kernel->Call({&tw, &gt.uniq_ptr, &gt.uniq_src, &trow}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(st.message().find("row_id[3]"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::kernel_test
