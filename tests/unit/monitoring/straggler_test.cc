#include "monitoring/straggler.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessel::monitoring {
namespace {

TEST(StragglerTracker, NamesTheSlowWorkerOnceEveryWorkerFinishedTheWindow) {
  StragglerTracker t({1, 2, 3}, /*factor=*/1.5, /*window=*/4);
  StragglerTracker::Window w;
  for (int step = 0; step < 4; ++step) {
    t.Add(1, 0.010);
    t.Add(2, 0.011);
    EXPECT_FALSE(t.TakeWindow(&w)) << "rank 3 has not finished the window yet";
    t.Add(3, step == 2 ? 0.100 : 0.020);  // one outlier step: the median ignores it
  }
  ASSERT_TRUE(t.TakeWindow(&w));
  EXPECT_EQ(w.first, 1);
  EXPECT_EQ(w.last, 4);
  EXPECT_EQ(w.fastest_rank, 1);
  ASSERT_EQ(w.scores.size(), 3u);
  EXPECT_DOUBLE_EQ(w.scores[0].vs_fastest, 1.0);
  EXPECT_NEAR(w.scores[1].vs_fastest, 1.1, 1e-12);
  EXPECT_NEAR(w.scores[2].vs_fastest, 2.0, 1e-12);
  EXPECT_FALSE(w.scores[0].straggler);
  EXPECT_FALSE(w.scores[1].straggler);
  EXPECT_TRUE(w.scores[2].straggler);
  EXPECT_TRUE(std::isnan(w.scores[2].vs_own_median)) << "no earlier steps in the first window";
  EXPECT_FALSE(t.TakeWindow(&w)) << "a window is taken once";
}

TEST(StragglerTracker, ComparesEachWorkerWithItsOwnPast) {
  StragglerTracker t({1, 2}, 1.5, 2);
  StragglerTracker::Window w;
  for (int step = 0; step < 2; ++step) t.Add(1, 1.0), t.Add(2, 1.0);
  ASSERT_TRUE(t.TakeWindow(&w));
  EXPECT_FALSE(w.scores[1].straggler);
  for (int step = 0; step < 2; ++step) t.Add(1, 1.0), t.Add(2, 3.0);  // rank 2 slows down
  ASSERT_TRUE(t.TakeWindow(&w));
  EXPECT_EQ(w.first, 3);
  EXPECT_DOUBLE_EQ(w.scores[1].vs_own_median, 3.0);
  EXPECT_DOUBLE_EQ(w.scores[1].vs_fastest, 3.0);
  EXPECT_TRUE(w.scores[1].straggler);
  EXPECT_DOUBLE_EQ(w.scores[0].vs_own_median, 1.0);

  const Record summary = t.Summary();
  EXPECT_EQ(FindNumber(summary, "windows"), 2.0);
  const RecordValue* ranks = Find(summary, "ranks");
  ASSERT_NE(ranks, nullptr);
  const Record& by_rank = std::get<Record>(ranks->data);
  const Record& two = std::get<Record>(Find(by_rank, "2")->data);
  EXPECT_EQ(FindNumber(two, "straggler_windows"), 1.0);
  EXPECT_EQ(FindNumber(two, "vs_fastest_max"), 3.0);
  EXPECT_EQ(FindNumber(two, "median_compute_seconds"), 2.0);
}

TEST(StragglerTracker, EqualWorkersAreNoStragglers) {
  StragglerTracker t({1, 2}, 1.5, 3);
  StragglerTracker::Window w;
  for (int step = 0; step < 3; ++step) t.Add(1, 0.5), t.Add(2, 0.5);
  ASSERT_TRUE(t.TakeWindow(&w));
  for (const auto& s : w.scores) {
    EXPECT_DOUBLE_EQ(s.vs_fastest, 1.0);
    EXPECT_FALSE(s.straggler);
  }
}

}  // namespace
}  // namespace tessel::monitoring
