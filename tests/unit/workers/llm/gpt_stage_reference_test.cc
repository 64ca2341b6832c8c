// The GPT stage executor against an outside source of truth: llm.c's equations, in double
// (llmc_reference.h). A tiny llm.c checkpoint, written here in train_gpt2.c's format with random weights
// from a fixed seed (padded vocabulary, T = 13: no tile size divides it), trains through the registry as
// a worker runs it (data.format llmc, model.init_from); the reference trains the same checkpoint on the
// same tokens. Compared: the step-1 loss, every parameter's gradient after step 1 (read back through
// SaveState: after one AdamW step m = (1 - beta1) g), three steps of losses and the parameters after
// them, with 1 and with 2 micro-batches. The optimizer settings make the schedule trivial (warm-up 0,
// constant rate, no clipping); the weight decay is on, on the 2-D tensors, as train_gpt2.cu decays
// (train_gpt2.c decays every tensor; Tessel follows the CUDA trainer and nanoGPT).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "llmc_reference.h"
#include "stage_harness.h"
#include "storage/llmc.h"
#include "workers/executor_registry.h"
#include "workers/llm/llm_settings.h"

namespace tessel::workers {
namespace {

using reference::Gpt2;
using reference::Gpt2Shape;
using reference::Gpt2Tensor;

// maxT 16, V 45 padded to 64, 2 blocks, 3 heads of 8, width 24; 2 sequences of 13 tokens a step.
constexpr Gpt2Shape kShape{16, 45, 64, 2, 3, 24};
// GPT-2's own vocabulary, 50,257 padded to 50,304 (llm.c's padding), on one narrow block: the classifier
// at the size people train, every token id up to the last real one, the padded rows never scored.
constexpr Gpt2Shape kGpt2Vocabulary{16, 50257, 50304, 1, 2, 16};
constexpr int kSeqLen = 13, kSequences = 2, kSteps = 3;
constexpr reference::AdamWSettings kAdamW{1e-2, 0.9, 0.95, 1e-8, 0.1};

// Tolerances. Tessel computes in float32 and sums in other orders (BLAS blocks, per-block partial sums),
// so it is a few float roundings off: measured, 1e-8 of the losses and 1e-6 of a tensor's largest
// gradient. What the tolerances catch is far larger: a dropped gradient path is off by 1e-1 to 1.
constexpr double kLossTolerance = 1e-5;        // step 1, relative
constexpr double kGradientTolerance = 1e-4;    // elementwise, relative to the tensor's largest |gradient|
constexpr double kTrajectoryTolerance = 1e-4;  // steps 2 and 3, relative
constexpr double kParameterTolerance = 1e-3;   // after the last step, absolute, in units of lr

// Numbers in [-1, 1) from a fixed seed, the same with every standard library (its distributions are not).
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : rng_(seed) {}
  double operator()() { return static_cast<double>(rng_() >> 11) * 0x1.0p-52 - 1.0; }

 private:
  std::mt19937_64 rng_;
};

// Weights large enough that every path matters: attention far from uniform, GELUs in their bend,
// logits spread over several nats, LayerNorm gains and every bias away from 1 and 0.
std::vector<float> RandomParameters(const Gpt2Shape& shape = kShape) {
  Uniform u(20240326);
  std::vector<float> p;
  for (const Gpt2Tensor& t : reference::Gpt2Tensors(shape)) {
    const bool gain = t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw";
    const double scale = t.name == "wte" || t.name == "wpe" ? 0.5 : t.shape.size() == 2 ? 0.3 : gain ? 0.2 : 0.1;
    for (int64_t i = 0; i < t.numel; ++i) p.push_back(static_cast<float>((gain ? 1.0 : 0.0) + scale * u()));
  }
  return p;
}

// train_gpt2.c's gpt2_build_from_checkpoint format, written by hand rather than by Tessel's writer:
// 256 int32 (magic 20240326, version 3 = float32, maxT, V, L, NH, C, Vp), then the float32 parameters.
void WriteCheckpoint(const std::string& path, const Gpt2Shape& shape, const std::vector<float>& params) {
  static_assert(std::endian::native == std::endian::little, "llm.c files are little-endian");
  int32_t header[256] = {20240326,     3,           shape.max_t,    shape.vocab,
                         shape.layers, shape.heads, shape.channels, shape.padded_vocab};
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(params.data()), static_cast<std::streamsize>(params.size() * sizeof(float)));
  ASSERT_TRUE(out.good()) << path;
}

// What Tessel did: the loss of each step, each parameter's gradient at step 1 and its value after the
// last step, by Tessel's name ("wte", "h1.qkvb", "lnfw", ...).
struct TesselRun {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> step1_grads, final_params;
};

// Tessel's parameter names in declaration order (one stage holds them all): wte, wpe, each block's 12
// tensors, lnfw, lnfb. SaveState's "adamw/m" is flat over them in this order.
std::vector<std::string> TesselNames(const Gpt2Shape& shape) {
  std::vector<std::string> names = {"wte", "wpe"};
  for (int l = 0; l < shape.layers; ++l) {
    for (const Gpt2Tensor& t : reference::Gpt2Tensors(shape)) {
      if (t.per_layer) names.push_back("h" + std::to_string(l) + "." + t.name);
    }
  }
  names.push_back("lnfw");
  names.push_back("lnfb");
  return names;
}

std::vector<double> ToDouble(const Tensor& t) {
  const float* f = t.data<float>();
  return std::vector<double>(f, f + t.numel());
}

void RunTessel(const Gpt2Shape& shape, int32_t microbatches, const std::string& checkpoint, const std::string& tokens,
               TesselRun* run) {
  LlmStageAssignment a;
  a.model = GptConfig{shape.layers, shape.channels, shape.heads, shape.max_t, shape.vocab, shape.padded_vocab};
  a.train.steps = kSteps;
  a.train.data_parallel = 1;
  a.train.microbatches = microbatches;
  a.train.microbatch = kSequences / microbatches;
  a.train.seq_len = kSeqLen;
  a.train.lr = kAdamW.lr;
  a.train.beta1 = kAdamW.beta1;
  a.train.beta2 = kAdamW.beta2;
  a.train.eps = kAdamW.eps;
  a.train.weight_decay = kAdamW.weight_decay;
  a.train.grad_clip = 0;
  a.train.warmup_steps = 0;
  a.train.final_lr_fraction = 1;
  a.data.format = DataFormat::kLlmc;
  a.data.train_tokens = tokens;
  a.data.val_fraction = 0;
  a.data.order = BatchOrder::kSequential;
  a.init_from = checkpoint;
  a.place = StagePlacement{0, 1, 0, shape.layers, 0};
  a.block_policies = std::vector<SpillPolicy>(shape.layers, SpillPolicy::kKeep);
  a.spill.dir = "/tmp/tessel-spill";
  a.spill.name = "gpt_stage_reference_test";
  TestWorker w;
  const ExecutorContext c = w.Context(1);  // outlives the executor, which keeps references into it
  auto executor = BuildStage(a, c);
  ASSERT_TRUE(executor.ok()) << executor.status().ToString();
  const std::vector<std::string> names = TesselNames(shape);
  for (int64_t s = 1; s <= kSteps; ++s) {
    auto r = (*executor)->Step(s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    run->losses.push_back(r->loss);
    if (s != 1 && s != kSteps) continue;
    MemoryState state;
    ASSERT_TRUE((*executor)->SaveState(state).ok());
    if (s == kSteps) {
      for (const std::string& n : names) {
        auto p = state.Read("param/" + n);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        run->final_params[n] = ToDouble(*p);
      }
    }
    if (s != 1) continue;
    // One step from m = 0: m = beta1 0 + (1 - beta1) g, so g = m / (1 - beta1) to a float rounding.
    auto m = state.Read("adamw/m");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const std::vector<double> flat = ToDouble(*m);
    size_t at = 0;
    for (const std::string& n : names) {
      auto p = state.Read("param/" + n);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      const auto count = static_cast<size_t>(p->numel());
      ASSERT_LE(at + count, flat.size());
      std::vector<double>& g = run->step1_grads[n];
      for (size_t i = 0; i < count; ++i) g.push_back(flat[at + i] / (1 - kAdamW.beta1));
      at += count;
    }
    ASSERT_EQ(at, flat.size()) << "adamw/m is not flat over the parameters in declaration order";
  }
}

// The reference's slice for a Tessel parameter name.
std::vector<double> Slice(const Gpt2Shape& shape, const std::vector<double>& flat, const std::string& tessel_name) {
  int layer = 0;
  std::string base = tessel_name;
  if (tessel_name[0] == 'h') {
    const size_t dot = tessel_name.find('.');
    layer = std::stoi(tessel_name.substr(1, dot - 1));
    base = tessel_name.substr(dot + 1);
  }
  for (const Gpt2Tensor& t : reference::Gpt2Tensors(shape)) {
    if (t.name != base) continue;
    const int64_t n = t.per_layer ? t.numel / shape.layers : t.numel;
    const auto first = flat.begin() + t.offset + layer * n;
    return std::vector<double>(first, first + n);
  }
  ADD_FAILURE() << "no llm.c tensor for " << tessel_name;
  return {};
}

// max |a - b| / max |b|, and where the largest difference is.
struct Difference {
  double relative = 0, scale = 0;
  size_t at = 0;
};
Difference Compare(const std::vector<double>& tessel, const std::vector<double>& ref) {
  Difference d;
  double worst = -1;
  for (size_t i = 0; i < ref.size() && i < tessel.size(); ++i) {
    d.scale = std::max(d.scale, std::abs(ref[i]));
    if (std::abs(tessel[i] - ref[i]) > worst) worst = std::abs(tessel[i] - ref[i]), d.at = i;
  }
  d.relative = d.scale > 0 ? worst / d.scale : worst;
  return d;
}

// What the reference computes: the loss of each step, every gradient at step 1, the parameters after the
// last step (llm.c's flat layout).
struct Reference {
  std::vector<double> losses, step1_grads, final_params;
};

// Enough tokens for the steps without wrapping (step k reads tokens [k B T, (k + 1) B T], llm.c's
// loader), spread over the whole vocabulary.
std::vector<int32_t> RandomTokens(const Gpt2Shape& shape) {
  Uniform u(7);
  std::vector<int32_t> tokens;
  for (int i = 0; i < (kSteps + 1) * kSequences * kSeqLen + 1; ++i) {
    tokens.push_back(std::min(shape.vocab - 1, static_cast<int32_t>((u() + 1) / 2 * shape.vocab)));
  }
  return tokens;
}

// Writes the checkpoint and token files into `dir` and trains the reference on them.
Reference WriteFilesAndTrainReference(const Gpt2Shape& shape, const std::string& dir, std::vector<int32_t>* tokens) {
  std::filesystem::create_directories(dir);
  const std::vector<float> params = RandomParameters(shape);
  WriteCheckpoint(dir + "/gpt2_tiny.bin", shape, params);
  *tokens = RandomTokens(shape);
  const Status st = storage::WriteLlmcTokens(dir + "/tokens.bin", *tokens);
  EXPECT_TRUE(st.ok()) << st.ToString();
  Reference ref;
  Gpt2 model(shape, std::vector<double>(params.begin(), params.end()));
  for (int step = 1; step <= kSteps; ++step) {
    std::vector<int> in, target;
    const int64_t start = int64_t{step - 1} * kSequences * kSeqLen;
    for (int i = 0; i < kSequences * kSeqLen; ++i) {
      in.push_back((*tokens)[static_cast<size_t>(start + i)]);
      target.push_back((*tokens)[static_cast<size_t>(start + i + 1)]);
    }
    ref.losses.push_back(model.ForwardBackward(in, target, kSequences, kSeqLen));
    if (step == 1) ref.step1_grads = model.grads();
    model.Update(kAdamW, step);
  }
  ref.final_params = model.params();
  return ref;
}

// Every gradient of `run` against the reference's, each within kGradientTolerance of its tensor's
// largest; prints the worst per llm.c tensor (over the blocks).
void ExpectGradientsMatch(const Gpt2Shape& shape, const TesselRun& run, const Reference& ref_run) {
  std::map<std::string, double> worst_by_type;
  for (const std::string& n : TesselNames(shape)) {
    const std::vector<double> ref = Slice(shape, ref_run.step1_grads, n);
    const auto it = run.step1_grads.find(n);
    ASSERT_NE(it, run.step1_grads.end()) << n;
    ASSERT_EQ(it->second.size(), ref.size()) << n;
    const Difference d = Compare(it->second, ref);
    EXPECT_GT(d.scale, 0) << n << ": the reference's gradient is all zero, so the comparison proves nothing";
    EXPECT_LE(d.relative, kGradientTolerance)
        << "the gradient of " << n << " differs from llm.c's equations: max |Tessel - reference| / max "
        << "|reference| = " << d.relative << " at element " << d.at << " (Tessel " << it->second[d.at] << ", reference "
        << ref[d.at] << ", largest |reference| " << d.scale << ")";
    const std::string type = n.substr(n.find('.') + 1);
    worst_by_type[type] = std::max(worst_by_type[type], d.relative);
  }
  std::string line;
  for (const auto& [type, worst] : worst_by_type) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.1e", type.c_str(), worst);
    line += buf;
  }
  std::printf("worst gradient difference per tensor (of its largest |gradient|):%s\n", line.c_str());
}

void ExpectLossesMatch(const TesselRun& run, const Reference& ref) {
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t s = 0; s < run.losses.size(); ++s) {
    const double tol = (s == 0 ? kLossTolerance : kTrajectoryTolerance) * ref.losses[s];
    EXPECT_NEAR(run.losses[s], ref.losses[s], tol) << "the loss of step " << s + 1 << " differs from llm.c's";
    std::printf("step %zu loss: Tessel %.9f, reference %.9f, relative difference %.1e\n", s + 1, run.losses[s],
                ref.losses[s], std::abs(run.losses[s] - ref.losses[s]) / ref.losses[s]);
  }
}

std::string TempDir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))).string();
}

// The files, and what the reference computes from them (once for the suite).
class GptReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir("tessel_gpt_reference"));
    tokens_ = new std::vector<int32_t>();
    ref_ = new Reference(WriteFilesAndTrainReference(kShape, *dir_, tokens_));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete tokens_;
    delete ref_;
  }
  void SetUp() override {
    ASSERT_EQ(ref_->losses.size(), static_cast<size_t>(kSteps)) << "the suite's files or reference failed";
  }
  static std::string checkpoint() { return *dir_ + "/gpt2_tiny.bin"; }
  static std::string token_file() { return *dir_ + "/tokens.bin"; }

  static std::string* dir_;
  static std::vector<int32_t>* tokens_;
  static Reference* ref_;
};
std::string* GptReference::dir_ = nullptr;
std::vector<int32_t>* GptReference::tokens_ = nullptr;
Reference* GptReference::ref_ = nullptr;

// The reference is itself checked: its gradient against central differences of its loss, in double, on
// a few elements of every tensor (the padded rows of wte have none: nothing scores them).
TEST_F(GptReference, ReferenceGradientMatchesFiniteDifferences) {
  const std::vector<float> p32 = RandomParameters();
  const std::vector<double> params(p32.begin(), p32.end());
  std::vector<int> in, target;
  for (int i = 0; i < kSequences * kSeqLen; ++i) {
    in.push_back((*tokens_)[static_cast<size_t>(i)]);
    target.push_back((*tokens_)[static_cast<size_t>(i + 1)]);
  }
  Gpt2 model(kShape, params);
  model.ForwardBackward(in, target, kSequences, kSeqLen);
  const double h = 1e-5;
  Uniform u(3);
  for (const Gpt2Tensor& t : reference::Gpt2Tensors(kShape)) {
    double scale = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      scale = std::max(scale, std::abs(model.grads()[static_cast<size_t>(t.offset + i)]));
    }
    for (int k = 0; k < 4; ++k) {
      const auto i = static_cast<size_t>(t.offset + static_cast<int64_t>((u() + 1) / 2 * static_cast<double>(t.numel)));
      std::vector<double> plus = params, minus = params;
      plus[i] += h;
      minus[i] -= h;
      const double fd = (Gpt2(kShape, plus).ForwardBackward(in, target, kSequences, kSeqLen) -
                         Gpt2(kShape, minus).ForwardBackward(in, target, kSequences, kSeqLen)) /
                        (2 * h);
      EXPECT_NEAR(model.grads()[i], fd, 1e-6 * scale) << t.name << " element " << i - static_cast<size_t>(t.offset);
    }
  }
}

TEST_F(GptReference, StepOneLossAndEveryGradientMatchLlmcEquationsInDouble) {
  TesselRun run;
  RunTessel(kShape, 1, checkpoint(), token_file(), &run);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_NEAR(run.losses[0], ref_->losses[0], kLossTolerance * ref_->losses[0])
      << "the step-1 loss differs from llm.c's equations";
  ExpectGradientsMatch(kShape, run, *ref_);
}

// Three AdamW steps: the losses, and every parameter after them. A parameter moves by about lr a step
// (Adam's update is lr g / |g| at step 1), and a wrong weight decay (on the 1-D tensors too, say) moves a
// LayerNorm gain by lr wd a step, 1e-3 here; the difference allowed is a hundredth of that. The key
// biases are left out: softmax is the same for every shift of a query's scores, so their gradient is zero
// and what either side has is rounding, which Adam scales up to +-lr.
TEST_F(GptReference, ThreeAdamWStepsFollowLlmcLossesAndParameters) {
  TesselRun run;
  RunTessel(kShape, 1, checkpoint(), token_file(), &run);
  ASSERT_FALSE(HasFatalFailure());
  ExpectLossesMatch(run, *ref_);
  double worst = 0, worst_tessel = 0, worst_ref = 0;
  std::string where;
  for (const std::string& n : TesselNames(kShape)) {
    const std::vector<double> ref = Slice(kShape, ref_->final_params, n);
    const std::vector<double>& got = run.final_params.at(n);
    ASSERT_EQ(got.size(), ref.size()) << n;
    const bool qkvb = n.ends_with(".qkvb");
    for (size_t i = 0; i < ref.size(); ++i) {
      const bool key_bias = qkvb && i >= static_cast<size_t>(kShape.channels) && i < 2u * kShape.channels;
      if (key_bias || std::abs(got[i] - ref[i]) <= worst) continue;
      worst = std::abs(got[i] - ref[i]), worst_tessel = got[i], worst_ref = ref[i];
      where = n + "[" + std::to_string(i) + "]";
    }
  }
  std::printf("worst parameter difference after %d steps: %.2e at %s (Tessel %.9f, reference %.9f); lr %.0e\n", kSteps,
              worst, where.c_str(), worst_tessel, worst_ref, kAdamW.lr);
  EXPECT_LE(worst, kParameterTolerance * kAdamW.lr)
      << "the parameters after " << kSteps << " steps differ from llm.c's AdamW by " << worst << " at " << where;
}

// Gradient accumulation: 2 micro-batches of 1 sequence give the reference's gradient and losses too.
TEST_F(GptReference, TwoMicroBatchesAccumulateLlmcGradients) {
  TesselRun run;
  RunTessel(kShape, 2, checkpoint(), token_file(), &run);
  ASSERT_FALSE(HasFatalFailure());
  ExpectLossesMatch(run, *ref_);
  ExpectGradientsMatch(kShape, run, *ref_);
}

// GPT-2's vocabulary, 50,257 padded to 50,304: three steps of losses and every step-1 gradient against
// llm.c's equations, as for the small vocabulary. The padded rows of wte get no gradient on either side
// (nothing scores them), which the comparison covers: they are part of wte.
TEST(GptReferenceVocabulary, Gpt2VocabularyPaddedTo50304FollowsLlmcEquations) {
  const std::string dir = TempDir("tessel_gpt_reference_vocab");
  std::vector<int32_t> tokens;
  const Reference ref = WriteFilesAndTrainReference(kGpt2Vocabulary, dir, &tokens);
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(*std::max_element(tokens.begin(), tokens.end()), 50000) << "the tokens reach the top of the vocabulary";
  TesselRun run;
  RunTessel(kGpt2Vocabulary, 1, dir + "/gpt2_tiny.bin", dir + "/tokens.bin", &run);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(HasFatalFailure());
  ExpectLossesMatch(run, ref);
  ExpectGradientsMatch(kGpt2Vocabulary, run, ref);
  const std::vector<double>& dwte = run.step1_grads.at("wte");
  ASSERT_EQ(dwte.size(), static_cast<size_t>(kGpt2Vocabulary.padded_vocab * kGpt2Vocabulary.channels));
  for (size_t i = static_cast<size_t>(kGpt2Vocabulary.vocab * kGpt2Vocabulary.channels); i < dwte.size(); ++i) {
    ASSERT_EQ(dwte[i], 0.0) << "a padded row of wte got a gradient at element " << i;
  }
}

}  // namespace
}  // namespace tessel::workers
