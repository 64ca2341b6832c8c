// The rules across fields and the data-path check (jobs/validate.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

using ::testing::HasSubstr;

// Line 1 version, 2 [job], 3 name, 4 kind, 5 [data], 6 format; `extra` starts at line 7.
std::string Job(const std::string& extra = "", const std::string& kind = "rgnn",
                const std::string& format = "synthetic") {
  return "version = 1\n[job]\nname = \"t\"\nkind = \"" + kind + "\"\n[data]\nformat = \"" + format + "\"\n" + extra;
}

std::string Problem(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Result<JobSpec> r = ParseJob(text, "t.toml", overrides);
  EXPECT_FALSE(r.ok()) << "expected a job-file error";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kUsage);
  return r.status().message();
}

bool Valid(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Result<JobSpec> r = ParseJob(text, "t.toml", overrides);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok();
}

// A valid llm job: 2 pipeline stages x 2 replicas on 4 workers, 2 micro-batches of 2 sequences each.
// Line numbers as in Job(); the tests change it by Edit() (same lines) or by overrides.
const std::string kLlmJob =
    "version = 1\n[job]\nname = \"t\"\nkind = \"llm\"\n[data]\nformat = \"text\"\n"
    "text = \"input.txt\"\n"  // 7
    "[resources]\n"
    "workers = 4\n"  // 9
    "[model]\n"
    "name = \"gpt2\"\n"  // 11
    "layers = 4\n"
    "hidden = 64\n"  // 13
    "heads = 4\n"
    "context = 32\n"  // 15
    "[train]\n"
    "optimizer = \"adamw\"\n"  // 17
    "steps = 10\n"
    "batch_size = 8\n"  // 19
    "[pipeline]\n"
    "stages = 2\n"  // 21
    "microbatches = 2\n"
    "data_parallel = 2\n";  // 23

// kLlmJob with the line `from` replaced by `to` ("" removes it).
std::string Edit(const std::string& from, const std::string& to) {
  std::string text = kLlmJob;
  const size_t at = text.find(from + "\n");
  EXPECT_NE(at, std::string::npos) << "no line '" << from << "'";
  if (at == std::string::npos) return text;
  return text.replace(at, from.size() + 1, to.empty() ? "" : to + "\n");
}

TEST(ValidateJob, LlmJobPasses) {
  ASSERT_TRUE(Valid(kLlmJob));
  const JobSpec spec = *ParseJob(kLlmJob, "t.toml", {});
  EXPECT_EQ(spec.job.kind, JobKind::kLlm);
  EXPECT_EQ(spec.model.name, "gpt2");
  EXPECT_EQ(spec.pipeline.stages, 2);
  // The limits of each rule, on the valid side.
  EXPECT_TRUE(Valid(kLlmJob, {"train.microbatch_size=2"}));  // 2 x 2 x 2 = 8
  EXPECT_TRUE(Valid(kLlmJob, {"train.seq_len=32"}));         // = model.context
  EXPECT_TRUE(Valid(kLlmJob, {"train.warmup_steps=10"}));    // = train.steps
  EXPECT_TRUE(Valid(kLlmJob, {"pipeline.layers=[1, 3]"}));
  EXPECT_TRUE(Valid(kLlmJob, {"pipeline.stages=4", "pipeline.data_parallel=1", "pipeline.microbatches=8"}));
  EXPECT_TRUE(Valid(kLlmJob, {"data.format=generated_text"}));  // needs no file
  EXPECT_TRUE(Valid(kLlmJob, {"data.format=llmc", "data.train_tokens=train.bin", "model.vocab_size=50257"}));
}

TEST(ValidateJob, LlmJobNamesItsModelAndOptimizer) {
  // jobs/examples/README.md's smallest llm job, and the same without the keys whose defaults are rgnn's.
  const std::string smallest =
      "version = 1\n[job]\nname = \"tiny-gpt\"\nkind = \"llm\"\n[data]\nformat = \"generated_text\"\n";
  EXPECT_TRUE(Valid(smallest + "[model]\nname = \"gpt2\"\n[train]\noptimizer = \"adamw\"\nbatch_size = 8\n"));
  EXPECT_EQ(Problem(smallest),
            "t.toml: model.name = \"rgcn\" is an rgnn model; an llm job trains model.name = \"gpt2\"\n"
            "t.toml: train.optimizer = \"adam\": an llm job trains with \"adamw\"");
}

TEST(ValidateJob, LlmRulesAreNotRgnnRules) {
  // A gpt2 has heads that an RGCN may not; the llm keys of an rgnn job are ignored, as other formats' are.
  EXPECT_TRUE(Valid(kLlmJob, {"model.heads=8"}));
  EXPECT_TRUE(Valid(Job(), {"train.seq_len=1000", "train.warmup_steps=500", "train.microbatch_size=3"}));
}

TEST(ValidateJob, LlmMoreStagesThanWorkers) {
  EXPECT_EQ(Problem(Edit("workers = 4", "workers = 1"), {"pipeline.data_parallel=1"}),
            "t.toml:21:1: pipeline.stages x pipeline.data_parallel = 2 x 1 = 2 but resources.workers = 1: each worker "
            "runs one stage of one replica (more stages than workers)");
}

TEST(ValidateJob, LlmStagesTimesReplicasAreTheWorkers) {
  const std::string three_workers = Problem(Edit("workers = 4", "workers = 3"));
  EXPECT_EQ(three_workers,
            "t.toml:21:1: pipeline.stages x pipeline.data_parallel = 2 x 2 = 4 but resources.workers = 3: each worker "
            "runs one stage of one replica");
  EXPECT_THAT(Problem(kLlmJob, {"pipeline.data_parallel=1"}),
              HasSubstr("pipeline.stages x pipeline.data_parallel = 2 x 1 = 2 but resources.workers = 4"));
  // pipeline.stages left at 1: reported where resources.workers was set.
  EXPECT_THAT(Problem(Edit("stages = 2", "")),
              HasSubstr("t.toml:9:1: pipeline.stages x pipeline.data_parallel = 1 x 2 = 2 but resources.workers = 4"));
}

TEST(ValidateJob, LlmBatchIsMicrobatchTimesMicrobatchesTimesReplicas) {
  EXPECT_EQ(Problem(kLlmJob, {"train.microbatch_size=3"}),
            "--set train.microbatch_size=3: train.microbatch_size x pipeline.microbatches x pipeline.data_parallel = "
            "3 x 2 x 2 = 12 but train.batch_size = 8 (the global batch, in sequences)");
  // microbatch_size 0 derives it, so the batch must divide.
  EXPECT_EQ(Problem(kLlmJob, {"train.batch_size=6"}),
            "--set train.batch_size=6: train.batch_size = 6 is not divisible by pipeline.microbatches x "
            "pipeline.data_parallel = 4: every micro-batch has the same number of sequences");
  EXPECT_THAT(Problem(kLlmJob, {"pipeline.microbatches=3"}),
              HasSubstr("t.toml:19:1: train.batch_size = 8 is not divisible by pipeline.microbatches x "
                        "pipeline.data_parallel = 6"));
}

TEST(ValidateJob, LlmLayerPoliciesHaveOneEntryPerBlockOrNone) {
  // kLlmJob has 4 layers.
  ASSERT_TRUE(Valid(kLlmJob, {"spill.layer_policies=[]"}));
  ASSERT_TRUE(Valid(kLlmJob, {"spill.layer_policies=[\"keep\", \"recompute\", \"offload\", \"keep\"]"}));
  const JobSpec spec =
      *ParseJob(kLlmJob, "t.toml", {"spill.layer_policies=[\"recompute\", \"keep\", \"keep\", \"offload\"]"});
  EXPECT_EQ(spec.spill.layer_policies, (std::vector<SpillPolicy>{SpillPolicy::kRecompute, SpillPolicy::kKeep,
                                                                 SpillPolicy::kKeep, SpillPolicy::kOffload}));
  EXPECT_EQ(Problem(kLlmJob, {"spill.layer_policies=[\"keep\", \"recompute\"]"}),
            "--set spill.layer_policies=[\"keep\", \"recompute\"]: spill.layer_policies has 2 entries but "
            "model.layers = 4: give one policy per block, first block first (or [] for spill.policy on every block)");
  // In the file: reported at the key's line, also when it is model.layers that changed.
  EXPECT_THAT(Problem(kLlmJob + "[spill]\nlayer_policies = [\"keep\", \"keep\", \"keep\", \"keep\", \"keep\"]\n"),
              HasSubstr("t.toml:25:1: spill.layer_policies has 5 entries but model.layers = 4"));
  EXPECT_THAT(
      Problem(kLlmJob + "[spill]\nlayer_policies = [\"keep\", \"keep\", \"keep\", \"keep\"]\n", {"model.layers=3"}),
      HasSubstr("t.toml:25:1: spill.layer_policies has 4 entries but model.layers = 3"));
}

TEST(ValidateJob, LlmLayerPoliciesTakeKeepRecomputeOrOffload) {
  // "auto" is a job-wide choice (spill.policy), not a block's.
  EXPECT_EQ(Problem(kLlmJob, {"spill.layer_policies=[\"keep\", \"auto\", \"keep\", \"keep\"]"}),
            "--set spill.layer_policies=[\"keep\", \"auto\", \"keep\", \"keep\"]: spill.layer_policies: element 1 = "
            "\"auto\" is not allowed; allowed values: \"keep\", \"recompute\", \"offload\"");
  EXPECT_THAT(Problem(kLlmJob + "[spill]\nlayer_policies = [\"keep\", \"keep\", \"kept\", \"keep\"]\n"),
              HasSubstr("t.toml:25:1: spill.layer_policies: element 2 = \"kept\" is not allowed"));
  EXPECT_THAT(Problem(kLlmJob, {"spill.layer_policies=[\"keep\", 1, \"keep\", \"keep\"]"}),
              HasSubstr("expected an array of strings, but element 1 is integer"));
}

TEST(ValidateJob, RgnnJobsIgnoreLayerPolicies) {
  // The rgnn executor keeps everything; its jobs are not held to the llm rule (model.layers is 2 here).
  EXPECT_TRUE(Valid(Job(), {"spill.layer_policies=[\"recompute\"]", "spill.policy=recompute"}));
}

TEST(ValidateJob, LlmSequencesFitTheContext) {
  EXPECT_EQ(Problem(kLlmJob, {"train.seq_len=33"}),
            "--set train.seq_len=33: train.seq_len = 33 is longer than model.context = 32 positions");
  EXPECT_THAT(Problem(kLlmJob, {"train.seq_len=64", "model.context=16"}),
              HasSubstr("--set train.seq_len=64: train.seq_len = 64 is longer than model.context = 16"));
}

TEST(ValidateJob, LlmHeadsSplitTheWidth) {
  EXPECT_EQ(Problem(kLlmJob, {"model.heads=5"}),
            "--set model.heads=5: model.hidden = 64 is not divisible by model.heads = 5: gpt2 splits the width across "
            "the heads");
  EXPECT_THAT(Problem(Edit("hidden = 64", "hidden = 66")),
              HasSubstr("t.toml:14:1: model.hidden = 66 is not divisible by model.heads = 4"));
}

TEST(ValidateJob, LlmTrainsGpt2AndRgnnDoesNot) {
  EXPECT_EQ(Problem(Edit("name = \"gpt2\"", "name = \"rgcn\"")),
            "t.toml:11:1: model.name = \"rgcn\" is an rgnn model; an llm job trains model.name = \"gpt2\"");
  // Left at its default ("rgcn"): reported at the file.
  EXPECT_EQ(Problem(Edit("name = \"gpt2\"", "")),
            "t.toml: model.name = \"rgcn\" is an rgnn model; an llm job trains model.name = \"gpt2\"");
  EXPECT_EQ(Problem(Job("[model]\nname = \"gpt2\"\n")),
            "t.toml:8:1: model.name = \"gpt2\" is an llm model; an rgnn job trains an RGNN model (\"rgcn\", \"rgat\", "
            "\"hgt\", ...)");
  // Which RGNN models exist is the graph planner's to say (tests/unit/orchestrator/model_rules_test.cc).
  EXPECT_TRUE(Valid(Job("[model]\nname = \"gcn\"\n")));
}

TEST(ValidateJob, LlmReadsTokensAndRgnnReadsGraphs) {
  EXPECT_EQ(Problem(kLlmJob, {"data.format=synthetic"}),
            "--set data.format=synthetic: data.format = \"synthetic\" is a graph; an llm job reads \"text\", "
            "\"llmc\" or \"generated_text\"");
  EXPECT_THAT(Problem(kLlmJob, {"data.format=graph", "data.graph=g.h5"}),
              HasSubstr("data.format = \"graph\" is a graph; an llm job reads"));
  for (const std::string format : {"text", "llmc", "generated_text"}) {
    SCOPED_TRACE(format);
    EXPECT_EQ(Problem(Job("text = \"a.txt\"\ntrain_tokens = \"a.bin\"\n", "rgnn", format)),
              "t.toml:6:1: data.format = \"" + format + "\" holds tokens for an llm job; an rgnn job reads a graph");
  }
}

TEST(ValidateJob, LlmTokenFormatsNeedTheirFiles) {
  EXPECT_EQ(Problem(Edit("text = \"input.txt\"", "")),
            "t.toml:5:2: missing required key 'data.text' (the text file): data.format = \"text\" needs it");
  EXPECT_EQ(Problem(kLlmJob, {"data.format=llmc"}),
            "t.toml:5:2: missing required key 'data.train_tokens' (the llm.c token file): data.format = \"llmc\" "
            "needs it");
}

TEST(ValidateJob, LlmTextNeedsAByteVocabulary) {
  EXPECT_EQ(Problem(kLlmJob, {"model.vocab_size=128"}),
            "--set model.vocab_size=128: model.vocab_size = 128: data.format = \"text\" has byte tokens 0..255; use "
            ">= 256");
}

TEST(ValidateJob, LlmPipelineLayersSplitTheBlocks) {
  const std::string expected_tail =
      ": give pipeline.stages = 2 entries, each >= 1, summing to model.layers = 4 (or [] to let the planner split)";
  EXPECT_EQ(Problem(kLlmJob, {"pipeline.layers=[4]"}),
            "--set pipeline.layers=[4]: pipeline.layers has 1 entries summing to 4" + expected_tail);
  EXPECT_EQ(Problem(kLlmJob, {"pipeline.layers=[2, 3]"}),
            "--set pipeline.layers=[2, 3]: pipeline.layers has 2 entries summing to 5" + expected_tail);
  EXPECT_EQ(Problem(kLlmJob, {"pipeline.layers=[0, 4]"}),
            "--set pipeline.layers=[0, 4]: pipeline.layers has 2 entries summing to 4" + expected_tail);
  EXPECT_THAT(Problem(kLlmJob + "layers = [1, 1, 2]\n"), HasSubstr("t.toml:24:1: pipeline.layers has 3 entries"));
}

TEST(ValidateJob, LlmStagesHoldABlockEach) {
  EXPECT_EQ(Problem(Edit("layers = 4", "layers = 1")),
            "t.toml:21:1: pipeline.stages = 2 is more than model.layers = 1: every stage holds at least one block");
}

TEST(ValidateJob, LlmTrainsWithAdamw) {
  EXPECT_EQ(Problem(kLlmJob, {"train.optimizer=adam"}),
            "--set train.optimizer=adam: train.optimizer = \"adam\": an llm job trains with \"adamw\"");
  // The default is rgnn's "adam", so an llm job names its optimizer.
  EXPECT_EQ(Problem(Edit("optimizer = \"adamw\"", "")),
            "t.toml: train.optimizer = \"adam\": an llm job trains with \"adamw\"");
  EXPECT_THAT(Problem(Job(), {"train.optimizer=adamw"}),
              HasSubstr("train.optimizer = \"adamw\" is not supported by this build yet; use \"adam\""));
}

TEST(ValidateJob, LlmWarmupFitsInTheSteps) {
  EXPECT_EQ(Problem(kLlmJob, {"train.warmup_steps=11"}),
            "--set train.warmup_steps=11: train.warmup_steps = 11 is more than train.steps = 10");
  EXPECT_THAT(Problem(Edit("steps = 10", "steps = 2"), {"train.warmup_steps=3"}),
              HasSubstr("train.warmup_steps = 3 is more than train.steps = 2"));
}

TEST(ValidateJob, LlmProblemsAreReportedTogether) {
  EXPECT_EQ(Problem(kLlmJob, {"model.heads=3", "train.seq_len=64", "pipeline.data_parallel=1"}),
            "--set model.heads=3: model.hidden = 64 is not divisible by model.heads = 3: gpt2 splits the width "
            "across the heads\n"
            "--set train.seq_len=64: train.seq_len = 64 is longer than model.context = 32 positions\n"
            "t.toml:21:1: pipeline.stages x pipeline.data_parallel = 2 x 1 = 2 but resources.workers = 4: each "
            "worker runs one stage of one replica");
}

TEST(ValidateJob, PipelineSectionIsAnErrorForRgnn) {
  const std::string message =
      "[pipeline] is for job.kind = \"llm\"; an rgnn job is split across workers by [partition]";
  EXPECT_EQ(Problem(Job("[pipeline]\nstages = 4\n")), "t.toml:7:2: " + message);
  EXPECT_EQ(Problem(Job("[pipeline]\n")), "t.toml:7:2: " + message);  // even an empty one
  EXPECT_EQ(Problem("version = 1\npipeline.layers = [1]\n" + Job().substr(12)), "t.toml:2:1: " + message);
  EXPECT_EQ(Problem(Job(), {"pipeline.stages=2"}), "--set pipeline.stages=2: " + message);
  // The same keys make a valid llm job.
  EXPECT_TRUE(Valid(kLlmJob, {"pipeline.stages=2"}));
}

TEST(ValidateJob, LayersHiddenAndWorkersAreAtLeastOne) {
  EXPECT_EQ(Problem(Job("[model]\nlayers = 0\n")), "t.toml:8:1: model.layers: must be >= 1, got 0");
  EXPECT_EQ(Problem(Job("[model]\nhidden = 0\n")), "t.toml:8:1: model.hidden: must be >= 1, got 0");
  EXPECT_EQ(Problem(Job("[resources]\nworkers = -2\n")), "t.toml:8:1: resources.workers: must be >= 1, got -2");
  EXPECT_TRUE(Valid(Job("[model]\nlayers = 1\nhidden = 1\n[resources]\nworkers = 1\n")));
}

TEST(ValidateJob, GpusNeedADeviceOtherThanCpu) {
  const std::string base =
      "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\ndevice = \"cpu\"\n"
      "[data]\nformat = \"synthetic\"\n[resources]\ngpus_per_worker = 1\n";
  EXPECT_EQ(Problem(base),
            "t.toml:9:1: resources.gpus_per_worker = 1 needs job.device = \"auto\" or \"cuda\", "
            "but job.device = \"cpu\" (t.toml:5:1)");
  EXPECT_TRUE(Valid(base, {"job.device=auto"}));
  EXPECT_TRUE(Valid(base, {"resources.gpus_per_worker=0"}));
}

TEST(ValidateJob, SettingsThisBuildCannotHonourAreRefusedNotIgnored) {
  const std::string base = "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n";
  EXPECT_THAT(Problem(base, {"train.optimizer=sgd"}),
              HasSubstr("train.optimizer = \"sgd\" is not supported by this build yet"));
  EXPECT_TRUE(Valid(base, {"checkpoint.every_steps=5", "checkpoint.keep=1"}));
  EXPECT_THAT(Problem(base, {"metrics.pushgateway=http://pg:9091"}), HasSubstr("metrics.pushgateway"));
  // A GPU is the worker's to check (it refuses the job before training when it has none).
  EXPECT_TRUE(Valid(base, {"train.optimizer=adam", "model.num_bases=4", "job.device=cuda"}));
}

TEST(ValidateJob, SampledFanoutsHaveOneEntryPerLayerAndArePositiveOrMinusOne) {
  const std::string base = "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n";
  EXPECT_TRUE(Valid(base, {"train.mode=sampled"}));  // [] = 10 per layer
  EXPECT_TRUE(Valid(base, {"train.mode=sampled", "train.fanouts=[5, -1]", "train.eval_fanouts=[-1, 20]"}));
  EXPECT_THAT(Problem(base, {"train.mode=sampled", "train.fanouts=[5]"}),
              HasSubstr("train.fanouts has 1 entries but model.layers = 2"));
  EXPECT_THAT(Problem(base, {"train.mode=sampled", "train.eval_fanouts=[5, 5, 5]"}),
              HasSubstr("train.eval_fanouts has 3 entries but model.layers = 2"));
  EXPECT_THAT(Problem(base, {"train.fanouts=[5, 0]"}), HasSubstr("train.fanouts[1] = 0: a fanout is >= 1, or -1"));
  EXPECT_THAT(Problem(base, {"train.fanouts=[-2, 3]"}), HasSubstr("train.fanouts[0] = -2"));
  EXPECT_THAT(Problem(base, {"train.fanouts=[\"a\"]"}), HasSubstr("expected an array of integers"));
  EXPECT_THAT(Problem(base, {"train.fanouts=5"}), HasSubstr("expected an array of integers"));
  EXPECT_THAT(Problem(base, {"train.batch_size=0"}), HasSubstr("train.batch_size"));
  EXPECT_THAT(Problem(base, {"data.feature_store=disk"}), HasSubstr("\"auto\", \"mapped\", \"pinned\""));
}

// train.precision: fp32 or fp64 for rgnn (fp64: full graph, one worker), fp32 or bf16 for llm.
TEST(ValidateJob, EachKindTrainsInItsPrecisions) {
  EXPECT_TRUE(Valid(Job("[train]\nprecision = \"fp64\"\n")));
  EXPECT_EQ(Problem(Job("[train]\nprecision = \"bf16\"\n")),
            "t.toml:8:1: train.precision = \"bf16\" is for llm jobs; an rgnn job trains in \"fp32\" or \"fp64\"");
  EXPECT_THAT(Problem(Job("[train]\nprecision = \"fp64\"\nmode = \"sampled\"\n")),
              HasSubstr("t.toml:8:1: train.precision = \"fp64\" is for full-graph training in this build"));
  EXPECT_THAT(Problem(Job("[resources]\nworkers = 2\n"), {"train.precision=fp64"}),
              HasSubstr("--set train.precision=fp64: train.precision = \"fp64\" trains on one worker in this build, "
                        "but resources.workers = 2"));
  EXPECT_TRUE(Valid(kLlmJob, {"train.precision=bf16"}));
  EXPECT_THAT(Problem(kLlmJob, {"train.precision=fp64"}),
              HasSubstr("train.precision = \"fp64\" is for rgnn jobs; an llm job trains in \"fp32\" or \"bf16\""));
}

TEST(ValidateJob, HeartbeatTimeoutExceedsTwiceTheInterval) {
  EXPECT_EQ(Problem(Job("[timeouts]\nheartbeat_interval_seconds = 2\nheartbeat_timeout_seconds = 4\n")),
            "t.toml:9:1: timeouts.heartbeat_timeout_seconds = 4 must be more than 2 x "
            "timeouts.heartbeat_interval_seconds = 2, so one late heartbeat is not a failure");
  EXPECT_TRUE(Valid(Job("[timeouts]\nheartbeat_interval_seconds = 2\nheartbeat_timeout_seconds = 4.5\n")));
  // The default timeout (10 s) with a longer interval set by override: located at the override.
  EXPECT_THAT(Problem(Job(), {"timeouts.heartbeat_interval_seconds=5"}),
              HasSubstr("--set timeouts.heartbeat_interval_seconds=5: timeouts.heartbeat_timeout_seconds = 10 must "
                        "be more than 2 x"));
}

TEST(ValidateJob, MetricsPortsStayBelow65536) {
  EXPECT_TRUE(Valid(Job("[metrics]\nport_base = 65530\n[resources]\nworkers = 5\n")));
  EXPECT_EQ(Problem(Job("[metrics]\nport_base = 65531\n[resources]\nworkers = 5\n")),
            "t.toml:8:1: metrics.port_base = 65531 + resources.workers = 5 is 65536, past the last port 65535 "
            "(rank r listens on port_base + r)");
  EXPECT_TRUE(Valid(Job("[metrics]\nport_base = 0\n[resources]\nworkers = 100000\n")));  // 0 = no exporter
}

TEST(ValidateJob, JobNameMustNameADirectory) {
  EXPECT_TRUE(Valid(Job(), {"job.name=rgcn_aifb-2.v1"}));
  EXPECT_EQ(Problem(Job(), {"job.name=my run"}),
            "--set job.name=my run: job.name = \"my run\": use letters, digits, '.', '_' and '-', starting with a "
            "letter or digit (it names the run directory)");
  EXPECT_THAT(Problem(Job(), {"job.name=../x"}), HasSubstr("job.name = \"../x\""));
  EXPECT_THAT(Problem(Job(), {"job.name=\"\""}), HasSubstr("job.name = \"\""));
}

TEST(ValidateJob, EachDataFormatNeedsItsInputs) {
  EXPECT_EQ(Problem(Job("", "rgnn", "graph")),
            "t.toml:5:2: missing required key 'data.graph' (the .h5 graph file): data.format = \"graph\" needs it");
  EXPECT_TRUE(Valid(Job("graph = \"g.h5\"\n", "rgnn", "graph")));
  EXPECT_EQ(
      Problem(Job("triples = \"a.nt\"\n", "rgnn", "rdf")),
      "t.toml:5:2: missing required key 'data.train_labels' (the training labels TSV): data.format = \"rdf\" "
      "needs it\n"
      "t.toml:5:2: missing required key 'data.test_labels' (the test labels TSV): data.format = \"rdf\" needs it");
  EXPECT_TRUE(Valid(Job("triples = \"a.nt\"\ntrain_labels = \"tr.tsv\"\ntest_labels = \"te.tsv\"\n", "rgnn", "rdf")));
  EXPECT_THAT(Problem(Job("", "rgnn", "edges")), HasSubstr("missing required key 'data.edges'"));
  EXPECT_TRUE(Valid(Job("edges = [\"e.tsv\"]\n", "rgnn", "edges")));
  // The format given only by an override: the error points at the [data] section of the file.
  EXPECT_THAT(Problem(Job(), {"data.format=graph"}), HasSubstr("t.toml:5:2: missing required key 'data.graph'"));
}

TEST(ValidateJob, PartitionsNeedTheirDirectory) {
  EXPECT_THAT(Problem(Job("", "rgnn", "partitions")),
              HasSubstr("missing required key 'data.partitions' (the directory `tessel partition --out` wrote)"));
  EXPECT_TRUE(Valid(Job("partitions = \"parts\"\n", "rgnn", "partitions")));
  // [partition] keys are allowed (one file switches between formats); the planner compares them with the cut.
  EXPECT_TRUE(Valid(Job("partitions = \"parts\"\n[partition]\nseed = 3\n", "rgnn", "partitions")));
  // Sampled from part files: the structure is the parts', and so are the feature rows.
  EXPECT_TRUE(Valid(Job("partitions = \"parts\"\n", "rgnn", "partitions"), {"train.mode=sampled"}));
  EXPECT_TRUE(Valid(Job("partitions = \"parts\"\n", "rgnn", "partitions"),
                    {"train.mode=sampled", "data.structure=partitioned"}));
  EXPECT_THAT(Problem(Job("partitions = \"parts\"\n", "rgnn", "partitions"),
                      {"train.mode=sampled", "data.structure=replicated"}),
              HasSubstr("data.structure = \"replicated\" puts the whole graph on every worker"));
  EXPECT_THAT(Problem(Job("partitions = \"parts\"\n", "rgnn", "partitions"),
                      {"train.mode=sampled", "data.feature_store=mapped"}),
              HasSubstr("a worker's feature rows come from its part file"));
  // A streamed halo is full-graph training's; a sampled batch keeps no halo.
  EXPECT_TRUE(Valid(Job("partitions = \"parts\"\n", "rgnn", "partitions"), {"train.halo=streamed"}));
  EXPECT_THAT(
      Problem(Job("partitions = \"parts\"\n", "rgnn", "partitions"), {"train.mode=sampled", "train.halo=streamed"}),
      HasSubstr("train.halo = \"streamed\" is how full-graph training holds its halo rows"));
  EXPECT_THAT(Problem(kLlmJob, {"data.format=partitions", "data.partitions=parts"}),
              HasSubstr("is a graph; an llm job reads"));
}

TEST(ValidateJob, KeysOfOtherFormatsAreIgnored) {
  // One file can be switched between formats with --set data.format=...
  EXPECT_TRUE(Valid(Job("triples = \"a.nt\"\n[data.synthetic]\nnodes = 100\n", "rgnn", "graph"), {"data.graph=g.h5"}));
}

TEST(ValidateJob, SyntheticGraphIsConsistent) {
  EXPECT_EQ(Problem(Job("[data.synthetic]\nnodes = 2\nnode_types = 3\n")),
            "t.toml:8:1: data.synthetic.nodes = 2 must be >= data.synthetic.node_types = 3 (every node type needs a "
            "node)");
  EXPECT_EQ(Problem(Job("[data.synthetic]\ntrain_fraction = 0.7\ntest_fraction = 0.4\n")),
            "t.toml:9:1: data.synthetic.train_fraction + test_fraction = 1.1 must be <= 1");
  EXPECT_EQ(Problem(Job("[data.synthetic]\nfeature_dim = 0\n[model]\ninput = \"features\"\n")),
            "t.toml:10:1: model.input = \"features\" needs node features, but data.synthetic.feature_dim = 0");
  EXPECT_TRUE(Valid(Job("[data.synthetic]\nfeature_dim = 0\n[model]\ninput = \"onehot\"\n")));
}

TEST(ValidateJob, ChecksAHandEditedSpecAgain) {
  Result<JobSpec> r = ParseJob(Job(), "t.toml", {});
  ASSERT_TRUE(r.ok());
  JobSpec spec = *r;
  EXPECT_TRUE(ValidateJob(spec).ok());
  spec.train.epochs = 0;
  spec.model.hidden = 0;
  const Status st = ValidateJob(spec);
  EXPECT_EQ(st.code(), Code::kUsage);
  EXPECT_EQ(st.message(),
            "t.toml: model.hidden: must be >= 1, got 0\n"
            "t.toml: train.epochs: must be >= 1, got 0");
}

class DataPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessel-jobs-test-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    file_ = (dir_ / "g.h5").string();
    std::ofstream(file_) << "x";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  JobSpec Parsed(const std::string& text, const std::vector<std::string>& overrides = {}) {
    Result<JobSpec> r = ParseJob(text, "t.toml", overrides);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : JobSpec{};
  }

  std::filesystem::path dir_;
  std::string file_;
};

TEST_F(DataPaths, ExistingFilesPass) {
  EXPECT_TRUE(ValidateDataPaths(Parsed(Job("graph = \"" + file_ + "\"\n", "rgnn", "graph"))).ok());
  EXPECT_TRUE(ValidateDataPaths(Parsed(Job("edges = [\"" + file_ + "\"]\n", "rgnn", "edges"))).ok());
  EXPECT_TRUE(ValidateDataPaths(Parsed(Job())).ok());  // synthetic: nothing to read
}

TEST_F(DataPaths, MissingFileNamesTheKeyAndThePath) {
  const Status st = ValidateDataPaths(Parsed(Job("graph = \"/nonexistent/g.h5\"\n", "rgnn", "graph")));
  EXPECT_EQ(st.code(), Code::kUsage);
  EXPECT_EQ(st.message(), "t.toml:7:1: data.graph: cannot read \"/nonexistent/g.h5\": No such file or directory");
}

TEST_F(DataPaths, RelativePathsAreFromTheCurrentDirectory) {
  const Status st = ValidateDataPaths(Parsed(Job("graph = \"no/such.h5\"\n", "rgnn", "graph")));
  EXPECT_THAT(st.message(), HasSubstr("(a relative path is taken from the current directory, "));
}

TEST_F(DataPaths, DirectoryIsNotAFile) {
  const Status st = ValidateDataPaths(Parsed(Job("graph = \"" + dir_.string() + "\"\n", "rgnn", "graph")));
  EXPECT_THAT(st.message(), HasSubstr("it is a directory, not a file"));
}

TEST_F(DataPaths, EveryMissingInputIsListed) {
  const Status st = ValidateDataPaths(Parsed(
      Job("triples = \"/nonexistent/a.nt\"\ntrain_labels = \"" + file_ + "\"\ntest_labels = \"/nonexistent/te.tsv\"\n",
          "rgnn", "rdf")));
  EXPECT_THAT(st.message(), HasSubstr("t.toml:7:1: data.triples: cannot read \"/nonexistent/a.nt\""));
  EXPECT_THAT(st.message(), HasSubstr("\nt.toml:9:1: data.test_labels: cannot read \"/nonexistent/te.tsv\""));
  EXPECT_THAT(st.message(), ::testing::Not(HasSubstr("train_labels")));
}

TEST_F(DataPaths, EdgeListsAreNamedByIndex) {
  const Status st =
      ValidateDataPaths(Parsed(Job("edges = [\"" + file_ + "\", \"/nonexistent/e.tsv\"]\n", "rgnn", "edges")));
  EXPECT_THAT(st.message(), HasSubstr("data.edges[1]: cannot read \"/nonexistent/e.tsv\""));
  const Status by_override =
      ValidateDataPaths(Parsed(Job("", "rgnn", "edges"), {"data.edges=[\"/nonexistent/e.tsv\"]"}));
  EXPECT_EQ(by_override.message(),
            "--set data.edges=[\"/nonexistent/e.tsv\"]: data.edges[0]: cannot read \"/nonexistent/e.tsv\": No such "
            "file or directory");
}

// Issue 32 row 7: the coordinator refuses a thread count past the schema's cap (each worker checks its cores).
TEST(ValidateJob, ThreadsPerWorkerHasACap) {
  EXPECT_EQ(Problem(Job(), {"resources.threads_per_worker=2147483647"}),
            "--set resources.threads_per_worker=2147483647: resources.threads_per_worker: must be 1 .. 1024, got "
            "2147483647");
  EXPECT_TRUE(Valid(Job(), {"resources.threads_per_worker=1024"}));
}

// Issue 32 row 12: a directory whose path leaves no room for the names written in it fails validation,
// not the first checkpoint after training; so does a component over NAME_MAX.
TEST(ValidateJob, DirectoriesLeaveRoomForTheNamesWrittenInThem) {
  std::string deep = "/tmp";
  while (deep.size() < 4070) deep += "/" + std::string(200, 'd');
  EXPECT_THAT(Problem(Job(), {"checkpoint.dir=" + deep}),
              HasSubstr("checkpoint.dir: the path is " + std::to_string(deep.size()) +
                        " characters (absolute); with the names Tessel writes in it (up to 161 more) it would pass "
                        "the system's limit of 4096 (PATH_MAX): choose a shorter directory"));
  EXPECT_THAT(Problem(Job(), {"spill.dir=/tmp/" + std::string(300, 's')}),
              HasSubstr("spill.dir: a component of the path is 300 characters, over the system's limit of 255"));
  EXPECT_THAT(Problem(Job(), {"job.name=" + std::string(129, 'n')}),
              HasSubstr("job.name is 129 characters; at most 128"));
  EXPECT_TRUE(Valid(Job(), {"checkpoint.dir=/tmp/" + std::string(255, 'c'), "job.name=" + std::string(128, 'n')}));
}

}  // namespace
}  // namespace tessel::jobs
