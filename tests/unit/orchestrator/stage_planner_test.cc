// The stage planner's split (a dynamic program over contiguous block ranges) and its memory count, on
// made-up costs: the split minimises the slowest stage, respects the budget, and an infeasible budget names
// its shortfall.
#include "orchestrator/planners/stage_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

namespace tessel::orchestrator {
namespace {

StageCosts Costs(double block, double embed, double head) {
  StageCosts k;
  k.block_seconds = block, k.embed_seconds = embed, k.head_seconds = head;
  k.tokens = 2048, k.width = 256, k.heads = 4, k.vocab = 256, k.padded_vocab = 256, k.context = 256;
  return k;
}

double Slowest(const std::vector<StageShare>& split) {
  double t = 0;
  for (const StageShare& s : split) t = std::max(t, s.seconds);
  return t;
}

// Every contiguous split of `layers` blocks into `stages` non-empty stages, by brute force.
double BestByEnumeration(const StageCosts& k, int layers, int stages) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cut(static_cast<size_t>(stages - 1));
  const auto rec = [&](auto&& self, int s, int start) -> void {
    if (s == stages - 1) {
      std::vector<int> ends(cut.begin(), cut.end());
      ends.push_back(layers);
      double slowest = 0;
      int first = 0;
      for (int i = 0; i < stages; ++i) {
        const double t = (ends[static_cast<size_t>(i)] - first) * k.block_seconds + (i == 0 ? k.embed_seconds : 0) +
                         (i == stages - 1 ? k.head_seconds : 0);
        slowest = std::max(slowest, t);
        first = ends[static_cast<size_t>(i)];
      }
      best = std::min(best, slowest);
      return;
    }
    for (int e = start + 1; e <= layers - (stages - 1 - s); ++e) {
      cut[static_cast<size_t>(s)] = e;
      self(self, s + 1, e);
    }
  };
  rec(rec, 0, 0);
  return best;
}

TEST(SplitStages, MinimisesTheSlowestStageAndCoversEveryBlockOnce) {
  for (const auto& [embed, head] : {std::pair{0.0, 0.0}, {0.1, 2.5}, {1.5, 0.2}}) {
    const StageCosts k = Costs(1.0, embed, head);
    for (int stages : {1, 2, 3, 5}) {
      auto split = SplitStages(k, 12, stages, 4, 0, {}, "job.toml");
      ASSERT_TRUE(split.ok()) << split.status().ToString();
      ASSERT_EQ(split->size(), static_cast<size_t>(stages));
      EXPECT_EQ(split->front().first, 0);
      EXPECT_EQ(split->back().end, 12);
      for (size_t s = 1; s < split->size(); ++s) EXPECT_EQ((*split)[s].first, (*split)[s - 1].end);
      for (const StageShare& sh : *split) EXPECT_GE(sh.end - sh.first, 1);
      EXPECT_DOUBLE_EQ(Slowest(*split), BestByEnumeration(k, 12, stages)) << "embed " << embed << " head " << head;
    }
  }
  // A heavy head moves blocks off the last stage.
  auto split = SplitStages(Costs(1.0, 0.0, 3.0), 12, 2, 4, 0, {}, "job.toml");
  ASSERT_TRUE(split.ok());
  EXPECT_GT((*split)[0].end - (*split)[0].first, (*split)[1].end - (*split)[1].first);
}

TEST(SplitStages, AFixedSplitIsKeptAndPredicted) {
  auto split = SplitStages(Costs(1.0, 0.5, 2.0), 6, 3, 4, 0, {1, 2, 3}, "job.toml");
  ASSERT_TRUE(split.ok());
  EXPECT_EQ((*split)[0].end, 1);
  EXPECT_EQ((*split)[1].end, 3);
  EXPECT_DOUBLE_EQ((*split)[0].seconds, 1.5);
  EXPECT_DOUBLE_EQ((*split)[2].seconds, 5.0);
}

TEST(StageMemoryBytes, CountsParametersInFlightMicroBatchesAndTheTiedCopy) {
  const StageCosts k = Costs(1.0, 0.0, 0.0);
  const int64_t c = k.width, n = k.tokens;
  // Stage 0 of 3 with 4 micro-batches keeps 3 in flight, stage 2 one: the difference per block is two
  // micro-batches' saved activations (16 C floats a token, the LayerNorm statistics, the attention's lse).
  const int64_t per_block_microbatch = n * (16 * c + 4 + k.heads) * 4;
  const int64_t params_block = 16 * (12 * c * c + 13 * c);
  const int64_t a = StageMemoryBytes(k, 1, 3, 4, 4), b = StageMemoryBytes(k, 1, 3, 5, 4);
  EXPECT_EQ(b - a, params_block + 2 * per_block_microbatch) << "stage 1 of 3 keeps 2 micro-batches";
  // The last stage of a pipeline holds a copy of the tied embedding (and its exchange buffer); alone, none.
  const int64_t embedding = k.padded_vocab * c;
  EXPECT_EQ(StageMemoryBytes(k, 1, 2, 4, 1) - StageMemoryBytes(k, 0, 1, 4, 1),
            (16 + 4) * embedding - 16 * (embedding + k.context * c) - n * 4);
  // More micro-batches than stages do not add memory beyond min(stages - s, M).
  EXPECT_EQ(StageMemoryBytes(k, 0, 2, 4, 2), StageMemoryBytes(k, 0, 2, 4, 8));
}

TEST(SplitStages, RespectsTheBudgetOrNamesTheShortfall) {
  const StageCosts k = Costs(1.0, 0.0, 0.0);
  auto free_split = SplitStages(k, 8, 2, 2, 0, {}, "job.toml:3:1");
  ASSERT_TRUE(free_split.ok());
  int64_t largest = 0;
  for (const StageShare& s : *free_split) largest = std::max(largest, s.memory_bytes);
  // A budget just big enough for the smallest largest stage is feasible, and every stage fits it.
  auto tight = SplitStages(k, 8, 2, 2, largest, {}, "job.toml:3:1");
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  for (const StageShare& s : *tight) EXPECT_LE(s.memory_bytes, largest);
  auto refused = SplitStages(k, 8, 2, 2, 1000, {}, "job.toml:3:1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUsage);
  EXPECT_NE(refused.status().message().find("job.toml:3:1"), std::string::npos);
  EXPECT_NE(refused.status().message().find("short by"), std::string::npos);
  // A fixed split over the budget names its stage.
  auto fixed = SplitStages(k, 8, 2, 2, largest, {7, 1}, "job.toml:3:1");
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.status().message().find("stage 0"), std::string::npos) << fixed.status().message();
}

}  // namespace
}  // namespace tessel::orchestrator
