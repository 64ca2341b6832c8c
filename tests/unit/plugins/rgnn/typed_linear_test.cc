// rgnn.typed_linear.fwd/.bwd against naive loops over the compact rows, in float and double.
#include <gtest/gtest.h>

#include "rgnn_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class TypedLinearTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TypedLinearTest, FloatTypes);

struct Dims {
  int64_t k = 5, d = 3;
};

// Y[u] = X[uniq_src[u]] @ W[r(u)], written out.
std::vector<double> NaiveForward(const Graph& g, const std::vector<double>& x, const std::vector<double>& w,
                                 const Dims& dims) {
  std::vector<double> y(static_cast<size_t>(g.num_uniq() * dims.d), 0.0);
  for (int64_t u = 0; u < g.num_uniq(); ++u) {
    const int64_t r = RelationOfUniq(g, u), src = g.uniq_src[u];
    for (int64_t j = 0; j < dims.d; ++j) {
      for (int64_t c = 0; c < dims.k; ++c) y[u * dims.d + j] += x[src * dims.k + c] * w[(r * dims.k + c) * dims.d + j];
    }
  }
  return y;
}

TYPED_TEST(TypedLinearTest, ForwardMatchesNaiveLoop) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Graph g = RandomGraph({}, seed);
    const Dims dims;
    const auto x = RandomValues<double>(g.m * dims.k, seed + 10),
               w = RandomValues<double>(g.r * dims.k * dims.d, seed + 20);
    GraphTensors gt = ToTensors<T>(g);
    Tensor tx = MakeTensor<T>({g.m, dims.k}, Cast<T>(x)), tw = MakeTensor<T>({g.r, dims.k, dims.d}, Cast<T>(w));
    Tensor ty = Filled<T>({g.num_uniq(), dims.d}, T(99));
    CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&ty}, &pool);
    ExpectNear(ToVector<T>(ty), NaiveForward(g, x, w, dims), Tolerance<T>(), "Y");
  }
}

TYPED_TEST(TypedLinearTest, BackwardMatchesNaiveLoops) {
  using T = TypeParam;
  ThreadPool pool(3);
  const Graph g = RandomGraph({.num_src_rows = 15, .num_dst = 8, .num_relations = 6, .num_edges = 60}, 7);
  const Dims dims{4, 6};
  const auto x = RandomValues<double>(g.m * dims.k, 11), w = RandomValues<double>(g.r * dims.k * dims.d, 12);
  const auto dy = RandomValues<double>(g.num_uniq() * dims.d, 13);
  // dW[r] = sum over u in r of X[src]^T dY[u]; dX[m] = sum over u with src m of dY[u] W[r]^T.
  std::vector<double> dw(static_cast<size_t>(g.r * dims.k * dims.d), 0.0), dx(static_cast<size_t>(g.m * dims.k), 0.0);
  for (int64_t u = 0; u < g.num_uniq(); ++u) {
    const int64_t r = RelationOfUniq(g, u), src = g.uniq_src[u];
    for (int64_t c = 0; c < dims.k; ++c) {
      for (int64_t j = 0; j < dims.d; ++j) {
        dw[(r * dims.k + c) * dims.d + j] += x[src * dims.k + c] * dy[u * dims.d + j];
        dx[src * dims.k + c] += dy[u * dims.d + j] * w[(r * dims.k + c) * dims.d + j];
      }
    }
  }
  GraphTensors gt = ToTensors<T>(g);
  Tensor tdy = MakeTensor<T>({g.num_uniq(), dims.d}, Cast<T>(dy));
  Tensor tx = MakeTensor<T>({g.m, dims.k}, Cast<T>(x)), tw = MakeTensor<T>({g.r, dims.k, dims.d}, Cast<T>(w));
  // Garbage in the outputs: the kernel must overwrite dW (including the empty relation's) and dX.
  Tensor tdx = Filled<T>({g.m, dims.k}, T(7)), tdw = Filled<T>({g.r, dims.k, dims.d}, T(7));
  CallCpu("rgnn.typed_linear.bwd", {&tdy, &tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&tdx, &tdw}, &pool);
  ExpectNear(ToVector<T>(tdw), dw, Tolerance<T>(), "dW");
  ExpectNear(ToVector<T>(tdx), dx, Tolerance<T>(), "dX");
}

// Wide layers shrink the GEMM row blocks to 32 rows, so a relation with ~100 compact rows spans several
// blocks whose dW contributions must add up, and whose dX rows come from several blocks' products.
TYPED_TEST(TypedLinearTest, LargeRelationsSpanSeveralRowBlocks) {
  using T = TypeParam;
  ThreadPool pool(3);
  const Graph g = RandomGraph(
      {.num_src_rows = 260, .num_dst = 50, .num_relations = 2, .num_edges = 500, .distinct_sources = 240}, 17);
  const Dims dims{64, 128};
  ASSERT_GT(g.uniq_ptr[1] - g.uniq_ptr[0], 64);
  const auto x = RandomValues<double>(g.m * dims.k, 1), w = RandomValues<double>(g.r * dims.k * dims.d, 2);
  const auto dy = RandomValues<double>(g.num_uniq() * dims.d, 3);
  std::vector<double> dw(static_cast<size_t>(g.r * dims.k * dims.d), 0.0), dx(static_cast<size_t>(g.m * dims.k), 0.0);
  for (int64_t u = 0; u < g.num_uniq(); ++u) {
    const int64_t r = RelationOfUniq(g, u), src = g.uniq_src[u];
    for (int64_t c = 0; c < dims.k; ++c) {
      for (int64_t j = 0; j < dims.d; ++j) {
        dw[(r * dims.k + c) * dims.d + j] += x[src * dims.k + c] * dy[u * dims.d + j];
        dx[src * dims.k + c] += dy[u * dims.d + j] * w[(r * dims.k + c) * dims.d + j];
      }
    }
  }
  GraphTensors gt = ToTensors<T>(g);
  Tensor tdy = MakeTensor<T>({g.num_uniq(), dims.d}, Cast<T>(dy));
  Tensor tx = MakeTensor<T>({g.m, dims.k}, Cast<T>(x)), tw = MakeTensor<T>({g.r, dims.k, dims.d}, Cast<T>(w));
  Tensor ty = Filled<T>({g.num_uniq(), dims.d}, T(7));
  CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&ty}, &pool);
  ExpectNear(ToVector<T>(ty), NaiveForward(g, x, w, dims), 10 * Tolerance<T>(), "Y");
  Tensor tdx = Filled<T>({g.m, dims.k}, T(7)), tdw = Filled<T>({g.r, dims.k, dims.d}, T(7));
  CallCpu("rgnn.typed_linear.bwd", {&tdy, &tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&tdx, &tdw}, &pool);
  ExpectNear(ToVector<T>(tdw), dw, 10 * Tolerance<T>(), "dW");
  ExpectNear(ToVector<T>(tdx), dx, 10 * Tolerance<T>(), "dX");
}

TYPED_TEST(TypedLinearTest, BackwardWithEmptyInputGradSkipsIt) {
  using T = TypeParam;
  const Graph g = RandomGraph({}, 5);
  const Dims dims;
  GraphTensors gt = ToTensors<T>(g);
  Tensor tdy = MakeTensor<T>({g.num_uniq(), dims.d}, RandomValues<T>(g.num_uniq() * dims.d, 1));
  Tensor tx = MakeTensor<T>({g.m, dims.k}, RandomValues<T>(g.m * dims.k, 2));
  Tensor tw = MakeTensor<T>({g.r, dims.k, dims.d}, RandomValues<T>(g.r * dims.k * dims.d, 3));
  Tensor skipped = Filled<T>({0, dims.k}, T(0)), tdw = Filled<T>({g.r, dims.k, dims.d}, T(7));
  CallCpu("rgnn.typed_linear.bwd", {&tdy, &tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&skipped, &tdw}, nullptr);
  // dW is the same as with dX requested.
  Tensor full_dx = Filled<T>({g.m, dims.k}, T(7)), full_dw = Filled<T>({g.r, dims.k, dims.d}, T(7));
  CallCpu("rgnn.typed_linear.bwd", {&tdy, &tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&full_dx, &full_dw}, nullptr);
  EXPECT_EQ(ToVector<T>(tdw), ToVector<T>(full_dw));
  EXPECT_NE(ToVector<T>(full_dx)[0], T(7));
}

TYPED_TEST(TypedLinearTest, SameResultWithoutPool) {
  using T = TypeParam;
  ThreadPool pool(4);
  const Graph g =
      RandomGraph({.num_src_rows = 40, .num_dst = 30, .num_relations = 7, .num_edges = 300, .distinct_sources = 35}, 9);
  const Dims dims{8, 8};
  GraphTensors gt = ToTensors<T>(g);
  Tensor tx = MakeTensor<T>({g.m, dims.k}, RandomValues<T>(g.m * dims.k, 4));
  Tensor tw = MakeTensor<T>({g.r, dims.k, dims.d}, RandomValues<T>(g.r * dims.k * dims.d, 5));
  Tensor serial = Filled<T>({g.num_uniq(), dims.d}, T(0)), parallel = Filled<T>({g.num_uniq(), dims.d}, T(0));
  CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&serial}, nullptr);
  CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&parallel}, &pool);
  EXPECT_EQ(ToVector<T>(serial), ToVector<T>(parallel));
}

TEST(TypedLinearChecks, OutOfRangeSourceIsBadData) {
  const Graph g = RandomGraph({}, 4);
  GraphTensors gt = ToTensors<double>(g);
  gt.uniq_src.data<int64_t>()[0] = g.m;  // one past the last input row
  Tensor tx = Filled<double>({g.m, 2}, 1.0), tw = Filled<double>({g.r, 2, 2}, 1.0);
  Tensor ty = Filled<double>({g.num_uniq(), 2}, 0.0);
  const workers::Kernel* kernel = BuiltinRegistry().Find("rgnn.typed_linear.fwd", Device::kCpu).value();
  const Status st = kernel->Call({&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(st.message().find("uniq_src[0]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rgnn.typed_linear.fwd"), std::string::npos) << st.message();
}

TEST(TypedLinearChecks, ShapeMismatchIsCaughtBeforeTheKernelRuns) {
  const Graph g = RandomGraph({}, 4);
  GraphTensors gt = ToTensors<double>(g);
  Tensor tx = Filled<double>({g.m, 2}, 1.0), tw = Filled<double>({g.r, 3, 2}, 1.0);  // K disagrees
  Tensor ty = Filled<double>({g.num_uniq(), 2}, 0.0);
  const workers::Kernel* kernel = BuiltinRegistry().Find("rgnn.typed_linear.fwd", Device::kCpu).value();
  const Status st = kernel->Call({&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("'W'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("K=2"), std::string::npos) << st.message();
}

TEST(TypedLinearChecks, MixedFloatDtypesAreRefused) {
  const Graph g = RandomGraph({}, 4);
  GraphTensors gt = ToTensors<double>(g);
  Tensor tx = Filled<double>({g.m, 2}, 1.0);
  Tensor tw = Filled<float>({g.r, 2, 2}, 1.0f);
  Tensor ty = Filled<double>({g.num_uniq(), 2}, 0.0);
  const workers::Kernel* kernel = BuiltinRegistry().Find("rgnn.typed_linear.fwd", Device::kCpu).value();
  const Status st = kernel->Call({&tx, &tw, &gt.uniq_ptr, &gt.uniq_src}, {&ty}, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("T is f64"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::kernel_test
