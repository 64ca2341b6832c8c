// rgnn.aggregate.fwd/.bwd against per-edge loops, and a whole RGCN layer (typed linear, aggregation)
// against the textbook per-edge formula H[dst] += norm * X[src] @ W[rel].
#include <gtest/gtest.h>

#include "rgnn_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class AggregateTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AggregateTest, FloatTypes);

TYPED_TEST(AggregateTest, ForwardMatchesPerEdgeSum) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Graph g = RandomGraph({}, seed);
    const int64_t d = 4;
    const auto y = RandomValues<double>(g.num_uniq() * d, seed);
    std::vector<double> h(static_cast<size_t>(g.n * d), 0.0);
    for (int64_t e = 0; e < g.num_edges(); ++e) {
      for (int64_t j = 0; j < d; ++j) h[g.dst[e] * d + j] += g.norm[e] * y[g.edge_uniq[e] * d + j];
    }
    GraphTensors gt = ToTensors<T>(g);
    Tensor ty = MakeTensor<T>({g.num_uniq(), d}, Cast<T>(y)), th = Filled<T>({g.n, d}, T(5));
    CallCpu("rgnn.aggregate.fwd", {&ty, &gt.edge_uniq, &gt.norm, &gt.dst_ptr, &gt.dst_edges}, {&th}, &pool);
    ExpectNear(ToVector<T>(th), h, Tolerance<T>(), "H");
    // The isolated destination (the last row) is exactly zero.
    for (int64_t j = 0; j < d; ++j) EXPECT_EQ(ToVector<T>(th)[(g.n - 1) * d + j], T(0));
  }
}

TYPED_TEST(AggregateTest, BackwardMatchesPerEdgeSum) {
  using T = TypeParam;
  ThreadPool pool(3);
  const Graph g = RandomGraph({.num_src_rows = 20, .num_dst = 11, .num_relations = 4, .num_edges = 70}, 8);
  const int64_t d = 3;
  const auto dh = RandomValues<double>(g.n * d, 3);
  // Scan every edge by its compact row (not the uniq_edge_ptr ranges the kernel uses).
  std::vector<double> dy(static_cast<size_t>(g.num_uniq() * d), 0.0);
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    for (int64_t j = 0; j < d; ++j) dy[g.edge_uniq[e] * d + j] += g.norm[e] * dh[g.dst[e] * d + j];
  }
  GraphTensors gt = ToTensors<T>(g);
  Tensor tdh = MakeTensor<T>({g.n, d}, Cast<T>(dh)), tdy = Filled<T>({g.num_uniq(), d}, T(5));
  CallCpu("rgnn.aggregate.bwd", {&tdh, &gt.dst, &gt.norm, &gt.uniq_edge_ptr}, {&tdy}, &pool);
  ExpectNear(ToVector<T>(tdy), dy, Tolerance<T>(), "dY");
}

TYPED_TEST(AggregateTest, RgcnLayerMatchesPerEdgeFormula) {
  using T = TypeParam;
  ThreadPool pool(2);
  const Graph g = RandomGraph(
      {.num_src_rows = 30, .num_dst = 17, .num_relations = 6, .num_edges = 120, .distinct_sources = 12}, 21);
  const int64_t k = 7, d = 5;
  const auto x = RandomValues<double>(g.m * k, 1), w = RandomValues<double>(g.r * k * d, 2);
  std::vector<double> h(static_cast<size_t>(g.n * d), 0.0);
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    for (int64_t j = 0; j < d; ++j) {
      double xw = 0.0;
      for (int64_t c = 0; c < k; ++c) xw += x[g.src[e] * k + c] * w[(g.rel[e] * k + c) * d + j];
      h[g.dst[e] * d + j] += g.norm[e] * xw;
    }
  }
  GraphTensors gt = ToTensors<T>(g);
  Tensor tx = MakeTensor<T>({g.m, k}, Cast<T>(x)), tw = MakeTensor<T>({g.r, k, d}, Cast<T>(w));
  Tensor ty = Filled<T>({g.num_uniq(), d}, T(0)), th = Filled<T>({g.n, d}, T(0));
  CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&ty}, &pool);
  CallCpu("rgnn.aggregate.fwd", {&ty, &gt.edge_uniq, &gt.norm, &gt.dst_ptr, &gt.dst_edges}, {&th}, &pool);
  ExpectNear(ToVector<T>(th), h, 5 * Tolerance<T>(), "H");
  // Compact materialization: fewer typed-linear rows than edges on this graph.
  EXPECT_LT(g.num_uniq(), g.num_edges());
}

TEST(AggregateChecks, BrokenDestinationOffsetsAreBadData) {
  const Graph g = RandomGraph({}, 3);
  GraphTensors gt = ToTensors<double>(g);
  gt.dst_ptr.data<int64_t>()[g.n] = g.num_edges() - 1;
  Tensor ty = Filled<double>({g.num_uniq(), 2}, 1.0), th = Filled<double>({g.n, 2}, 0.0);
  const workers::Kernel* kernel = BuiltinRegistry().Find("rgnn.aggregate.fwd", Device::kCpu).value();
  const Status st = kernel->Call({&ty, &gt.edge_uniq, &gt.norm, &gt.dst_ptr, &gt.dst_edges}, {&th}, nullptr);
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(st.message().find("dst_ptr"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::kernel_test
