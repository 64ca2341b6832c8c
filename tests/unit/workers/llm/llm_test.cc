// The GPT stage executor's pieces: the learning-rate schedule, the batch plan, the token splits, and the
// executor itself through the registry and its assignment bytes (one stage, embedded), as a worker runs it.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "core/thread_pool.h"
#include "stage_harness.h"
#include "storage/spill_store.h"
#include "workers/executor_registry.h"
#include "workers/llm/llm_settings.h"
#include "workers/llm/stage_weights.h"
#include "workers/llm/token_data.h"

namespace tessel::workers {
namespace {

TEST(LearningRate, WarmsUpThenFollowsTheCosineToItsFloor) {
  LlmTrainSettings t;
  t.lr = 1e-3, t.steps = 10, t.warmup_steps = 2, t.final_lr_fraction = 0.1;
  EXPECT_DOUBLE_EQ(LearningRate(t, 0), 0.5e-3);
  EXPECT_DOUBLE_EQ(LearningRate(t, 1), 1e-3);
  EXPECT_DOUBLE_EQ(LearningRate(t, 2), 1e-3);  // the cosine starts at lr
  EXPECT_NEAR(LearningRate(t, 6), 1e-4 + 0.5 * (1 + std::cos(M_PI * 0.5)) * 9e-4, 1e-15);
  EXPECT_GT(LearningRate(t, 9), 1e-4);
  t.final_lr_fraction = 1;
  for (int s = 2; s < 10; ++s) EXPECT_DOUBLE_EQ(LearningRate(t, s), 1e-3);
  t.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(LearningRate(t, 0), 1e-3);
}

TEST(BatchPlan, SequentialIsLlmcsLoaderAndWraps) {
  // 100 tokens, T = 4, 3 sequences a batch: batch k at 12 k; 8 batches fit ((100 - 1) / 12), then 0 again.
  BatchPlan p(100, 4, 3, false, 0);
  EXPECT_EQ(p.batches_per_pass(), 8);
  EXPECT_EQ(p.Start(0, 0), 0);
  EXPECT_EQ(p.Start(0, 2), 8);
  EXPECT_EQ(p.Start(7, 2), 7 * 12 + 8);
  EXPECT_EQ(p.Start(8, 1), 4);
  EXPECT_LE(p.Start(7, 2) + 4, 99) << "the last target stays inside the tokens";
}

TEST(BatchPlan, ShuffledVisitsEverySequenceOncePerPassAndDependsOnTheSeed) {
  BatchPlan a(101, 4, 5, true, 7), b(101, 4, 5, true, 7), c(101, 4, 5, true, 8);
  ASSERT_EQ(a.batches_per_pass(), 5);  // 25 sequences of 4 (+1) in 101 tokens
  std::set<int64_t> starts;
  bool differs = false;
  for (int64_t k = 0; k < 5; ++k) {
    for (int64_t j = 0; j < 5; ++j) {
      starts.insert(a.Start(k, j));
      EXPECT_EQ(a.Start(k, j), b.Start(k, j));
      differs = differs || a.Start(k, j) != c.Start(k, j);
      EXPECT_EQ(a.Start(k, j) % 4, 0);
    }
  }
  EXPECT_EQ(starts.size(), 25u);
  EXPECT_TRUE(differs);
  bool new_order = false;
  for (int64_t j = 0; j < 5; ++j) new_order = new_order || a.Start(5, j) != a.Start(0, j);
  EXPECT_TRUE(new_order) << "the second pass is shuffled again";
}

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TokenSplits, HoldOutTheTailAndRefuseShortOrEmptyFilesNamingThem) {
  LlmDataSettings d;
  d.format = DataFormat::kText;
  d.text = WriteText("tessel_llm_test_text.txt", std::string(1000, 'a') + std::string(100, 'b'));
  d.val_fraction = 100.0 / 1100.0;
  auto s = LoadTokenSplits(d, 256, 2, 8);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->train.size(), 1000u);
  EXPECT_EQ(s->val.size(), 100u);
  EXPECT_EQ(s->val.front(), 'b');
  // A batch of 16 sequences of 64 needs 1025 tokens.
  auto short_split = LoadTokenSplits(d, 256, 16, 64);
  ASSERT_FALSE(short_split.ok());
  EXPECT_EQ(short_split.status().code(), Code::kBadData);
  EXPECT_NE(short_split.status().message().find(d.text), std::string::npos) << short_split.status().message();
  d.text = WriteText("tessel_llm_test_empty.txt", "");
  auto empty = LoadTokenSplits(d, 256, 1, 4);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Code::kBadData);
  EXPECT_NE(empty.status().message().find("tessel_llm_test_empty.txt"), std::string::npos);
  // A vocabulary smaller than the bytes.
  d.text = WriteText("tessel_llm_test_bytes.txt", std::string(200, 'z'));
  d.val_fraction = 0;
  auto big = LoadTokenSplits(d, 100, 1, 4);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::kBadData);
}

TEST(GeneratedText, IsDeterministicPrintableAndStructured) {
  const std::string a = GenerateText(4096, 3), b = GenerateText(4096, 3), c = GenerateText(4096, 4);
  EXPECT_EQ(a.size(), 4096u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (char ch : a) EXPECT_TRUE(ch == '\n' || ch == ' ' || ch == '.' || std::isalpha(static_cast<unsigned char>(ch)));
}

// One stage of a small GPT (2 blocks) on generated text, through the registry and the assignment bytes;
// `policies` are the blocks' saved-activation policies ([] = keep both). The losses of every step and the
// final validation loss; `summary`, when given, gets what the executor reports.
using SpillOpener = std::function<Result<std::unique_ptr<storage::SpillStore>>(const storage::SpillOptions&)>;

// A 2-block GPT (one block per policy when `policies` is given) trained for `steps` steps on generated
// text; the per-step losses, then the validation losses. Offload blocks spill through `opener` (the real
// HDF5 store in `spill_dir` when empty).
// The assignment Train runs: a 2-block GPT (one block per policy when `policies` is given) on generated text.
LlmStageAssignment SmallGpt(int32_t microbatches, int32_t steps, std::vector<SpillPolicy> policies,
                            const std::string& spill_dir, Precision precision) {
  LlmStageAssignment a;
  const auto layers = static_cast<int32_t>(policies.empty() ? 2 : policies.size());
  a.model = GptConfig{layers, 32, 2, 16, 256, 256};
  a.train.steps = steps;
  a.train.data_parallel = 1;
  a.train.beta1 = 0.9, a.train.beta2 = 0.95, a.train.eps = 1e-8, a.train.final_lr_fraction = 1;
  a.train.microbatches = microbatches;
  a.train.microbatch = 8 / microbatches;
  a.train.seq_len = 16;
  a.train.lr = 1e-3;
  a.train.weight_decay = 0.1;
  a.train.grad_clip = 1.0;
  a.train.warmup_steps = 1;
  a.train.val_batches = 2;
  a.train.precision = precision;
  a.data.format = DataFormat::kGeneratedText;
  a.data.generated_bytes = 8192;
  a.data.generated_seed = 1;
  a.data.val_fraction = 0.1;
  a.place = StagePlacement{0, 1, 0, layers, 0};
  a.block_policies = policies.empty() ? std::vector<SpillPolicy>(2, SpillPolicy::kKeep) : policies;
  a.spill.dir = spill_dir.empty() ? "/tmp/tessel-spill" : spill_dir;
  a.spill.name = "llm_test";
  return a;
}

std::vector<double> Train(int32_t microbatches, int32_t steps, const std::string& run_dir = "",
                          std::vector<SpillPolicy> policies = {}, Record* summary = nullptr,
                          const SpillOpener& opener = {}, const std::string& spill_dir = "",
                          Status* build_status = nullptr, Precision precision = Precision::kFp32) {
  const LlmStageAssignment a = SmallGpt(microbatches, steps, policies, spill_dir, precision);
  TestWorker w;
  ExecutorContext c = w.Context(11);
  c.run_dir = run_dir;
  c.open_spill = opener;
  auto executor = BuildStage(a, c);
  if (build_status != nullptr) {
    *build_status = executor.status();
    if (!executor.ok()) return {};
  }
  EXPECT_TRUE(executor.ok()) << executor.status().ToString();
  if (!executor.ok()) return {};
  std::vector<double> losses;
  for (int64_t s = 1; s <= (*executor)->num_steps(); ++s) {
    auto r = (*executor)->Step(s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    losses.push_back(r->loss);
  }
  auto result = (*executor)->Evaluate();
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (result.ok()) losses.push_back(FindNumber(*result, "final_val_loss").value_or(-1));
  if (result.ok() && summary != nullptr) *summary = *result;
  return losses;
}

TEST(GptStage, LearnsAndGivesTheSameLossesForAnyMicroBatching) {
  const std::vector<double> one = Train(1, 4), four = Train(4, 4);
  ASSERT_EQ(one.size(), 5u);
  ASSERT_EQ(four.size(), 5u);
  EXPECT_NEAR(one[0], std::log(256.0), 0.2) << "an untrained byte model predicts about uniformly";
  EXPECT_LT(one[3], one[0]) << "the loss falls";
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(four[i], one[i], 1e-4 * one[i]) << "value " << i;
}

// A checkpoint in memory: the state after step 3 saved, then loaded into a fresh stage built from another
// seed (other initial weights) continues with the straight run's losses bit for bit, the validation loss
// included, with every block kept and with an offloading block (its spill file is not state: the saved
// step is whole). A state that lacks a tensor is a storage error, not a silent restart.
TEST(GptStage, SavedStateContinuesExactlyInAFreshStage) {
  using enum SpillPolicy;
  for (const std::vector<SpillPolicy>& policies : {std::vector<SpillPolicy>{kKeep, kKeep}, {kOffload, kKeep}}) {
    const LlmStageAssignment a = SmallGpt(2, 6, policies, "", Precision::kFp32);
    TestWorker w;
    auto first = BuildStage(a, w.Context(11));
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    std::vector<double> straight;
    MemoryState state;
    for (int64_t s = 1; s <= 6; ++s) {
      straight.push_back((*first)->Step(s).value().loss);
      if (s == 3) {
        ASSERT_TRUE((*first)->SaveState(state).ok());
      }
    }
    const double straight_val = FindNumber((*first)->Evaluate().value(), "final_val_loss").value_or(-1);
    first->reset();
    auto second = BuildStage(a, w.Context(99));
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    ASSERT_TRUE((*second)->LoadState(state).ok());
    for (int64_t s = 4; s <= 6; ++s) {
      EXPECT_EQ((*second)->Step(s).value().loss, straight[static_cast<size_t>(s - 1)]) << "step " << s;
    }
    EXPECT_EQ(FindNumber((*second)->Evaluate().value(), "final_val_loss").value_or(-2), straight_val);
    MemoryState empty;
    EXPECT_EQ((*second)->LoadState(empty).code(), Code::kStorage);
  }
}

TEST(GptStage, RecomputeGivesBitIdenticalLossesToKeep) {
  using enum SpillPolicy;
  Record keep_summary, recompute_summary;
  const std::vector<double> keep = Train(2, 4, "", {kKeep, kKeep}, &keep_summary);
  ASSERT_EQ(keep.size(), 5u);
  EXPECT_LT(keep[3], keep[0]) << "the loss falls";
  // Every block recomputed, and each mix: the kernels are deterministic and the recomputed forward sees
  // the same input and weights, so not even the last bit may differ (validation runs through the
  // recompute blocks' scratch too).
  const std::vector<std::vector<SpillPolicy>> cases = {
      {kRecompute, kRecompute}, {kRecompute, kKeep}, {kKeep, kRecompute}};
  for (const std::vector<SpillPolicy>& policies : cases) {
    Record summary;
    const std::vector<double> other = Train(2, 4, "", policies, &summary);
    ASSERT_EQ(other.size(), keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      EXPECT_EQ(other[i], keep[i]) << "value " << i << " with " << NameOf(policies[0]) << ", " << NameOf(policies[1]);
    }
    if (policies[0] == kRecompute && policies[1] == kRecompute) recompute_summary = summary;
  }
  // What the executor keeps: per block and token 10 C + 2 + heads floats kept (no input: both LayerNorms
  // differentiate from their outputs; no GELU output: regenerated), C recomputed (C = 32, 2 heads); one slot (one
  // stage) of 2 blocks; the recompute scratch is a kept block. So recomputing both blocks saves one block's tensors
  // less two inputs: N = 4 x 16 tokens a micro-batch.
  const int64_t n = 4 * 16, kept = 10 * 32 + 2 + 2, input = 32;
  const auto peak = [](const Record& r) { return FindNumber(r, "peak_resident_activation_bytes").value_or(-1); };
  EXPECT_EQ(peak(keep_summary) - peak(recompute_summary), static_cast<double>(n * (kept - 2 * input) * 4));
  EXPECT_EQ(FindNumber(keep_summary, "saved_activation_bytes_per_token_keep_all").value_or(-1), kept * 4.0);
  const RecordValue* per_block = Find(recompute_summary, "saved_activation_bytes_per_token");
  ASSERT_NE(per_block, nullptr);
  EXPECT_EQ(std::get<std::vector<double>>(per_block->data), (std::vector<double>{input * 4.0, input * 4.0}));
  per_block = Find(keep_summary, "saved_activation_bytes_per_token");
  ASSERT_NE(per_block, nullptr);
  EXPECT_EQ(std::get<std::vector<double>>(per_block->data), (std::vector<double>{kept * 4.0, kept * 4.0}));
}

// bf16 through the executor: it learns, stays near fp32 (8-bit mantissas: a few 1e-3 apart here), and
// its recompute and offload blocks (bf16 tensors in the offload pool's byte layout, through the HDF5
// spill file) give keep's losses bit for bit, as under fp32. Half the activation bytes.
TEST(GptStage, Bf16LearnsNearFp32AndItsPoliciesGiveKeepsLossesBitForBit) {
  using enum SpillPolicy;
  Record fp32_summary, keep_summary;
  const std::vector<double> fp32 = Train(2, 4, "", {kKeep, kKeep}, &fp32_summary);
  const std::vector<double> keep = Train(2, 4, "", {kKeep, kKeep}, &keep_summary, {}, "", nullptr, Precision::kBf16);
  ASSERT_EQ(keep.size(), 5u);
  EXPECT_LT(keep[3], keep[0]) << "the loss falls";
  for (size_t i = 0; i < keep.size(); ++i) {
    EXPECT_NEAR(keep[i], fp32[i], 0.02 * fp32[i]) << "value " << i;
    EXPECT_NE(keep[i], fp32[i]) << "value " << i << ": bf16 rounds, so it cannot equal fp32 exactly";
  }
  for (const std::vector<SpillPolicy>& policies :
       std::vector<std::vector<SpillPolicy>>{{kRecompute, kRecompute}, {kOffload, kKeep}, {kOffload, kOffload}}) {
    const std::vector<double> other = Train(2, 4, "", policies, nullptr, {}, "", nullptr, Precision::kBf16);
    ASSERT_EQ(other.size(), keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      EXPECT_EQ(other[i], keep[i]) << "value " << i << " with " << NameOf(policies[0]) << ", " << NameOf(policies[1]);
    }
  }
  const auto peak = [](const Record& r) { return FindNumber(r, "peak_resident_activation_bytes").value_or(-1); };
  EXPECT_LT(peak(keep_summary), 0.55 * peak(fp32_summary));
  const RecordValue* precision = Find(keep_summary, "precision");
  ASSERT_NE(precision, nullptr);
  EXPECT_EQ(std::get<std::string>(precision->data), "bf16");
}

// Host memory that counts what is live at once: all of it, and the buffers of at least `large` bytes.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(size_t large) : large_(large) {}
  Result<void*> Allocate(size_t bytes) override {
    TESSEL_ASSIGN_OR_RETURN(void* p, HostAllocator().Allocate(bytes));
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = bytes;
    live_ += bytes, peak_ = std::max(peak_, live_);
    if (bytes >= large_) ++live_large_, peak_large_ = std::max(peak_large_, live_large_);
    return p;
  }
  void Free(void* p) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t bytes = sizes_.at(p);
      sizes_.erase(p);
      live_ -= bytes;
      if (bytes >= large_) --live_large_;
    }
    HostAllocator().Free(p);
  }
  Device device() const override { return Device::kCpu; }
  std::string_view name() const override { return "counting host memory"; }
  size_t peak() const { return peak_; }
  int peak_large() const { return peak_large_; }

 private:
  const size_t large_;
  std::mutex mu_;
  std::map<void*, size_t> sizes_;
  size_t live_ = 0, peak_ = 0;
  int live_large_ = 0, peak_large_ = 0;
};

// The fused classifier at GPT-2's size: vocabulary 50,257 (wte padded to 50,304 rows), 8 sequences of
// 1,024 tokens. The loss's gradient is written over the logits, so at no time does the stage hold more
// than one [N, V] buffer (1.65 GB in fp32), through a whole training step and the validation. The
// blocks are narrow (the classifier is what is measured).
TEST(GptStage, ClassifierHoldsOneLogitsBufferAtGpt2Vocabulary) {
  LlmStageAssignment a;
  a.model = GptConfig{1, 16, 1, 1024, 50257, 50304};
  a.train.steps = 1;
  a.train.data_parallel = 1;
  a.train.beta1 = 0.9, a.train.beta2 = 0.95, a.train.eps = 1e-8, a.train.final_lr_fraction = 1;
  a.train.microbatches = 1;
  a.train.microbatch = 8;
  a.train.seq_len = 1024;
  a.train.lr = 1e-3;
  a.train.val_every = 1;
  a.train.val_batches = 1;
  a.data.format = DataFormat::kGeneratedText;
  a.data.generated_bytes = 20000;
  a.data.generated_seed = 1;
  a.data.val_fraction = 0.5;
  a.place = StagePlacement{0, 1, 0, 1, 0};
  a.block_policies = {SpillPolicy::kKeep};
  const int64_t logits_bytes = int64_t{8} * 1024 * 50257 * 4;
  CountingAllocator memory(static_cast<size_t>(logits_bytes));
  TestWorker w;
  ExecutorContext c = w.Context(11);
  c.device.allocator = &memory;
  auto executor = BuildStage(a, c);
  ASSERT_TRUE(executor.ok()) << executor.status().ToString();
  auto step = (*executor)->Step(1);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_TRUE(std::isfinite(step->loss));
  EXPECT_NEAR(step->loss, std::log(50257.0), 1.0) << "an untrained model predicts about uniformly";
  auto summary = (*executor)->Evaluate();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(memory.peak_large(), 1) << "[N, V] buffers live at once (logits and a separate gradient would be 2)";
  EXPECT_EQ(FindNumber(*summary, "classifier_logits_bytes").value_or(-1), static_cast<double>(logits_bytes));
  const double scratch = FindNumber(*summary, "peak_scratch_bytes").value_or(-1);
  EXPECT_GE(scratch, static_cast<double>(logits_bytes));
  EXPECT_LT(scratch, 1.01 * static_cast<double>(logits_bytes)) << "the other temporaries are narrow here";
  // Everything else the stage holds (weights, gradients, AdamW's moments, the narrow block's
  // activations) is small beside one logits buffer: the stage's peak is one buffer and a little.
  EXPECT_LT(static_cast<double>(memory.peak()), 1.25 * static_cast<double>(logits_bytes)) << memory.peak();
  std::printf("classifier at V 50257, B 8, T 1024: %d [N, V] buffer(s) of %.2f GB live at once; stage peak %.2f GB\n",
              memory.peak_large(), logits_bytes / 1e9, static_cast<double>(memory.peak()) / 1e9);
}

// Offloaded blocks come back from the spill file bit for bit: the losses equal keep's exactly, with
// the real HDF5 store (6 blocks, more than the pool's buffers, so blocks are read back from the disk).
TEST(GptStage, OffloadGivesBitIdenticalLossesToKeep) {
  using enum SpillPolicy;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tessel_llm_spill_" + std::to_string(getpid()))).string();
  const std::vector<double> keep = Train(2, 3, "", std::vector<SpillPolicy>(6, kKeep));
  const std::vector<std::vector<SpillPolicy>> cases = {std::vector<SpillPolicy>(6, kOffload),
                                                       {kOffload, kRecompute, kOffload, kKeep, kOffload, kOffload}};
  for (const std::vector<SpillPolicy>& policies : cases) {
    Record summary;
    const std::vector<double> other = Train(2, 3, "", policies, &summary, {}, dir);
    ASSERT_EQ(other.size(), keep.size());
    for (size_t i = 0; i < keep.size(); ++i) EXPECT_EQ(other[i], keep[i]) << "value " << i;
    const RecordValue* spill = Find(summary, "spill");
    ASSERT_NE(spill, nullptr);
    const Record& s = std::get<Record>(spill->data);
    EXPECT_GT(FindNumber(s, "written_bytes").value_or(0), 0);
    // Six offloaded blocks and four buffers: some come back from the disk (with four, the pool holds
    // them all).
    if (policies[1] == kOffload) {
      EXPECT_GT(FindNumber(s, "read_bytes").value_or(0), 0) << "nothing came back";
    }
    EXPECT_EQ(FindNumber(s, "recomputed_blocks").value_or(-1), 0);
    // The spill file is gone with the executor.
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir;
  }
  std::filesystem::remove_all(dir);
}

SpillOpener Faulty(storage::SpillFault fault) {
  return [fault](const storage::SpillOptions& o) -> Result<std::unique_ptr<storage::SpillStore>> {
    return storage::SpillStore::WithFile(storage::NewFaultySpillFile(storage::NewMemorySpillFile(), {fault, 1, true}),
                                         o);
  };
}

// A full disk turns spilling off; the blocks are recomputed from their inputs and the losses do not move.
TEST(GptStage, OffloadRecomputesWhenTheDiskIsFull) {
  using enum SpillPolicy;
  const std::vector<double> keep = Train(2, 3, "", std::vector<SpillPolicy>(6, kKeep));
  Record summary;
  const std::vector<double> full =
      Train(2, 3, "", std::vector<SpillPolicy>(6, kOffload), &summary, Faulty(storage::SpillFault::kNoSpace));
  EXPECT_EQ(full, keep);
  const RecordValue* spill = Find(summary, "spill");
  ASSERT_NE(spill, nullptr);
  EXPECT_GE(FindNumber(std::get<Record>(spill->data), "fallbacks").value_or(0), 1);
  EXPECT_GT(FindNumber(std::get<Record>(spill->data), "recomputed_blocks").value_or(0), 0);
}

// A block whose read fails its checksum is recomputed, never used.
TEST(GptStage, OffloadRecomputesABlockThatFailsItsChecksum) {
  using enum SpillPolicy;
  const std::vector<double> keep = Train(2, 3, "", std::vector<SpillPolicy>(6, kKeep));
  Record summary;
  const std::vector<double> corrupt =
      Train(2, 3, "", std::vector<SpillPolicy>(6, kOffload), &summary, Faulty(storage::SpillFault::kCorruptRead));
  EXPECT_EQ(corrupt, keep);
  const RecordValue* spill = Find(summary, "spill");
  ASSERT_NE(spill, nullptr);
  EXPECT_GT(FindNumber(std::get<Record>(spill->data), "recomputed_blocks").value_or(0), 0);
}

// Any other I/O error stops the run (exit 6), naming the cause.
TEST(GptStage, OffloadStopsOnAnIoError) {
  using enum SpillPolicy;
  EXPECT_NONFATAL_FAILURE(
      Train(2, 2, "", std::vector<SpillPolicy>(6, kOffload), nullptr, Faulty(storage::SpillFault::kIoError)),
      "injected");
}

// An unwritable spill directory is a storage error (exit 6) when the executor is built, before step 1.
TEST(GptStage, OffloadToAnUnwritableDirectoryFailsBeforeTraining) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("tessel_llm_notadir_" + std::to_string(getpid()))).string();
  std::ofstream(file) << "x";
  Status st;
  EXPECT_TRUE(Train(1, 1, "", {SpillPolicy::kOffload, SpillPolicy::kKeep}, nullptr, {}, file + "/spill", &st).empty());
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_NE(st.message().find(file + "/spill"), std::string::npos) << st.message();
  std::filesystem::remove(file);
}

TEST(LlmStageAssignment, CarriesOnePolicyPerBlockOfTheStage) {
  LlmStageAssignment a;
  a.model.layers = 4;
  a.place = StagePlacement{0, 1, 1, 4, 0};
  a.block_policies = {SpillPolicy::kRecompute, SpillPolicy::kKeep, SpillPolicy::kOffload};
  const auto round_trip = [](const LlmStageAssignment& x) -> std::unique_ptr<AssignmentPayload> {
    ByteWriter out;
    x.Encode(out);
    const std::vector<uint8_t> bytes = out.Take();
    ByteReader in(bytes.data(), bytes.size());
    return DecodeLlmAssignment(in);
  };
  auto back = round_trip(a);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(dynamic_cast<LlmStageAssignment&>(*back).block_policies, a.block_policies);
  EXPECT_NE(back->Describe().find("1 recomputed"), std::string::npos) << back->Describe();
  EXPECT_NE(back->DescribeSettings().find("block_policies=[recompute,keep,offload]"), std::string::npos)
      << back->DescribeSettings();
  // 2 policies for 3 blocks: the bytes are fine, the executor refuses the payload before using it.
  a.block_policies.pop_back();
  auto factory = FindExecutor(LlmStageAssignment::kKind);
  ASSERT_TRUE(factory.ok());
  auto short_payload = round_trip(a);
  ASSERT_NE(short_payload, nullptr);
  Result<std::unique_ptr<Executor>> built = (*factory)->build(std::move(short_payload), ExecutorContext{});
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), Code::kInternal);
  EXPECT_NE(built.status().message().find("2 block policies for blocks [1, 4)"), std::string::npos)
      << built.status().message();
}

TEST(GptStage, WritesStageWeightsThatAssembleIntoAnLlmcCheckpoint) {
  const std::string dir = (std::filesystem::temp_directory_path() / "tessel_llm_test_run").string();
  std::filesystem::remove_all(dir);
  ASSERT_EQ(Train(1, 1, dir).size(), 2u);
  auto ck = AssembleLlmc(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->config.num_layers, 2);
  EXPECT_EQ(ck->config.channels, 32);
  EXPECT_EQ(static_cast<int64_t>(ck->params.size()), storage::LlmcNumParameters(ck->config));
  // ln1w starts at 1 and moves by about lr in one step.
  for (const storage::LlmcTensor& t : storage::LlmcTensors(ck->config)) {
    if (t.name == "ln1w") {
      EXPECT_NEAR(ck->params[static_cast<size_t>(t.offset)], 1.0f, 2e-3f);
    }
  }
  std::filesystem::remove_all(dir + "/weights");
  EXPECT_FALSE(AssembleLlmc(dir).ok());
}

}  // namespace
}  // namespace tessel::workers
