// The stage planner's split (a dynamic program over contiguous block ranges) and its memory count, on
// made-up costs: the split minimises the slowest stage, respects the budget, and an infeasible budget names
// its shortfall; recompute blocks cost a forward more and keep only their input; the job's [spill] keys
// resolve to one policy per block.
#include "orchestrator/planners/stage_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "jobs/spec.h"

namespace tessel::orchestrator {
namespace {

StageCosts Costs(double block, double embed, double head) {
  StageCosts k;
  k.block_seconds = block, k.embed_seconds = embed, k.head_seconds = head;
  k.tokens = 2048, k.width = 256, k.heads = 4, k.vocab = 256, k.padded_vocab = 256, k.context = 256;
  return k;
}

std::vector<SpillPolicy> Keep(int layers) {
  return std::vector<SpillPolicy>(static_cast<size_t>(layers), SpillPolicy::kKeep);
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
      auto split = SplitStages(k, Keep(12), stages, 4, 0, {}, "job.toml");
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
  auto split = SplitStages(Costs(1.0, 0.0, 3.0), Keep(12), 2, 4, 0, {}, "job.toml");
  ASSERT_TRUE(split.ok());
  EXPECT_GT((*split)[0].end - (*split)[0].first, (*split)[1].end - (*split)[1].first);
}

TEST(SplitStages, AFixedSplitIsKeptAndPredicted) {
  auto split = SplitStages(Costs(1.0, 0.5, 2.0), Keep(6), 3, 4, 0, {1, 2, 3}, "job.toml");
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
  // micro-batches' saved activations (10 C floats a token, the LayerNorms' rstd, the attention's lse).
  const int64_t per_block_microbatch = n * (10 * c + 2 + k.heads) * 4;
  const int64_t params_block = 20 * (12 * c * c + 13 * c);  // value, gradient, 2 moments, host copy
  const int64_t a = StageMemoryBytes(k, 1, 3, StageBlocks{.keep = 4}, 4);
  const int64_t b = StageMemoryBytes(k, 1, 3, StageBlocks{.keep = 5}, 4);
  EXPECT_EQ(b - a, params_block + 2 * per_block_microbatch) << "stage 1 of 3 keeps 2 micro-batches";
  // The last stage of a pipeline holds a copy of the tied embedding (and its exchange buffer); alone, none.
  const int64_t embedding = k.padded_vocab * c;
  EXPECT_EQ(StageMemoryBytes(k, 1, 2, StageBlocks{.keep = 4}, 1) - StageMemoryBytes(k, 0, 1, StageBlocks{.keep = 4}, 1),
            (20 + 4) * embedding - 20 * (embedding + k.context * c) - n * 4);
  // More micro-batches than stages do not add memory beyond min(stages - s, M).
  EXPECT_EQ(StageMemoryBytes(k, 0, 2, StageBlocks{.keep = 4}, 2), StageMemoryBytes(k, 0, 2, StageBlocks{.keep = 4}, 8));
  // A CPU worker's own resident memory (libraries, BLAS buffers: costs.process_bytes) counts once a stage.
  StageCosts with_process = k;
  with_process.process_bytes = 123456789;
  for (int32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(StageMemoryBytes(with_process, s, 3, StageBlocks{.keep = 4}, 4) -
                  StageMemoryBytes(k, s, 3, StageBlocks{.keep = 4}, 4),
              with_process.process_bytes)
        << "stage " << s;
  }
}

TEST(SplitStages, RespectsTheBudgetOrNamesTheShortfall) {
  const StageCosts k = Costs(1.0, 0.0, 0.0);
  auto free_split = SplitStages(k, Keep(8), 2, 2, 0, {}, "job.toml:3:1");
  ASSERT_TRUE(free_split.ok());
  int64_t largest = 0;
  for (const StageShare& s : *free_split) largest = std::max(largest, s.memory_bytes);
  // A budget just big enough for the smallest largest stage is feasible, and every stage fits it.
  auto tight = SplitStages(k, Keep(8), 2, 2, largest, {}, "job.toml:3:1");
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  for (const StageShare& s : *tight) EXPECT_LE(s.memory_bytes, largest);
  auto refused = SplitStages(k, Keep(8), 2, 2, 1000, {}, "job.toml:3:1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUsage);
  EXPECT_NE(refused.status().message().find("job.toml:3:1"), std::string::npos);
  EXPECT_NE(refused.status().message().find("short by"), std::string::npos);
  EXPECT_NE(refused.status().message().find("keep less"), std::string::npos) << "kept blocks could keep less";
  // Blocks that all recompute keep the least already: the message does not suggest it.
  auto least = SplitStages(k, std::vector<SpillPolicy>(8, SpillPolicy::kRecompute), 2, 2, 1000, {}, "job.toml:3:1");
  ASSERT_FALSE(least.ok());
  EXPECT_EQ(least.status().message().find("keep less"), std::string::npos) << least.status().message();
  EXPECT_NE(least.status().message().find("train.batch_size"), std::string::npos) << least.status().message();
  // A fixed split over the budget names its stage.
  auto fixed = SplitStages(k, Keep(8), 2, 2, largest, {7, 1}, "job.toml:3:1");
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.status().message().find("stage 0"), std::string::npos) << fixed.status().message();
}

TEST(StageMemoryBytes, ARecomputeBlockKeepsItsInputAndTheStageOneScratch) {
  const StageCosts k = Costs(1.0, 0.0, 0.0);
  const int64_t c = k.width, n = k.tokens, slots = 2;  // stage 1 of 3, 4 micro-batches: 2 in flight
  const int64_t kept = n * (10 * c + 2 + k.heads) * 4, input = n * c * 4;
  const int64_t scratch = kept;  // one kept block's tensors
  const int64_t keep4 = StageMemoryBytes(k, 1, 3, StageBlocks{.keep = 4}, 4);
  const int64_t keep3 = StageMemoryBytes(k, 1, 3, StageBlocks{.keep = 3, .recompute = 1}, 4);
  const int64_t keep0 = StageMemoryBytes(k, 1, 3, StageBlocks{.recompute = 4}, 4);
  EXPECT_EQ(keep4 - keep3, slots * (kept - input) - scratch);
  EXPECT_EQ(keep4 - keep0, 4 * slots * (kept - input) - scratch);
  // With one micro-batch in flight a single recompute block costs its input more: its scratch is the
  // block, and a kept block keeps no input.
  EXPECT_EQ(
      StageMemoryBytes(k, 0, 1, StageBlocks{.recompute = 1}, 1) - StageMemoryBytes(k, 0, 1, StageBlocks{.keep = 1}, 1),
      input);
}

TEST(SplitStages, ARecomputeBlockCostsOneMoreForwardAndMovesTheSplit) {
  StageCosts k = Costs(3.0, 0.0, 0.0);
  k.block_forward_seconds = 1.0;
  std::vector<SpillPolicy> policies = Keep(6);
  policies[0] = policies[1] = policies[2] = SpillPolicy::kRecompute;
  auto fixed = SplitStages(k, policies, 2, 4, 0, {3, 3}, "job.toml");
  ASSERT_TRUE(fixed.ok());
  EXPECT_DOUBLE_EQ((*fixed)[0].seconds, 3 * 4.0);
  EXPECT_DOUBLE_EQ((*fixed)[1].seconds, 3 * 3.0);
  EXPECT_EQ((*fixed)[0].blocks.recompute, 3);
  EXPECT_EQ((*fixed)[1].blocks.keep, 3);
  auto fixed_keep = SplitStages(k, Keep(6), 2, 4, 0, {3, 3}, "job.toml");
  ASSERT_TRUE(fixed_keep.ok());
  EXPECT_LT((*fixed)[0].memory_bytes, (*fixed_keep)[0].memory_bytes) << "stage 0 recomputes, so it keeps less";
  EXPECT_EQ((*fixed)[1].memory_bytes, (*fixed_keep)[1].memory_bytes);
  // Free to choose: the recompute blocks (4 s each) are the first three, the kept ones 3 s: the first j
  // blocks on stage 0 give 4 | 17, 8 | 13, 12 | 9, 15 | 6, so the best slowest stage is 12.
  auto free_split = SplitStages(k, policies, 2, 4, 0, {}, "job.toml");
  ASSERT_TRUE(free_split.ok());
  EXPECT_DOUBLE_EQ(Slowest(*free_split), 12.0);
  // All keep: 3 + 3 blocks of 3 s each.
  auto keep = SplitStages(k, Keep(6), 2, 4, 0, {}, "job.toml");
  ASSERT_TRUE(keep.ok());
  EXPECT_DOUBLE_EQ(Slowest(*keep), 9.0);
}

jobs::JobSpec LlmSpec(const std::vector<std::string>& overrides) {
  const std::string text =
      "version = 1\n[job]\nname = \"t\"\nkind = \"llm\"\n[data]\nformat = \"generated_text\"\n[model]\n"
      "name = \"gpt2\"\nlayers = 4\n[train]\noptimizer = \"adamw\"\nbatch_size = 8\n";
  auto spec = jobs::ParseJob(text, "t.toml", overrides);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : jobs::JobSpec{};
}

TEST(ResolveBlockPolicies, FollowsSpillPolicyOrTheLayerList) {
  using enum SpillPolicy;
  auto keep = ResolveBlockPolicies(LlmSpec({}));  // keep is the default: offloading is asked for
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep->policies, (std::vector<SpillPolicy>{kKeep, kKeep, kKeep, kKeep}));
  EXPECT_EQ(keep->automatic, (std::vector<bool>{false, false, false, false}));
  auto all = ResolveBlockPolicies(LlmSpec({"spill.policy=recompute"}));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->policies, (std::vector<SpillPolicy>{kRecompute, kRecompute, kRecompute, kRecompute}));
  auto mixed = ResolveBlockPolicies(LlmSpec(
      {"spill.policy=recompute", "spill.layer_policies=[\"keep\", \"recompute\", \"offload\", \"recompute\"]"}));
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->policies, (std::vector<SpillPolicy>{kKeep, kRecompute, kOffload, kRecompute}));
}

TEST(ResolveBlockPolicies, AutoStartsAsOffloadAndIsMarked) {
  using enum SpillPolicy;
  auto a = ResolveBlockPolicies(LlmSpec({"spill.policy=auto"}));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->policies, (std::vector<SpillPolicy>{kOffload, kOffload, kOffload, kOffload}));
  EXPECT_EQ(a->automatic, (std::vector<bool>{true, true, true, true}));
  auto o = ResolveBlockPolicies(LlmSpec({"spill.policy=offload"}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->automatic, (std::vector<bool>{false, false, false, false}));
}

// SSDTrain's timeline: a disk fast enough for the early blocks hides their I/O; the last block's read is
// needed as soon as the backward starts, so offloading it stalls unless the disk is instant.
TEST(OffloadStallSeconds, EarlyBlocksHideTheirIoTheLastDoesNot) {
  const SpillBandwidth disk{1e9, 1e9};                 // 1 GB/s each way
  const double fwd = 0.010, bwd = 0.020, bytes = 5e6;  // 5 ms to write or read a block
  EXPECT_DOUBLE_EQ(OffloadStallSeconds({false, false, false, false}, fwd, bwd, 0, bytes, disk, 3), 0.0);
  EXPECT_DOUBLE_EQ(OffloadStallSeconds({true, true, false, false}, fwd, bwd, 0, bytes, disk, 3), 0.0);
  const double last = OffloadStallSeconds({false, false, false, true}, fwd, bwd, 0, bytes, disk, 3);
  // Written from 40 to 45 ms, read back from 45 to 50 ms, needed at 40 ms.
  EXPECT_NEAR(last, 0.010, 1e-12);
  // Time between the forward and the backward (the head, later stages) hides it.
  EXPECT_NEAR(OffloadStallSeconds({false, false, false, true}, fwd, bwd, 0.004, bytes, disk, 3), 0.006, 1e-12);
  EXPECT_DOUBLE_EQ(OffloadStallSeconds({false, false, false, true}, fwd, bwd, 0.010, bytes, disk, 3), 0.0);
  // A slow disk stalls even the early blocks.
  const SpillBandwidth slow{1e8, 1e8};
  EXPECT_GT(OffloadStallSeconds({true, true, false, false}, fwd, bwd, 0, bytes, slow, 3), 0.0);
}

TEST(ChooseAutoPolicies, KeepsTheLastBlocksWhoseIoTheDiskCannotHide) {
  using enum SpillPolicy;
  StageCosts k = Costs(0.030, 0.0, 0.0);
  k.block_forward_seconds = 0.010;
  // One block's activations: tokens x RecomputeScratchBytesPerToken.
  const double block_bytes = static_cast<double>(k.tokens) * static_cast<double>(workers::RecomputeScratchBytesPerToken(
                                                                 k.width, k.heads, Precision::kFp32));
  const SpillBandwidth disk{block_bytes / 0.005, block_bytes / 0.005};  // 5 ms a block each way
  std::vector<SpillPolicy> policies(6, kOffload);
  auto split = SplitStages(k, policies, 1, 1, 0, {}, "job.toml");
  ASSERT_TRUE(split.ok());
  const auto notes = ChooseAutoPolicies(k, std::vector<bool>(6, true), disk, 1, 1, 0, &policies, &*split);
  EXPECT_EQ(policies, (std::vector<SpillPolicy>{kOffload, kOffload, kOffload, kOffload, kOffload, kKeep}));
  EXPECT_EQ((*split)[0].blocks.offload, 5);
  EXPECT_EQ((*split)[0].blocks.keep, 1);
  ASSERT_FALSE(notes.empty());
  // A budget that cannot hold another kept block leaves the block offloaded and says so.
  std::vector<SpillPolicy> tight(6, kOffload);
  auto tight_split = SplitStages(k, tight, 1, 1, 0, {}, "job.toml");
  const int64_t budget = (*tight_split)[0].memory_bytes;
  const auto tight_notes = ChooseAutoPolicies(k, std::vector<bool>(6, true), disk, 1, 1, budget, &tight, &*tight_split);
  EXPECT_EQ(tight, std::vector<SpillPolicy>(6, kOffload));
  EXPECT_NE(tight_notes.front().find("budget"), std::string::npos);
}

TEST(PlanPolicies, PicksTheFastestMixThatFitsTheBudget) {
  using enum SpillPolicy;
  StageCosts k = Costs(0.030, 0.0, 0.0);
  k.block_forward_seconds = 0.010;
  const SpillBandwidth fast{1e12, 1e12};  // a disk that hides everything
  auto ResolvedPlan = ResolveBlockPolicies(LlmSpec({"spill.policy=plan"}));
  ASSERT_TRUE(ResolvedPlan.ok());
  EXPECT_EQ(ResolvedPlan->planned, (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(ResolvedPlan->policies, (std::vector<SpillPolicy>(4, kRecompute)));
  constexpr int kBlocks = 10;
  const auto plan = [&](int64_t budget, std::vector<SpillPolicy>* policies) {
    *policies = std::vector<SpillPolicy>(kBlocks, kRecompute);
    auto split = SplitStages(k, *policies, 1, 1, 0, {}, "job.toml");
    EXPECT_TRUE(split.ok());
    PlanPolicies(k, std::vector<bool>(kBlocks, true), fast, 1, 1, budget, policies, &*split);
    return (*split)[0];
  };
  std::vector<SpillPolicy> p;
  // No budget: everything kept (the fastest).
  StageShare free = plan(0, &p);
  EXPECT_EQ(p, std::vector<SpillPolicy>(kBlocks, kKeep));
  EXPECT_DOUBLE_EQ(free.seconds, kBlocks * 0.030);
  // The memory of every block recomputed: nothing else fits.
  std::vector<SpillPolicy> lean(kBlocks, kRecompute);
  const int64_t least = StageMemoryBytes(k, 0, 1, CountBlocks(lean, 0, kBlocks), 1);
  StageShare tight = plan(least, &p);
  EXPECT_EQ(p, lean);
  EXPECT_DOUBLE_EQ(tight.seconds, kBlocks * 0.040);  // each block's forward runs twice
  // Between the two: the last blocks kept, the first offloaded (the disk hides it, and it is faster
  // than recomputing; its 4 buffers hold less than the 6 blocks), within the budget.
  std::vector<SpillPolicy> mixed(kBlocks, kOffload);
  for (int i = 6; i < kBlocks; ++i) mixed[static_cast<size_t>(i)] = kKeep;
  const int64_t middle = StageMemoryBytes(k, 0, 1, CountBlocks(mixed, 0, kBlocks), 1);
  StageShare between = plan(middle, &p);
  EXPECT_LE(between.memory_bytes, middle);
  EXPECT_EQ(p, mixed);
  EXPECT_DOUBLE_EQ(between.seconds, kBlocks * 0.030);
}

}  // namespace
}  // namespace tessel::orchestrator
