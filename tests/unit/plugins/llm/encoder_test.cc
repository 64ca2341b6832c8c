// llm.encoder.fwd/.bwd (token plus position embedding, and its scatter-add adjoint) against naive
// loops, the += semantics of the backward, its determinism across thread counts, bad tokens, S > P,
// and finite differences.
#include <gtest/gtest.h>
#include <tessel/ops/llm.h>

#include "llm_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class EncoderTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(EncoderTest, FloatTypes);

// Tokens with repeats (a few hot ids), so the backward sums several rows into one row of dwte.
std::vector<int32_t> HotTokens(int64_t n, int32_t v, uint64_t seed) {
  std::vector<int32_t> tokens = RandomTokens(n, v, seed);
  for (size_t i = 0; i < tokens.size(); i += 3) tokens[i] = static_cast<int32_t>(i % 2);
  return tokens;
}

TYPED_TEST(EncoderTest, ForwardAddsTokenAndPositionRows) {
  using T = TypeParam;
  ThreadPool pool(2);
  const int64_t v = 11, p = 20, b = 2, s = 17, c = 24;
  const auto wte = RandomValues<T>(v * c, 1), wpe = RandomValues<T>(p * c, 2);
  const auto tokens = HotTokens(b * s, static_cast<int32_t>(v), 3);
  std::vector<double> y(static_cast<size_t>(b * s * c));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t t = 0; t < s; ++t) {
      for (int64_t j = 0; j < c; ++j) {
        y[(bi * s + t) * c + j] = static_cast<double>(static_cast<T>(wte[tokens[bi * s + t] * c + j] + wpe[t * c + j]));
      }
    }
  }
  Tensor twte = MakeTensor<T>({v, c}, wte), twpe = MakeTensor<T>({p, c}, wpe);
  Tensor ttok = MakeTensor<int32_t>({b, s}, tokens), ty = Filled<T>({b, s, c}, T(7));
  CallLlm("llm.encoder.fwd", {&twte, &twpe, &ttok}, {&ty}, &pool);
  ExpectNear(ToVector<T>(ty), y, 0.0, "Y");  // one rounded add: exact
}

TYPED_TEST(EncoderTest, BackwardAddsIntoTheGradients) {
  using T = TypeParam;
  ThreadPool pool(2);
  const int64_t v = 7, p = 9, b = 3, s = 9, c = 130;  // three column chunks of 64
  const auto dy = RandomValues<T>(b * s * c, 4);
  const auto tokens = HotTokens(b * s, static_cast<int32_t>(v), 5);
  const auto dwte0 = RandomValues<T>(v * c, 6), dwpe0 = RandomValues<T>(p * c, 7);
  std::vector<double> dwte(dwte0.begin(), dwte0.end()), dwpe(dwpe0.begin(), dwpe0.end());
  for (int64_t r = 0; r < b * s; ++r) {
    for (int64_t j = 0; j < c; ++j) {
      dwte[tokens[r] * c + j] += static_cast<double>(dy[r * c + j]);
      dwpe[(r % s) * c + j] += static_cast<double>(dy[r * c + j]);
    }
  }
  Tensor tdy = MakeTensor<T>({b, s, c}, dy), ttok = MakeTensor<int32_t>({b, s}, tokens);
  Tensor tdwte = MakeTensor<T>({v, c}, dwte0), tdwpe = MakeTensor<T>({p, c}, dwpe0);
  CallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&tdwte, &tdwpe}, &pool);
  ExpectNear(ToVector<T>(tdwte), dwte, Tolerance<T>(), "dwte");
  ExpectNear(ToVector<T>(tdwpe), dwpe, Tolerance<T>(), "dwpe");
}

TYPED_TEST(EncoderTest, BackwardTwiceDoublesTheGradients) {
  using T = TypeParam;
  const int64_t v = 5, p = 6, b = 2, s = 6, c = 8;
  Tensor tdy = MakeTensor<T>({b, s, c}, RandomValues<T>(b * s * c, 8));
  Tensor ttok = MakeTensor<int32_t>({b, s}, HotTokens(b * s, static_cast<int32_t>(v), 9));
  Tensor once_te = Filled<T>({v, c}, T(0)), once_pe = Filled<T>({p, c}, T(0));
  CallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&once_te, &once_pe}, nullptr);
  Tensor twice_te = Filled<T>({v, c}, T(0)), twice_pe = Filled<T>({p, c}, T(0));
  CallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&twice_te, &twice_pe}, nullptr);
  CallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&twice_te, &twice_pe}, nullptr);
  // Rows with repeated tokens sum in another order the second time: equal to 2x up to rounding.
  std::vector<double> doubled_te, doubled_pe;
  for (T x : ToVector<T>(once_te)) doubled_te.push_back(2.0 * static_cast<double>(x));
  for (T x : ToVector<T>(once_pe)) doubled_pe.push_back(2.0 * static_cast<double>(x));
  ExpectNear(ToVector<T>(twice_te), doubled_te, Tolerance<T>(), "dwte");
  ExpectNear(ToVector<T>(twice_pe), doubled_pe, Tolerance<T>(), "dwpe");
}

TYPED_TEST(EncoderTest, BackwardIsBitIdenticalForAnyThreadCount) {
  using T = TypeParam;
  const int64_t v = 50, p = 64, b = 8, s = 64, c = 320;  // five column chunks
  ASSERT_GT(PoolChunks((c + 63) / 64, 1, 2), 1);
  Tensor tdy = MakeTensor<T>({b, s, c}, RandomValues<T>(b * s * c, 10, -10, 10));
  Tensor ttok = MakeTensor<int32_t>({b, s}, HotTokens(b * s, static_cast<int32_t>(v), 11));
  std::vector<std::vector<T>> te, pe;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    Tensor tdwte = Filled<T>({v, c}, T(0.5)), tdwpe = Filled<T>({p, c}, T(0.25));
    CallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&tdwte, &tdwpe}, &pool);
    te.push_back(ToVector<T>(tdwte));
    pe.push_back(ToVector<T>(tdwpe));
  }
  EXPECT_TRUE(SameBits(te[0], te[1])) << "dwte differs between 1 and 2 threads";
  EXPECT_TRUE(SameBits(pe[0], pe[1])) << "dwpe differs between 1 and 2 threads";
}

TEST(EncoderChecks, TokenOutOfRangeIsBadData) {
  const int64_t v = 6, p = 4, b = 2, s = 3, c = 2;
  for (int32_t bad : {6, -1}) {
    SCOPED_TRACE("token " + std::to_string(bad));
    Tensor twte = Filled<double>({v, c}, 1.0), twpe = Filled<double>({p, c}, 1.0);
    Tensor ttok = MakeTensor<int32_t>({b, s}, {0, 5, 1, 2, 3, bad});  // position [1, 2]
    Tensor ty = Filled<double>({b, s, c}, 0.0);
    Status st = TryCallLlm("llm.encoder.fwd", {&twte, &twpe, &ttok}, {&ty}, nullptr);
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    for (const std::string& part : {std::string("llm.encoder.fwd"), std::string("tokens[1, 2]"), std::to_string(bad)}) {
      EXPECT_NE(st.message().find(part), std::string::npos) << part << " not in: " << st.message();
    }
    Tensor tdy = Filled<double>({b, s, c}, 1.0), tdwte = Filled<double>({v, c}, 0.0),
           tdwpe = Filled<double>({p, c}, 0.0);
    st = TryCallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&tdwte, &tdwpe}, nullptr);
    EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
    EXPECT_NE(st.message().find("llm.encoder.bwd: tokens[1, 2] = " + std::to_string(bad)), std::string::npos)
        << st.message();
    EXPECT_EQ(ToVector<double>(tdwte), std::vector<double>(v * c, 0.0)) << "nothing is added on bad data";
  }
}

TEST(EncoderChecks, MorePositionsThanWpeRowsIsInvalid) {
  const int64_t v = 6, p = 4, b = 1, s = 5, c = 2;
  Tensor twte = Filled<double>({v, c}, 1.0), twpe = Filled<double>({p, c}, 1.0);
  Tensor ttok = Filled<int32_t>({b, s}, 1), ty = Filled<double>({b, s, c}, 0.0);
  Status st = TryCallLlm("llm.encoder.fwd", {&twte, &twpe, &ttok}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  Tensor tdy = Filled<double>({b, s, c}, 1.0), tdwte = Filled<double>({v, c}, 0.0), tdwpe = Filled<double>({p, c}, 0.0);
  st = TryCallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&tdwte, &tdwpe}, nullptr);
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
}

// dL/dwte and dL/dwpe of L = sum(G * Y) by central differences, against the backward from dY = G.
TEST(EncoderGradientCheck, MatchesFiniteDifferences) {
  const int64_t v = 5, p = 7, b = 2, s = 6, c = 3;
  auto wte = RandomValues<double>(v * c, 1), wpe = RandomValues<double>(p * c, 2);
  const auto g = RandomValues<double>(b * s * c, 3);
  Tensor ttok = MakeTensor<int32_t>({b, s}, {2, 0, 2, 4, 2, 0, 1, 1, 0, 2, 4, 4});  // token 3 unused
  auto objective = [&] {
    Tensor twte = MakeTensor<double>({v, c}, wte), twpe = MakeTensor<double>({p, c}, wpe);
    Tensor ty = Filled<double>({b, s, c}, 0.0);
    CallLlm("llm.encoder.fwd", {&twte, &twpe, &ttok}, {&ty}, nullptr);
    return Dot(ty, g);
  };
  Tensor tdy = MakeTensor<double>({b, s, c}, g), tdwte = Filled<double>({v, c}, 0.0);
  Tensor tdwpe = Filled<double>({p, c}, 0.0);
  CallLlm("llm.encoder.bwd", {&tdy, &ttok}, {&tdwte, &tdwpe}, nullptr);
  ExpectNear(ToVector<double>(tdwte), NumericGrad(wte, objective), kGradTol, "dwte");
  ExpectNear(ToVector<double>(tdwpe), NumericGrad(wpe, objective), kGradTol, "dwpe");
}

}  // namespace
}  // namespace tessel::kernel_test
