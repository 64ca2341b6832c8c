// nn.softmax_xent.fwd_bwd against a direct softmax, plus the cases a direct softmax gets wrong.
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include <cmath>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class SoftmaxXentTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SoftmaxXentTest, FloatTypes);

struct XentResult {
  double loss = 0;
  int64_t correct = 0;
  std::vector<double> dlogits;
};

template <typename T>
XentResult RunXent(const std::vector<T>& logits, const std::vector<int64_t>& labels, const std::vector<uint8_t>& mask,
                   int64_t c, double scale, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(labels.size());
  Tensor tl = MakeTensor<T>({n, c}, logits), tlab = MakeTensor<int64_t>({n}, labels);
  Tensor tmask = MakeTensor<uint8_t>({n}, mask);
  Tensor loss = Filled<double>({1}, -1.0), correct = Filled<int64_t>({1}, -1), dl = Filled<T>({n, c}, T(8));
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), scale};
  CallCpuWith("nn.softmax_xent.fwd_bwd", {&tl, &tlab, &tmask}, {&loss, &correct, &dl}, params, pool);
  const std::vector<T> d = ToVector<T>(dl);
  return {loss.data<double>()[0], correct.data<int64_t>()[0], std::vector<double>(d.begin(), d.end())};
}

TYPED_TEST(SoftmaxXentTest, MatchesDirectSoftmaxOnMaskedLabelledRows) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t n = 5000, c = 4;
  ASSERT_GT(PoolChunks(n, 4096 / c, 3), 1);  // the kernel's grain: several chunks run
  const std::vector<T> logits = RandomValues<T>(n * c, 3, -3.0, 3.0);
  std::mt19937_64 rng(4);
  std::vector<int64_t> labels(n);
  std::vector<uint8_t> mask(n);
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = static_cast<int64_t>(rng() % (c + 1)) - 1;  // -1 = unlabelled
    mask[i] = static_cast<uint8_t>(rng() % 3 != 0);
  }
  const double scale = 1.0 / 17;
  double loss = 0;
  int64_t correct = 0;
  std::vector<double> dl(n * c, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (!mask[i] || labels[i] < 0) continue;
    double z = 0;
    int64_t best = 0;
    for (int64_t j = 0; j < c; ++j) {
      z += std::exp(static_cast<double>(logits[i * c + j]));
      if (logits[i * c + j] > logits[i * c + best]) best = j;
    }
    loss += -std::log(std::exp(static_cast<double>(logits[i * c + labels[i]])) / z);
    correct += best == labels[i];
    for (int64_t j = 0; j < c; ++j) {
      dl[i * c + j] = (std::exp(static_cast<double>(logits[i * c + j])) / z - (j == labels[i])) * scale;
    }
  }
  const XentResult got = RunXent<T>(logits, labels, mask, c, scale, &pool);
  EXPECT_NEAR(got.loss, loss, 1e-9 * n);
  EXPECT_EQ(got.correct, correct);
  ExpectNear(got.dlogits, dl, Tolerance<T>(), "dlogits");
}

// The fused classifier's form: dlogits is the logits buffer itself. The same loss, hits and gradient
// bits as with a separate buffer, on rows wider than the kernel's grain and with the argmax late in a row.
TYPED_TEST(SoftmaxXentTest, InPlaceGivesTheSameBitsAsASeparateBuffer) {
  using T = TypeParam;
  ThreadPool pool(2);
  const int64_t n = 37, c = 5003;
  std::vector<T> logits = RandomValues<T>(n * c, 9, -4.0, 4.0);
  std::vector<int64_t> labels(n);
  std::vector<uint8_t> mask(n, 1);
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = (i * 977) % c;
    logits[i * c + c - 1 - i] = T(6);  // the row's maximum, past its label for most rows
  }
  mask[3] = 0, labels[4] = -1;  // rows that do not contribute: their gradient is zero
  const double scale = 1.0 / n;
  const XentResult separate = RunXent<T>(logits, labels, mask, c, scale, &pool);
  Tensor tl = MakeTensor<T>({n, c}, logits), tlab = MakeTensor<int64_t>({n}, labels);
  Tensor tmask = MakeTensor<uint8_t>({n}, mask);
  Tensor loss = Filled<double>({1}, -1.0), correct = Filled<int64_t>({1}, -1);
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), scale};
  CallCpuWith("nn.softmax_xent.fwd_bwd", {&tl, &tlab, &tmask}, {&loss, &correct, &tl}, params, &pool);
  EXPECT_EQ(loss.data<double>()[0], separate.loss);
  EXPECT_EQ(correct.data<int64_t>()[0], separate.correct);
  const std::vector<T> in_place = ToVector<T>(tl);
  ASSERT_EQ(in_place.size(), separate.dlogits.size());
  int64_t differ = 0;
  for (size_t i = 0; i < in_place.size(); ++i) differ += static_cast<double>(in_place[i]) != separate.dlogits[i];
  EXPECT_EQ(differ, 0) << "elements of the in-place gradient that differ from the separate buffer's";
  EXPECT_EQ(in_place[3 * c + 7], T(0));
  EXPECT_EQ(in_place[4 * c + 7], T(0));
}

TEST(SoftmaxXent, LargeLogitsStayFinite) {
  // Two equal logits of 1000: a direct exp overflows; log-sum-exp gives log 2 and p = 1/2.
  const XentResult got = RunXent<float>({1000.f, 1000.f}, {0}, {1}, 2, 1.0, nullptr);
  EXPECT_NEAR(got.loss, std::log(2.0), 1e-6);
  EXPECT_NEAR(got.dlogits[0], -0.5, 1e-6);
  EXPECT_NEAR(got.dlogits[1], 0.5, 1e-6);
}

TEST(SoftmaxXent, TiesGoToTheFirstMaximum) {
  EXPECT_EQ(RunXent<double>({2.0, 2.0}, {0}, {1}, 2, 1.0, nullptr).correct, 1);
  EXPECT_EQ(RunXent<double>({2.0, 2.0}, {1}, {1}, 2, 1.0, nullptr).correct, 0);
}

TEST(SoftmaxXent, LabelBeyondTheClassesIsBadData) {
  Tensor tl = Filled<double>({2, 3}, 0.0), tlab = MakeTensor<int64_t>({2}, {0, 3});
  Tensor tmask = MakeTensor<uint8_t>({2}, {1, 1});
  Tensor loss = Filled<double>({1}, 0.0), correct = Filled<int64_t>({1}, 0), dl = Filled<double>({2, 3}, 0.0);
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), 1.0};
  const Status st = TryCallCpu("nn.softmax_xent.fwd_bwd", {&tl, &tlab, &tmask}, {&loss, &correct, &dl}, nullptr,
                               &params, sizeof(params));
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(st.message().find("labels[1]"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::kernel_test
