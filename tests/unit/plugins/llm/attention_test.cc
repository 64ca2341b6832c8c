// llm.attention.fwd/.bwd against llm.c's attention loops in double (the full S x S softmax matrix and
// its Jacobian), the written (not added) dqkv, determinism across thread counts, the shape checks, and
// finite differences. The kernels work in tiles of 64 queries by 64 keys (attention_cpu.cc), so the
// shapes include sequences of 1, 63, 64, 65, 130 and 150 positions and odd head sizes.
#include <gtest/gtest.h>
#include <tessel/ops/llm.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "llm_test_util.h"

namespace tessel::kernel_test {
namespace {

struct Shape {
  int64_t b, s, c, h;
};

tessel_attention_params Heads(int64_t h) { return {sizeof(tessel_attention_params), static_cast<int32_t>(h)}; }

struct AttentionRef {
  std::vector<double> y, lse, dqkv;
};

// llm.c attention_forward and attention_backward, in double, with the row's log-sum-exp kept.
template <typename T>
AttentionRef Reference(const Shape& sh, const std::vector<T>& qkv, const std::vector<T>& dy) {
  const int64_t b = sh.b, s = sh.s, c = sh.c, h = sh.h, hs = c / h, q3 = 3 * c;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  AttentionRef ref{std::vector<double>(static_cast<size_t>(b * s * c), 0.0),
                   std::vector<double>(static_cast<size_t>(b * h * s), 0.0),
                   std::vector<double>(static_cast<size_t>(b * s * q3), 0.0)};
  auto at = [&](int64_t bi, int64_t t, int64_t part, int64_t hi) { return (bi * s + t) * q3 + part * c + hi * hs; };
  std::vector<double> att(static_cast<size_t>(s)), datt(static_cast<size_t>(s));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t i = 0; i < s; ++i) {
        double max = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hs; ++d) dot += double(qkv[at(bi, i, 0, hi) + d]) * double(qkv[at(bi, j, 1, hi) + d]);
          att[j] = dot * scale;
          max = std::max(max, att[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (att[j] = std::exp(att[j] - max));
        for (int64_t j = 0; j <= i; ++j) att[j] /= sum;
        ref.lse[(bi * h + hi) * s + i] = max + std::log(sum);
        double* yi = &ref.y[(bi * s + i) * c + hi * hs];
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < hs; ++d) yi[d] += att[j] * double(qkv[at(bi, j, 2, hi) + d]);
        }
        if (dy.empty()) continue;
        // backward of y_i = sum_j att_j v_j, then of the softmax, then of the scores
        const T* dyi = &dy[(bi * s + i) * c + hi * hs];
        for (int64_t j = 0; j <= i; ++j) {
          datt[j] = 0;
          for (int64_t d = 0; d < hs; ++d) {
            datt[j] += double(qkv[at(bi, j, 2, hi) + d]) * double(dyi[d]);
            ref.dqkv[at(bi, j, 2, hi) + d] += att[j] * double(dyi[d]);
          }
        }
        for (int64_t j = 0; j <= i; ++j) {
          double dpre = 0;
          for (int64_t k = 0; k <= i; ++k) dpre += att[k] * ((j == k ? 1.0 : 0.0) - att[j]) * datt[k];
          for (int64_t d = 0; d < hs; ++d) {
            ref.dqkv[at(bi, i, 0, hi) + d] += double(qkv[at(bi, j, 1, hi) + d]) * dpre * scale;
            ref.dqkv[at(bi, j, 1, hi) + d] += double(qkv[at(bi, i, 0, hi) + d]) * dpre * scale;
          }
        }
      }
    }
  }
  return ref;
}

template <typename T>
class AttentionTest : public ::testing::Test {
 protected:
  // float: sums of up to S products and a polynomial exp against double loops.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-11; }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AttentionTest, FloatTypes);

// Small shapes; sequences at and across the kernels' tile edges (64 queries by 64 keys: S = 63, 64 and 65,
// S = 130 with a last tile of 2 rows, S = 1); odd head sizes (C 15 H 3 is hs 5; C 3 H 3 is hs 1); and
// GPT-2's head size 64 over 3 tiles.
const std::vector<Shape> kShapes = {{2, 5, 8, 2},    {2, 17, 24, 4}, {1, 9, 12, 3},   {2, 130, 16, 2},
                                    {2, 1, 15, 3},   {1, 63, 15, 3}, {1, 64, 15, 3},  {2, 65, 15, 3},
                                    {1, 130, 15, 3}, {1, 70, 3, 3},  {1, 150, 128, 2}};

std::string Name(const Shape& sh) {
  return "B " + std::to_string(sh.b) + " S " + std::to_string(sh.s) + " C " + std::to_string(sh.c) + " H " +
         std::to_string(sh.h);
}

TYPED_TEST(AttentionTest, ForwardMatchesReference) {
  using T = TypeParam;
  ThreadPool pool(2);
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(Name(sh));
    const auto qkv = RandomValues<T>(sh.b * sh.s * 3 * sh.c, 1, -2, 2);
    const AttentionRef ref = Reference<T>(sh, qkv, {});
    Tensor tqkv = MakeTensor<T>({sh.b, sh.s, 3 * sh.c}, qkv);
    Tensor ty = Filled<T>({sh.b, sh.s, sh.c}, T(7)), tlse = Filled<T>({sh.b, sh.h, sh.s}, T(7));
    CallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(sh.h), &pool);
    ExpectNear(ToVector<T>(ty), ref.y, this->Tol(), "Y");
    ExpectNear(ToVector<T>(tlse), ref.lse, this->Tol(), "lse");
  }
}

TYPED_TEST(AttentionTest, BackwardMatchesReferenceAndWritesEveryElement) {
  using T = TypeParam;
  ThreadPool pool(2);
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(Name(sh));
    const auto qkv = RandomValues<T>(sh.b * sh.s * 3 * sh.c, 2, -2, 2);
    const auto dy = RandomValues<T>(sh.b * sh.s * sh.c, 3);
    const AttentionRef ref = Reference<T>(sh, qkv, dy);
    Tensor tqkv = MakeTensor<T>({sh.b, sh.s, 3 * sh.c}, qkv), tdy = MakeTensor<T>({sh.b, sh.s, sh.c}, dy);
    Tensor ty = Filled<T>({sh.b, sh.s, sh.c}, T(0)), tlse = Filled<T>({sh.b, sh.h, sh.s}, T(0));
    CallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(sh.h), &pool);
    // Written twice over a buffer of garbage: the second call must not add to the first.
    Tensor tdqkv = Filled<T>({sh.b, sh.s, 3 * sh.c}, std::numeric_limits<T>::quiet_NaN());
    for (int call = 0; call < 2; ++call) {
      CallLlmWith("llm.attention.bwd", {&tdy, &tqkv, &ty, &tlse}, {&tdqkv}, Heads(sh.h), &pool);
      ExpectNear(ToVector<T>(tdqkv), ref.dqkv, this->Tol(), "dqkv, call " + std::to_string(call + 1));
    }
  }
}

TYPED_TEST(AttentionTest, IsBitIdenticalForAnyThreadCount) {
  using T = TypeParam;
  const Shape sh{2, 200, 32, 2};  // 4 sequences x heads, 4 query blocks each
  ASSERT_GT(PoolChunks(sh.b * sh.h * 4, 1, 2), 1);
  ASSERT_GT(PoolChunks(sh.b * sh.h, 1, 2), 1);
  Tensor tqkv = MakeTensor<T>({sh.b, sh.s, 3 * sh.c}, RandomValues<T>(sh.b * sh.s * 3 * sh.c, 4, -3, 3));
  Tensor tdy = MakeTensor<T>({sh.b, sh.s, sh.c}, RandomValues<T>(sh.b * sh.s * sh.c, 5));
  std::vector<std::vector<T>> results[2];
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    Tensor ty = Filled<T>({sh.b, sh.s, sh.c}, T(0)), tlse = Filled<T>({sh.b, sh.h, sh.s}, T(0));
    CallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(sh.h), &pool);
    Tensor tdqkv = Filled<T>({sh.b, sh.s, 3 * sh.c}, T(0));
    CallLlmWith("llm.attention.bwd", {&tdy, &tqkv, &ty, &tlse}, {&tdqkv}, Heads(sh.h), &pool);
    results[threads - 1] = std::vector<std::vector<T>>{ToVector<T>(ty), ToVector<T>(tlse), ToVector<T>(tdqkv)};
  }
  const char* names[] = {"Y", "lse", "dqkv"};
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_TRUE(SameBits(results[0][i], results[1][i])) << names[i] << " differs between 1 and 2 threads";
  }
}

// The online softmax over 4 key tiles (rescaled as a row's max grows) against the one-pass softmax of the
// reference: in double they differ only by rounding.
TEST(AttentionForward, ManyTilesMatchReferenceTo1e12) {
  const Shape sh{2, 200, 24, 3};  // 4 query tiles of up to 4 key tiles, hs 8
  const auto qkv = RandomValues<double>(sh.b * sh.s * 3 * sh.c, 8, -3, 3);
  const AttentionRef ref = Reference<double>(sh, qkv, {});
  Tensor tqkv = MakeTensor<double>({sh.b, sh.s, 3 * sh.c}, qkv);
  Tensor ty = Filled<double>({sh.b, sh.s, sh.c}, 7.0), tlse = Filled<double>({sh.b, sh.h, sh.s}, 7.0);
  ThreadPool pool(2);
  CallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(sh.h), &pool);
  ExpectNear(ToVector<double>(ty), ref.y, 1e-12, "Y");
  ExpectNear(ToVector<double>(tlse), ref.lse, 1e-12, "lse");
}

TEST(AttentionChecks, BadShapesAreInvalid) {
  struct Case {
    const char* what;
    int64_t c, q, h;
  };
  for (const Case& k : {Case{"C not divisible by heads", 10, 30, 3}, Case{"Q != 3C", 12, 30, 3},
                        Case{"no heads", 12, 36, 0}, Case{"more heads than C", 2, 6, 4}}) {
    SCOPED_TRACE(k.what);
    const int64_t b = 1, s = 4;
    Tensor tqkv = Filled<double>({b, s, k.q}, 0.5), ty = Filled<double>({b, s, k.c}, 0.0);
    Tensor tlse = Filled<double>({b, std::max<int64_t>(k.h, 1), s}, 0.0);
    Status st = TryCallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(k.h), nullptr);
    EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
    EXPECT_NE(st.message().find("llm.attention.fwd"), std::string::npos) << st.message();
    Tensor tdy = Filled<double>({b, s, k.c}, 1.0), tdqkv = Filled<double>({b, s, k.q}, 0.0);
    st = TryCallLlmWith("llm.attention.bwd", {&tdy, &tqkv, &ty, &tlse}, {&tdqkv}, Heads(k.h), nullptr);
    EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
    EXPECT_NE(st.message().find("llm.attention.bwd"), std::string::npos) << st.message();
  }
}

TEST(AttentionChecks, LseWithOtherHeadsThanTheParameterIsInvalid) {
  Tensor tqkv = Filled<double>({1, 4, 24}, 0.5), ty = Filled<double>({1, 4, 8}, 0.0);
  Tensor tlse = Filled<double>({1, 4, 4}, 0.0);  // 4 heads; the parameter says 2
  const Status st = TryCallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(2), nullptr);
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
}

// dL/dqkv of L = sum(G * Y) by central differences, against the backward from dY = G (double). dqkv
// starts as NaN: the backward must write every element.
void ExpectGradientMatchesFiniteDifferences(const Shape& sh, std::vector<double> qkv, const std::vector<double>& g) {
  Tensor ty = Filled<double>({sh.b, sh.s, sh.c}, 0.0), tlse = Filled<double>({sh.b, sh.h, sh.s}, 0.0);
  auto objective = [&] {
    Tensor tqkv = MakeTensor<double>({sh.b, sh.s, 3 * sh.c}, qkv);
    CallLlmWith("llm.attention.fwd", {&tqkv}, {&ty, &tlse}, Heads(sh.h), nullptr);
    return Dot(ty, g);
  };
  objective();  // Y and lse of the unperturbed input
  Tensor tqkv = MakeTensor<double>({sh.b, sh.s, 3 * sh.c}, qkv), tdy = MakeTensor<double>({sh.b, sh.s, sh.c}, g);
  Tensor tdqkv = Filled<double>({sh.b, sh.s, 3 * sh.c}, std::numeric_limits<double>::quiet_NaN());
  CallLlmWith("llm.attention.bwd", {&tdy, &tqkv, &ty, &tlse}, {&tdqkv}, Heads(sh.h), nullptr);
  ExpectNear(ToVector<double>(tdqkv), NumericGrad(qkv, objective), kGradTol, "dqkv");
}

TEST(AttentionGradientCheck, MatchesFiniteDifferences) {
  for (const Shape& sh : {Shape{1, 5, 8, 2}, Shape{2, 4, 6, 3}}) {
    SCOPED_TRACE(Name(sh));
    ExpectGradientMatchesFiniteDifferences(sh, RandomValues<double>(sh.b * sh.s * 3 * sh.c, 6, -2, 2),
                                           RandomValues<double>(sh.b * sh.s * sh.c, 7));
  }
}

// S = 70 is 2 query tiles by 2 key tiles: the first query tile skips the second key tile (above the
// diagonal), the second meets both, the diagonal ones masked. The keys grow along the sequence and the
// queries are positive, so rows of the second query tile find a larger max in the second key tile and
// rescale what the first one summed (asserted below, so the check cannot pass without it).
TEST(AttentionGradientCheck, MatchesFiniteDifferencesAcrossTiles) {
  const Shape sh{1, 70, 6, 2};
  const int64_t hs = sh.c / sh.h;
  auto qkv = RandomValues<double>(sh.b * sh.s * 3 * sh.c, 9, -1, 1);
  for (int64_t t = 0; t < sh.s; ++t) {
    for (int64_t d = 0; d < sh.c; ++d) {
      double& query = qkv[static_cast<size_t>(t * 3 * sh.c + d)];
      query = std::abs(query) + 0.2;
      qkv[static_cast<size_t>(t * 3 * sh.c + sh.c + d)] += 0.03 * static_cast<double>(t);
    }
  }
  for (int64_t hi = 0; hi < sh.h; ++hi) {
    auto score = [&](int64_t i, int64_t j) {
      double dot = 0;
      for (int64_t d = 0; d < hs; ++d) {
        dot += qkv[static_cast<size_t>(i * 3 * sh.c + hi * hs + d)] *
               qkv[static_cast<size_t>(j * 3 * sh.c + sh.c + hi * hs + d)];
      }
      return dot;
    };
    int64_t rescaled_rows = 0;
    for (int64_t i = 64; i < sh.s; ++i) {
      double first = -1e300, second = -1e300;
      for (int64_t j = 0; j <= i; ++j) {
        double& tile_max = j < 64 ? first : second;
        tile_max = std::max(tile_max, score(i, j));
      }
      rescaled_rows += second > first ? 1 : 0;
    }
    ASSERT_GT(rescaled_rows, 0) << "head " << hi << ": no row's max grows in the second key tile";
  }
  ExpectGradientMatchesFiniteDifferences(sh, qkv, RandomValues<double>(sh.b * sh.s * sh.c, 10));
}

}  // namespace
}  // namespace tessel::kernel_test
