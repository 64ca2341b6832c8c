#include "workers/loss_watch.h"

#include <gtest/gtest.h>

#include <limits>

namespace tessel::workers {
namespace {

TEST(LossWatch, NanAndInfinityAreBadAndNameTheStep) {
  LossWatch w(10, 5);
  EXPECT_EQ(w.Check("step", 1, 5.5), "");
  EXPECT_EQ(w.Check("step", 2, std::numeric_limits<double>::quiet_NaN()), "the loss became NaN at step 2");
  EXPECT_EQ(w.Check("epoch", 3, -std::numeric_limits<double>::infinity()), "the loss became -Inf at epoch 3");
}

TEST(LossWatch, AnExplosionAboveTheFactorIsBad) {
  LossWatch w(10, 5);
  EXPECT_EQ(w.Check("step", 1, 5.5), "");
  const std::string bad = w.Check("step", 2, 3e10);
  EXPECT_NE(bad.find("exploded to 3e+10 at step 2"), std::string::npos) << bad;
  EXPECT_NE(bad.find("median 5.5 of the last 1 steps"), std::string::npos) << bad;
}

TEST(LossWatch, NoiseNearZeroAndNormalTrainingAreFine) {
  LossWatch w(10, 3);
  EXPECT_EQ(w.Check("epoch", 1, 1.1), "");
  for (int e = 2; e < 50; ++e) EXPECT_EQ(w.Check("epoch", e, 1.1 / e), "") << e;
  // Late in training the loss is near zero; a jump 50x its median is still below the first loss.
  EXPECT_EQ(w.Check("epoch", 50, 0.001), "");
  EXPECT_EQ(w.Check("epoch", 51, 0.001), "");
  EXPECT_EQ(w.Check("epoch", 52, 0.05), "");
}

TEST(LossWatch, TheWindowSlides) {
  LossWatch w(2, 2);
  EXPECT_EQ(w.Check("step", 1, 10), "");
  EXPECT_EQ(w.Check("step", 2, 10), "");
  EXPECT_EQ(w.Check("step", 3, 15), "");  // 1.5x the median of {10, 10}
  EXPECT_EQ(w.Check("step", 4, 25), "");  // 2x the median of {10, 15} = 12.5 is 25: not above
  EXPECT_NE(w.Check("step", 5, 41), "");  // above 2x the median of {15, 25} = 40
}

}  // namespace
}  // namespace tessel::workers
