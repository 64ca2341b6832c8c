// rgnn.typed_gate.fwd/.bwd (HGT's gated skip) and rgnn.block_diag.fwd/.bwd (RGCN's block-diagonal
// weights) against naive loops, finite differences, bad inputs, and CUDA against CPU.
#include <gtest/gtest.h>
#include <tessel/ops/rgnn.h>

#include <cmath>
#include <cstring>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

// The kernels' grain: 1 << 14 elements per task, i.e. (1 << 14) / D rows (of D elements each).
constexpr int64_t RowGrain(int64_t d) { return (1 << 14) / d; }

using FloatTypes = ::testing::Types<float, double>;

std::vector<int32_t> RandomTypes(int64_t n, int32_t g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> types(static_cast<size_t>(n));
  for (int32_t& t : types) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(g));
  return types;
}

double Sigmoid(double s) { return 1.0 / (1.0 + std::exp(-s)); }

// ---------------------------------------------------------------------------------------------------
// rgnn.typed_gate

struct GateExpect {
  std::vector<double> y, d_o, dx, dskip;
};

template <typename T>
GateExpect NaiveGate(const std::vector<T>& dy, const std::vector<T>& o, const std::vector<T>& x,
                     const std::vector<T>& skip, const std::vector<int32_t>& types, int64_t n, int64_t d) {
  GateExpect e;
  e.y.resize(static_cast<size_t>(n * d));
  e.d_o.resize(e.y.size());
  e.dx.resize(e.y.size());
  e.dskip.assign(skip.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = types[i];
    const double b = Sigmoid(static_cast<double>(skip[t]));
    for (int64_t c = 0; c < d; ++c) {
      const int64_t k = i * d + c;
      const double ov = o[k], xv = x[k], g = dy[k];
      e.y[k] = b * ov + (1 - b) * xv;
      e.d_o[k] = b * g;
      e.dx[k] = (1 - b) * g;
      e.dskip[t] += g * (ov - xv) * b * (1 - b);
    }
  }
  return e;
}

template <typename T>
class TypedGateTest : public ::testing::Test {};
TYPED_TEST_SUITE(TypedGateTest, FloatTypes);

TYPED_TEST(TypedGateTest, ForwardAndBackwardMatchLoops) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t n = 10000, d = 8;
  const int32_t g = 5;
  ASSERT_GT(PoolChunks(n, RowGrain(d), 3), 1);  // the forward's row tasks
  // The backward's fixed row blocks: ceil(n / RowGrain(d)) of them, one task each.
  ASSERT_GT(PoolChunks((n + RowGrain(d) - 1) / RowGrain(d), 1, 3), 1);
  const auto o = RandomValues<T>(n * d, 1), x = RandomValues<T>(n * d, 2), dy = RandomValues<T>(n * d, 3);
  const auto skip = std::vector<T>{T(-1.5), T(0.0), T(0.7), T(3.0), T(-0.2)};
  auto types = RandomTypes(n, g, 4);
  for (int32_t& t : types) t = t == 4 ? 3 : t;  // type 4 has no rows: its dskip is 0
  const GateExpect e = NaiveGate(dy, o, x, skip, types, n, d);

  Tensor to = MakeTensor<T>({n, d}, o), tx = MakeTensor<T>({n, d}, x), tdy = MakeTensor<T>({n, d}, dy);
  Tensor tskip = MakeTensor<T>({g}, skip), ttypes = MakeTensor<int32_t>({n}, types);
  Tensor ty = Filled<T>({n, d}, T(9)), tdo = Filled<T>({n, d}, T(9)), tdx = Filled<T>({n, d}, T(9));
  Tensor tdskip = Filled<T>({g}, T(9));
  CallCpu("rgnn.typed_gate.fwd", {&to, &tx, &tskip, &ttypes}, {&ty}, &pool);
  CallCpu("rgnn.typed_gate.bwd", {&tdy, &to, &tx, &tskip, &ttypes}, {&tdo, &tdx, &tdskip}, &pool);
  ExpectNear(ToVector<T>(ty), e.y, Tolerance<T>(), "Y");
  ExpectNear(ToVector<T>(tdo), e.d_o, Tolerance<T>(), "dO");
  ExpectNear(ToVector<T>(tdx), e.dx, Tolerance<T>(), "dX");
  ExpectNear(ToVector<T>(tdskip), e.dskip, Tolerance<T>(), "dskip");
  EXPECT_EQ(ToVector<T>(tdskip)[4], T(0)) << "a type without rows must get a zero dskip";
}

TYPED_TEST(TypedGateTest, DskipIsBitIdenticalForAnyThreadCount) {
  using T = TypeParam;
  const int64_t n = 20000, d = 4;
  const int32_t g = 3;
  ASSERT_GT((n + RowGrain(d) - 1) / RowGrain(d), 2);  // several row blocks
  const auto o = RandomValues<T>(n * d, 1, -10, 10), x = RandomValues<T>(n * d, 2, -10, 10);
  const auto dy = RandomValues<T>(n * d, 3, -10, 10);
  Tensor to = MakeTensor<T>({n, d}, o), tx = MakeTensor<T>({n, d}, x), tdy = MakeTensor<T>({n, d}, dy);
  Tensor tskip = MakeTensor<T>({g}, std::vector<T>{T(0.3), T(-0.4), T(1.1)});
  Tensor ttypes = MakeTensor<int32_t>({n}, RandomTypes(n, g, 4));
  std::vector<std::vector<T>> results;
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    Tensor tdo = Filled<T>({n, d}, T(9)), tdx = Filled<T>({n, d}, T(9)), tdskip = Filled<T>({g}, T(9));
    CallCpu("rgnn.typed_gate.bwd", {&tdy, &to, &tx, &tskip, &ttypes}, {&tdo, &tdx, &tdskip}, &pool);
    results.push_back(ToVector<T>(tdskip));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(std::memcmp(results[i].data(), results[0].data(), results[0].size() * sizeof(T)), 0)
        << "dskip differs between 1 thread and " << (1 << i) << " threads";
  }
}

TEST(TypedGateGradientCheck, MatchesFiniteDifferences) {
  const int64_t n = 9, d = 3;
  const int32_t g = 3;
  auto o = RandomValues<double>(n * d, 1), x = RandomValues<double>(n * d, 2);
  auto skip = std::vector<double>{0.4, -1.2, 2.0};
  const std::vector<int32_t> types = {0, 1, 0, 0, 1, 1, 0, 1, 0};  // type 2 has no rows
  const auto gy = RandomValues<double>(n * d, 3);
  Tensor ttypes = MakeTensor<int32_t>({n}, types);
  auto objective = [&] {
    Tensor to = MakeTensor<double>({n, d}, o), tx = MakeTensor<double>({n, d}, x);
    Tensor tskip = MakeTensor<double>({g}, skip), ty = Filled<double>({n, d}, 0.0);
    CallCpu("rgnn.typed_gate.fwd", {&to, &tx, &tskip, &ttypes}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor to = MakeTensor<double>({n, d}, o), tx = MakeTensor<double>({n, d}, x), tskip = MakeTensor<double>({g}, skip);
  Tensor tdy = MakeTensor<double>({n, d}, gy);
  Tensor tdo = Filled<double>({n, d}, 5.0), tdx = Filled<double>({n, d}, 5.0), tdskip = Filled<double>({g}, 5.0);
  CallCpu("rgnn.typed_gate.bwd", {&tdy, &to, &tx, &tskip, &ttypes}, {&tdo, &tdx, &tdskip}, nullptr);
  ExpectNear(ToVector<double>(tdo), NumericGrad(o, objective), kGradTol, "dO");
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
  ExpectNear(ToVector<double>(tdskip), NumericGrad(skip, objective), kGradTol, "dskip");
}

TEST(TypedGateChecks, NodeTypeOutOfRangeIsBadData) {
  const int64_t n = 5, d = 2;
  const int32_t g = 3;
  for (int32_t bad : {3, -1}) {
    SCOPED_TRACE("type " + std::to_string(bad));
    Tensor to = Filled<double>({n, d}, 1.0), tx = Filled<double>({n, d}, 2.0), tdy = Filled<double>({n, d}, 1.0);
    Tensor tskip = Filled<double>({g}, 0.0), ttypes = MakeTensor<int32_t>({n}, {0, 2, 1, bad, 0});
    Tensor ty = Filled<double>({n, d}, 0.0), tdo = Filled<double>({n, d}, 0.0), tdx = Filled<double>({n, d}, 0.0);
    Tensor tdskip = Filled<double>({g}, 0.0);
    Status st = TryCallCpu("rgnn.typed_gate.fwd", {&to, &tx, &tskip, &ttypes}, {&ty}, nullptr);
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    EXPECT_NE(st.message().find("node_type[3]"), std::string::npos) << st.message();
    st = TryCallCpu("rgnn.typed_gate.bwd", {&tdy, &to, &tx, &tskip, &ttypes}, {&tdo, &tdx, &tdskip}, nullptr);
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    EXPECT_NE(st.message().find("node_type[3]"), std::string::npos) << st.message();
  }
}

// ---------------------------------------------------------------------------------------------------
// rgnn.block_diag

// W[r] = blockdiag(blocks[r, 0], ..., blocks[r, B-1]), zero elsewhere.
template <typename T>
std::vector<double> NaiveBlockDiag(const std::vector<T>& blocks, int64_t r, int64_t b, int64_t p, int64_t q) {
  const int64_t k = b * p, d = b * q;
  std::vector<double> w(static_cast<size_t>(r * k * d), 0.0);
  for (int64_t rel = 0; rel < r; ++rel) {
    for (int64_t blk = 0; blk < b; ++blk) {
      for (int64_t i = 0; i < p; ++i) {
        for (int64_t j = 0; j < q; ++j) {
          w[(rel * k + blk * p + i) * d + blk * q + j] = blocks[((rel * b + blk) * p + i) * q + j];
        }
      }
    }
  }
  return w;
}

// The diagonal blocks of dW.
template <typename T>
std::vector<double> NaiveDiagBlocks(const std::vector<T>& dw, int64_t r, int64_t b, int64_t p, int64_t q) {
  const int64_t k = b * p, d = b * q;
  std::vector<double> out(static_cast<size_t>(r * b * p * q));
  for (int64_t rel = 0; rel < r; ++rel) {
    for (int64_t blk = 0; blk < b; ++blk) {
      for (int64_t i = 0; i < p; ++i) {
        for (int64_t j = 0; j < q; ++j) {
          out[((rel * b + blk) * p + i) * q + j] = dw[(rel * k + blk * p + i) * d + blk * q + j];
        }
      }
    }
  }
  return out;
}

template <typename T>
class BlockDiagTest : public ::testing::Test {};
TYPED_TEST_SUITE(BlockDiagTest, FloatTypes);

TYPED_TEST(BlockDiagTest, ForwardBackwardAndRoundTrip) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t r = 64, b = 8, p = 20, q = 2, k = b * p, d = b * q;
  ASSERT_GT(PoolChunks(r * k, RowGrain(d), 3), 1);      // the forward's rows of W
  ASSERT_GT(PoolChunks(r * b * p, RowGrain(q), 3), 1);  // the backward's rows of dblocks
  const auto blocks = RandomValues<T>(r * b * p * q, 1);
  const auto dw = RandomValues<T>(r * k * d, 2);

  Tensor tblocks = MakeTensor<T>({r, b, p, q}, blocks), tw = Filled<T>({r, k, d}, T(7));
  CallCpu("rgnn.block_diag.fwd", {&tblocks}, {&tw}, &pool);
  const std::vector<T> w = ToVector<T>(tw);
  ExpectNear(w, NaiveBlockDiag(blocks, r, b, p, q), 0.0, "W");  // copies: exact
  // Every entry outside the diagonal blocks is zeroed, over the 7s the output held.
  int64_t off_diagonal_nonzero = 0;
  for (int64_t rel = 0; rel < r; ++rel) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        if (i / p != j / q && w[(rel * k + i) * d + j] != T(0)) ++off_diagonal_nonzero;
      }
    }
  }
  EXPECT_EQ(off_diagonal_nonzero, 0);

  Tensor tdw = MakeTensor<T>({r, k, d}, dw), tdblocks = Filled<T>({r, b, p, q}, T(7));
  CallCpu("rgnn.block_diag.bwd", {&tdw}, {&tdblocks}, &pool);
  ExpectNear(ToVector<T>(tdblocks), NaiveDiagBlocks(dw, r, b, p, q), 0.0, "dblocks");

  // bwd(fwd(blocks)) == blocks.
  Tensor round = Filled<T>({r, b, p, q}, T(7));
  CallCpu("rgnn.block_diag.bwd", {&tw}, {&round}, &pool);
  EXPECT_EQ(ToVector<T>(round), blocks);
}

TEST(BlockDiagChecks, ShapesThatDoNotMatchAreRefused) {
  // blocks [2, 3, 4, 5] need W [2, 12, 15].
  Tensor blocks = Filled<double>({2, 3, 4, 5}, 1.0);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 12, 14}, std::vector<int64_t>{2, 11, 15}}) {
    SCOPED_TRACE("W [" + std::to_string(shape[1]) + ", " + std::to_string(shape[2]) + "]");
    Tensor w = Filled<double>(shape, 0.0);
    Status st = TryCallCpu("rgnn.block_diag.fwd", {&blocks}, {&w}, nullptr);
    EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
    EXPECT_NE(st.message().find("[2, 3, 4, 5]"), std::string::npos) << st.message();
    Tensor dblocks = Filled<double>({2, 3, 4, 5}, 0.0);
    st = TryCallCpu("rgnn.block_diag.bwd", {&w}, {&dblocks}, nullptr);
    EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
    EXPECT_NE(st.message().find("[2, 3, 4, 5]"), std::string::npos) << st.message();
  }
}

// L = <fwd(blocks), G>: its gradient is bwd(G) (the backward is the adjoint of the forward).
TEST(BlockDiagGradientCheck, BackwardIsTheAdjoint) {
  const int64_t r = 2, b = 3, p = 2, q = 3, k = b * p, d = b * q;
  auto blocks = RandomValues<double>(r * b * p * q, 1);
  const auto gw = RandomValues<double>(r * k * d, 2);
  auto objective = [&] {
    Tensor tb = MakeTensor<double>({r, b, p, q}, blocks), tw = Filled<double>({r, k, d}, 0.0);
    CallCpu("rgnn.block_diag.fwd", {&tb}, {&tw}, nullptr);
    return Dot(tw, gw);
  };
  Tensor tg = MakeTensor<double>({r, k, d}, gw), tdb = Filled<double>({r, b, p, q}, 4.0);
  CallCpu("rgnn.block_diag.bwd", {&tg}, {&tdb}, nullptr);
  // <fwd(blocks), G> == <blocks, bwd(G)>.
  EXPECT_NEAR(objective(), Dot(MakeTensor<double>({r, b, p, q}, blocks), ToVector<double>(tdb)), 1e-12);
  ExpectNear(ToVector<double>(tdb), NumericGrad(blocks, objective), kGradTol, "dblocks");
}

// ---------------------------------------------------------------------------------------------------
// CUDA against CPU

template <typename T>
class SmallOpsCrossDeviceTest : public ::testing::Test {
 protected:
  // float: dskip sums rows in another order (and with atomics); double differs only by rounding.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }
};
TYPED_TEST_SUITE(SmallOpsCrossDeviceTest, FloatTypes);

TYPED_TEST(SmallOpsCrossDeviceTest, TypedGateFwd) {
  using T = TypeParam;
  RequireCudaKernels({"rgnn.typed_gate.fwd"});
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  const int64_t n = 3000, d = 37;
  const int32_t g = 4;
  CompareDevices("rgnn.typed_gate.fwd",
                 {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1)), MakeTensor<T>({n, d}, RandomValues<T>(n * d, 2)),
                  MakeTensor<T>({g}, RandomValues<T>(g, 3, -2, 2)), MakeTensor<int32_t>({n}, RandomTypes(n, g, 4))},
                 {Filled<T>({n, d}, T(3))}, this->Tol());
}

TYPED_TEST(SmallOpsCrossDeviceTest, TypedGateBwd) {
  using T = TypeParam;
  RequireCudaKernels({"rgnn.typed_gate.bwd"});
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  const int64_t n = 3000, d = 37;
  // Few types (per-block sums in shared memory) and more types than fit there (global atomics).
  for (int32_t g : {4, 3000}) {
    SCOPED_TRACE("types " + std::to_string(g));
    CompareDevices("rgnn.typed_gate.bwd",
                   {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 5)), MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1)),
                    MakeTensor<T>({n, d}, RandomValues<T>(n * d, 2)), MakeTensor<T>({g}, RandomValues<T>(g, 3, -2, 2)),
                    MakeTensor<int32_t>({n}, RandomTypes(n, g, 4))},
                   {Filled<T>({n, d}, T(3)), Filled<T>({n, d}, T(3)), Filled<T>({g}, T(3))}, this->Tol());
  }
}

TYPED_TEST(SmallOpsCrossDeviceTest, BlockDiagFwd) {
  using T = TypeParam;
  RequireCudaKernels({"rgnn.block_diag.fwd"});
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  const int64_t r = 7, b = 5, p = 6, q = 4;
  CompareDevices("rgnn.block_diag.fwd", {MakeTensor<T>({r, b, p, q}, RandomValues<T>(r * b * p * q, 1))},
                 {Filled<T>({r, b * p, b * q}, T(3))}, this->Tol());
}

TYPED_TEST(SmallOpsCrossDeviceTest, BlockDiagBwd) {
  using T = TypeParam;
  RequireCudaKernels({"rgnn.block_diag.bwd"});
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  const int64_t r = 7, b = 5, p = 6, q = 4, k = b * p, d = b * q;
  CompareDevices("rgnn.block_diag.bwd", {MakeTensor<T>({r, k, d}, RandomValues<T>(r * k * d, 1))},
                 {Filled<T>({r, b, p, q}, T(3))}, this->Tol());
}

}  // namespace
}  // namespace tessel::kernel_test
