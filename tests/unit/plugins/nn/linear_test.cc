// nn.linear.fwd/.bwd (and nn.linear_gelu_tanh.fwd, the pair fused) against loops in double: several row blocks of X and
// several blocks of O (neither a multiple of the kernel's block), the += of dW and db, the skipped dX, and the same
// bits at 1 and 2 threads.
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class LinearTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LinearTest, FloatTypes);

// The inputs of one case, as T, and the loops' answers in double.
template <typename T>
struct LinearCase {
  int64_t n, k, o;
  std::vector<T> x, w, b, dy, dw0, db0;
  LinearCase(int64_t n_, int64_t k_, int64_t o_) : n(n_), k(k_), o(o_) {
    x = RandomValues<T>(n * k, 1);
    w = RandomValues<T>(o * k, 2);
    b = RandomValues<T>(o, 3);
    dy = RandomValues<T>(n * o, 4);
    dw0 = RandomValues<T>(o * k, 5);
    db0 = RandomValues<T>(o, 6);
  }
  std::vector<double> Y() const {
    std::vector<double> y(static_cast<size_t>(n * o));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < o; ++j) {
        double sum = static_cast<double>(b[j]);
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(x[i * k + p]) * static_cast<double>(w[j * k + p]);
        y[i * o + j] = sum;
      }
    }
    return y;
  }
  std::vector<double> DX() const {
    std::vector<double> dx(static_cast<size_t>(n * k), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < o; ++j) {
        for (int64_t p = 0; p < k; ++p)
          dx[i * k + p] += static_cast<double>(dy[i * o + j]) * static_cast<double>(w[j * k + p]);
      }
    }
    return dx;
  }
  // dW0 + `times` dY^T X
  std::vector<double> DW(int times) const {
    std::vector<double> dw(static_cast<size_t>(o * k), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < o; ++j) {
        for (int64_t p = 0; p < k; ++p)
          dw[j * k + p] += static_cast<double>(dy[i * o + j]) * static_cast<double>(x[i * k + p]);
      }
    }
    for (size_t e = 0; e < dw.size(); ++e) dw[e] = static_cast<double>(dw0[e]) + times * dw[e];
    return dw;
  }
  std::vector<double> DB(int times) const {
    std::vector<double> db(static_cast<size_t>(o), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < o; ++j) db[j] += static_cast<double>(dy[i * o + j]);
    }
    for (int64_t j = 0; j < o; ++j) db[j] = static_cast<double>(db0[j]) + times * db[j];
    return db;
  }
  // float: sums of up to a few hundred products of values in [-1, 1].
  double Tol(int64_t depth) const {
    return std::is_same_v<T, float> ? 2e-5 * std::sqrt(static_cast<double>(depth)) : 1e-11;
  }
};

template <typename T>
Tensor Forward(const LinearCase<T>& c, ThreadPool* pool) {
  Tensor x = MakeTensor<T>({c.n, c.k}, c.x), w = MakeTensor<T>({c.o, c.k}, c.w), b = MakeTensor<T>({c.o}, c.b);
  Tensor y = Filled<T>({c.n, c.o}, T(7));
  CallCpu("nn.linear.fwd", {&x, &w, &b}, {&y}, pool);
  return y;
}

struct Grads {
  Tensor dx, dw, db;
};

// `calls` backward calls into one dX, dW, db (dW and db start at dW0 and db0); dX with 0 rows when
// `skip_dx`.
template <typename T>
Grads Backward(const LinearCase<T>& c, ThreadPool* pool, int calls = 1, bool skip_dx = false) {
  Tensor dy = MakeTensor<T>({c.n, c.o}, c.dy), x = MakeTensor<T>({c.n, c.k}, c.x), w = MakeTensor<T>({c.o, c.k}, c.w);
  Grads g{Filled<T>({skip_dx ? 0 : c.n, c.k}, T(7)), MakeTensor<T>({c.o, c.k}, c.dw0), MakeTensor<T>({c.o}, c.db0)};
  for (int i = 0; i < calls; ++i) CallCpu("nn.linear.bwd", {&dy, &x, &w}, {&g.dx, &g.dw, &g.db}, pool);
  return g;
}

TYPED_TEST(LinearTest, ForwardMatchesLoops) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (const auto& [n, k, o] : {std::tuple{600, 37, 150}, std::tuple{5, 3, 2}, std::tuple{300, 0, 4}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " o " + std::to_string(o));
    const LinearCase<T> c(n, k, o);
    ExpectNear(ToVector<T>(Forward(c, &pool)), c.Y(), c.Tol(k), "Y");
  }
}

// nn.linear_gelu_tanh.fwd on the CPU is nn.linear.fwd, then nn.gelu_tanh.fwd: Pre and Y the same bits.
template <typename T>
void ExpectFusedIsThePair(Tensor x, Tensor w, Tensor b, int64_t n, int64_t o, ThreadPool* pool) {
  const auto empty = [&] { return Tensor::Empty(DTypeOf<T>(), {n, o}).value(); };
  Tensor pre = empty(), y = empty(), pair_pre = empty(), pair_y = empty();
  CallCpu("nn.linear_gelu_tanh.fwd", {&x, &w, &b}, {&y, &pre}, pool);
  CallCpu("nn.linear.fwd", {&x, &w, &b}, {&pair_pre}, pool);
  CallCpu("nn.gelu_tanh.fwd", {&pair_pre}, {&pair_y}, pool);
  EXPECT_EQ(std::memcmp(pre.raw(), pair_pre.raw(), pre.nbytes()), 0) << "Pre";
  EXPECT_EQ(std::memcmp(y.raw(), pair_y.raw(), y.nbytes()), 0) << "Y";
}

TYPED_TEST(LinearTest, FusedGeluIsTheLinearThenTheGelu) {
  using T = TypeParam;
  ThreadPool pool(2);
  for (const auto& [n, k, o] : {std::tuple{600, 37, 150}, std::tuple{5, 3, 2}, std::tuple{30, 0, 4}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " o " + std::to_string(o));
    const LinearCase<T> c(n, k, o);
    ExpectFusedIsThePair<T>(MakeTensor<T>({n, k}, c.x), MakeTensor<T>({o, k}, c.w), MakeTensor<T>({o}, c.b), n, o,
                            &pool);
  }
  // And against the formula in double, so the pair itself is checked too.
  const LinearCase<T> c(40, 16, 24);
  Tensor x = MakeTensor<T>({40, 16}, c.x), w = MakeTensor<T>({24, 16}, c.w), b = MakeTensor<T>({24}, c.b);
  Tensor pre = Filled<T>({40, 24}, T(0)), y = Filled<T>({40, 24}, T(0));
  CallCpu("nn.linear_gelu_tanh.fwd", {&x, &w, &b}, {&y, &pre}, &pool);
  std::vector<double> want = c.Y();
  for (double& v : want) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  ExpectNear(ToVector<T>(y), want, c.Tol(16) * 10, "Y");
}

TEST(LinearBf16, FusedGeluIsTheLinearThenTheGelu) {
  ThreadPool pool(2);
  const int64_t n = 70, k = 48, o = 40;
  ExpectFusedIsThePair<Bf16>(Bf16Tensor({n, k}, Bf16Representable(n * k, 1)),
                             Bf16Tensor({o, k}, Bf16Representable(o * k, 2)), Bf16Tensor({o}, Bf16Representable(o, 3)),
                             n, o, &pool);
}

TYPED_TEST(LinearTest, BackwardWritesDxAndAddsToDwAndDb) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (const auto& [n, k, o] : {std::tuple{600, 37, 150}, std::tuple{5, 3, 2}, std::tuple{0, 4, 3}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " o " + std::to_string(o));
    const LinearCase<T> c(n, k, o);
    const Grads g = Backward(c, &pool);
    ExpectNear(ToVector<T>(g.dx), c.DX(), c.Tol(o), "dX");
    ExpectNear(ToVector<T>(g.dw), c.DW(1), c.Tol(n), "dW");
    ExpectNear(ToVector<T>(g.db), c.DB(1), c.Tol(n), "db");
  }
}

// Parameter gradients accumulate over micro-batches: two calls add twice; dX is written, not added.
TYPED_TEST(LinearTest, TwoBackwardCallsAddTwice) {
  using T = TypeParam;
  ThreadPool pool(2);
  const LinearCase<T> c(300, 20, 140);
  const Grads g = Backward(c, &pool, 2);
  ExpectNear(ToVector<T>(g.dx), c.DX(), c.Tol(c.o), "dX");
  ExpectNear(ToVector<T>(g.dw), c.DW(2), c.Tol(c.n) * 2, "dW");
  ExpectNear(ToVector<T>(g.db), c.DB(2), c.Tol(c.n) * 2, "db");
}

// dX with 0 rows is skipped; dW and db are the same bits as with it.
TYPED_TEST(LinearTest, DxWithZeroRowsIsSkipped) {
  using T = TypeParam;
  ThreadPool pool(2);
  const LinearCase<T> c(600, 30, 150);
  const Grads with = Backward(c, &pool), without = Backward(c, &pool, 1, /*skip_dx=*/true);
  EXPECT_EQ(without.dx.numel(), 0);
  EXPECT_EQ(ToVector<T>(without.dw), ToVector<T>(with.dw));
  EXPECT_EQ(ToVector<T>(without.db), ToVector<T>(with.db));
}

TYPED_TEST(LinearTest, SameBitsAtOneAndTwoThreads) {
  using T = TypeParam;
  const LinearCase<T> c(1100, 64, 300);
  ThreadPool one(1), two(2);
  ASSERT_GT(PoolChunks(5, 1, 2), 1);  // 1100 rows are 5 blocks of the kernel's 256: they run on both threads
  EXPECT_EQ(ToVector<T>(Forward(c, &one)), ToVector<T>(Forward(c, &two)));
  const Grads a = Backward(c, &one), b = Backward(c, &two);
  EXPECT_EQ(ToVector<T>(a.dx), ToVector<T>(b.dx));
  EXPECT_EQ(ToVector<T>(a.dw), ToVector<T>(b.dw));
  EXPECT_EQ(ToVector<T>(a.db), ToVector<T>(b.db));
}

// The host checks the shapes against the schema before the kernel runs (the kernel checks them again).
TEST(LinearChecks, DxWithOtherRowsIsRefused) {
  Tensor dy = Filled<double>({4, 3}, 1.0), x = Filled<double>({4, 2}, 1.0), w = Filled<double>({3, 2}, 1.0);
  Tensor dx = Filled<double>({2, 2}, 0.0), dw = Filled<double>({3, 2}, 0.0), db = Filled<double>({3}, 0.0);
  const Status st = TryCallCpu("nn.linear.bwd", {&dy, &x, &w}, {&dx, &dw, &db}, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'dX'"), std::string::npos) << st.ToString();
  EXPECT_EQ(ToVector<double>(dw), std::vector<double>(6, 0.0));  // untouched
}

TEST(LinearChecks, WeightOfTheWrongWidthIsRefused) {
  Tensor x = Filled<double>({4, 3}, 1.0), w = Filled<double>({5, 2}, 1.0), b = Filled<double>({5}, 0.0);
  Tensor y = Filled<double>({4, 5}, 0.0);
  const Status st = TryCallCpu("nn.linear.fwd", {&x, &w, &b}, {&y}, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'W'"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tessel::kernel_test
