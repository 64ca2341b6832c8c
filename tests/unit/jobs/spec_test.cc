// Parsing job files (jobs/spec.cc): locations in errors, types, defaults, overrides, the examples.
#include "jobs/spec.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "core/logging.h"
#include "tests/unit/test_data.h"

namespace tessel::jobs {
namespace {

using ::testing::HasSubstr;

// Line 1 version, 2 [job], 3 name, 4 kind, 5 [data], 6 format; `extra` starts at line 7.
std::string Job(const std::string& extra = "") {
  return "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n" + extra;
}

Result<JobSpec> Parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return ParseJob(text, "t.toml", overrides);
}

// The message of a failed parse; fails the test when it did not fail with kUsage.
std::string UsageMessage(const Result<JobSpec>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kUsage) << r.status().ToString();
  return r.status().message();
}

TEST(ParseJob, MinimalJobTakesEveryDefault) {
  Result<JobSpec> r = Parse(Job());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const JobSpec& s = *r;
  EXPECT_EQ(s.version, 1);
  EXPECT_EQ(s.source_path, "t.toml");
  EXPECT_EQ(s.job.name, "t");
  EXPECT_EQ(s.job.kind, JobKind::kRgnn);
  EXPECT_EQ(s.job.device, DeviceChoice::kAuto);
  EXPECT_EQ(s.job.log_level, LogLevel::kInfo);
  EXPECT_EQ(s.data.format, DataFormat::kSynthetic);
  EXPECT_EQ(s.resources, ResourcesSection{});
  EXPECT_EQ(s.data.synthetic, SyntheticSection{});
  EXPECT_EQ(s.model, ModelSection{});
  EXPECT_EQ(s.train, TrainSection{});
  EXPECT_EQ(s.partition, PartitionSection{});
  EXPECT_EQ(s.pipeline, PipelineSection{});
  EXPECT_EQ(s.spill, SpillSection{});
  EXPECT_EQ(s.checkpoint, CheckpointSection{});
  EXPECT_EQ(s.plugins, PluginsSection{});
  EXPECT_EQ(s.metrics, MetricsSection{});
  EXPECT_EQ(s.timeouts, TimeoutsSection{});
  EXPECT_EQ(s.train.epochs, 50);
  EXPECT_DOUBLE_EQ(s.train.l2, 5e-4);
  EXPECT_EQ(s.metrics.port_base, 9400);
}

TEST(ParseJob, ReadsEveryKindOfValue) {
  Result<JobSpec> r = Parse(
      "version = 1\n"
      "[job]\nname = \"full-1\"\nkind = \"rgnn\"\nseed = 7\ndevice = \"cpu\"\ntime_limit_seconds = 90\n"
      "[resources]\nworkers = 4\nmemory_budget_bytes = \"2GiB\"\n"
      "[data]\nformat = \"edges\"\nedges = [\"a.tsv\", \"b.tsv\"]\nadd_inverse = false\n"
      "[train]\nlr = 1\nepochs = 3\n"
      "[spill]\nbudget_bytes = 4096\ncompressed_dummy_is_not_here = false\n"
      "[partition]\nmethod = \"range\"\n");
  // The spill key above is unknown on purpose: the other keys are still all read and checked.
  EXPECT_THAT(UsageMessage(r), HasSubstr("t.toml:20:1: unknown key 'spill.compressed_dummy_is_not_here'"));

  r = Parse(
      "version = 1\n"
      "[job]\nname = \"full-1\"\nkind = \"rgnn\"\nseed = 7\ndevice = \"cpu\"\ntime_limit_seconds = 90\n"
      "[resources]\nworkers = 4\nmemory_budget_bytes = \"2GiB\"\n"
      "[data]\nformat = \"edges\"\nedges = [\"a.tsv\", \"b.tsv\"]\nadd_inverse = false\n"
      "[train]\nlr = 1\nepochs = 3\n"
      "[partition]\nmethod = \"range\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.seed, 7u);
  EXPECT_EQ(r->job.device, DeviceChoice::kCpu);
  EXPECT_DOUBLE_EQ(r->job.time_limit_seconds, 90);
  EXPECT_EQ(r->resources.workers, 4);
  EXPECT_EQ(r->resources.memory_budget_bytes, int64_t{2} << 30);
  EXPECT_EQ(r->data.format, DataFormat::kEdges);
  EXPECT_EQ(r->data.edges, (std::vector<std::string>{"a.tsv", "b.tsv"}));
  EXPECT_FALSE(r->data.add_inverse);
  EXPECT_DOUBLE_EQ(r->train.lr, 1.0);  // an integer is a fine float
  EXPECT_EQ(r->train.epochs, 3);
  EXPECT_EQ(r->partition.method, PartitionMethod::kRange);
  EXPECT_EQ(KeyOrigin(*r, "train.epochs"), "t.toml:17:1");
  EXPECT_EQ(KeyOrigin(*r, "data.edges[1]"), "t.toml:13:19");
  EXPECT_EQ(KeyOrigin(*r, "model.layers"), "t.toml");  // left at its default
}

TEST(ParseJob, ReadsTheKeysOfAnLlmJob) {
  Result<JobSpec> r = Parse(
      "version = 1\n[job]\nname = \"g\"\nkind = \"llm\"\n"
      "[resources]\nworkers = 4\n"
      "[data]\nformat = \"generated_text\"\ngenerated_bytes = \"2MiB\"\nval_fraction = 0.05\norder = \"shuffled\"\n"
      "[model]\nname = \"gpt2\"\nlayers = 6\nhidden = 384\nheads = 6\ncontext = 128\nvocab_size = 256\n"
      "[train]\noptimizer = \"adamw\"\nsteps = 500\nbatch_size = 32\nseq_len = 64\nmicrobatch_size = 4\n"
      "beta1 = 0.8\nbeta2 = 0.95\neps = 1e-6\nweight_decay = 0.1\ngrad_clip = 1\nwarmup_steps = 50\n"
      "final_lr_fraction = 0.1\nval_every = 25\nval_batches = 0\n"
      "[pipeline]\nstages = 2\nmicrobatches = 4\ndata_parallel = 2\nlayers = [2, 4]\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.kind, JobKind::kLlm);
  EXPECT_EQ(r->data.format, DataFormat::kGeneratedText);
  EXPECT_EQ(r->data.generated_bytes, int64_t{2} << 20);
  EXPECT_DOUBLE_EQ(r->data.val_fraction, 0.05);
  EXPECT_EQ(r->data.order, BatchOrder::kShuffled);
  EXPECT_EQ(r->model.name, "gpt2");
  EXPECT_EQ(r->model.layers, 6);
  EXPECT_EQ(r->model.hidden, 384);
  EXPECT_EQ(r->model.heads, 6);
  EXPECT_EQ(r->model.context, 128);
  EXPECT_EQ(r->model.vocab_size, 256);
  EXPECT_EQ(r->model.init_from, "");
  EXPECT_EQ(r->train.optimizer, OptimizerName::kAdamw);
  EXPECT_EQ(r->train.steps, 500);
  EXPECT_EQ(r->train.batch_size, 32);
  EXPECT_EQ(r->train.seq_len, 64);
  EXPECT_EQ(r->train.microbatch_size, 4);
  EXPECT_DOUBLE_EQ(r->train.beta1, 0.8);
  EXPECT_DOUBLE_EQ(r->train.beta2, 0.95);
  EXPECT_DOUBLE_EQ(r->train.eps, 1e-6);
  EXPECT_DOUBLE_EQ(r->train.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(r->train.grad_clip, 1.0);
  EXPECT_EQ(r->train.warmup_steps, 50);
  EXPECT_DOUBLE_EQ(r->train.final_lr_fraction, 0.1);
  EXPECT_EQ(r->train.val_every, 25);
  EXPECT_EQ(r->train.val_batches, 0);
  EXPECT_EQ(r->pipeline.stages, 2);
  EXPECT_EQ(r->pipeline.microbatches, 4);
  EXPECT_EQ(r->pipeline.data_parallel, 2);
  EXPECT_EQ(r->pipeline.layers, (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(KeyOrigin(*r, "pipeline.layers[1]"), "t.toml:38:14");
}

TEST(ParseJob, InlineTablesAndDottedKeysAreTheSameKeys) {
  Result<JobSpec> r = Parse(
      "version = 1\ntrain.epochs = 5\njob = { name = \"t\", kind = \"rgnn\" }\n"
      "[data]\nformat = \"synthetic\"\nsynthetic = { nodes = 100, classes = 3 }\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->train.epochs, 5);
  EXPECT_EQ(r->data.synthetic.nodes, 100);
  EXPECT_EQ(r->data.synthetic.classes, 3);
}

TEST(ParseJob, UnknownKeyNamesLineColumnAndNearestKey) {
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nepoch = 3\n"))),
            "t.toml:8:1: unknown key 'train.epoch' (did you mean 'train.epochs'?)");
}

TEST(ParseJob, UnknownKeyInTheWrongSectionPointsToTheRightOne) {
  EXPECT_EQ(UsageMessage(Parse(Job("[model]\nepochs = 3\n"))),
            "t.toml:8:1: unknown key 'model.epochs' (did you mean 'train.epochs'?)");
  EXPECT_THAT(UsageMessage(Parse(Job("[model]\nseed = 3\n"))),
              HasSubstr("(did you mean 'job.seed', 'data.synthetic.seed' or 'partition.seed'?)"));
}

TEST(ParseJob, UnknownKeyWithNothingCloseHasNoSuggestion) {
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nbanana_split = 3\n"))), "t.toml:8:1: unknown key 'train.banana_split'");
}

TEST(ParseJob, UnknownSectionIsRejected) {
  EXPECT_EQ(UsageMessage(Parse(Job("[trian]\nepochs = 3\n"))),
            "t.toml:7:2: unknown section '[trian]' (did you mean '[train]'?)");
  EXPECT_THAT(UsageMessage(Parse(Job("[optimizer]\nname = \"adam\"\n"))), HasSubstr("unknown section '[optimizer]'"));
}

TEST(ParseJob, SectionGivenAsValueIsAWrongType) {
  EXPECT_EQ(UsageMessage(Parse("train = 3\n" + Job())), "t.toml:1:1: train: expected a table ([train]), got integer");
  EXPECT_THAT(UsageMessage(Parse(Job("[[plugins]]\npaths = []\n"))),
              HasSubstr("plugins: expected a table ([plugins]), got array"));
}

TEST(ParseJob, WrongTypeNamesKeyExpectedAndActual) {
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nepochs = \"ten\"\n"))),
            "t.toml:8:1: train.epochs: expected an integer, got string");
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nepochs = 10.0\n"))),
            "t.toml:8:1: train.epochs: expected an integer, got float");
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nlr = \"fast\"\n"))),
            "t.toml:8:1: train.lr: expected a number, got string");
  EXPECT_EQ(UsageMessage(Parse(Job("[spill]\nchecksum = 1\n"))),
            "t.toml:8:1: spill.checksum: expected a boolean, got integer");
  EXPECT_EQ(UsageMessage(Parse(Job("[plugins]\npaths = \"a.so\"\n"))),
            "t.toml:8:1: plugins.paths: expected an array of strings, got string");
  EXPECT_EQ(UsageMessage(Parse(Job("[plugins]\npaths = [\"a.so\", 3]\n"))),
            "t.toml:8:1: plugins.paths: expected an array of strings, but element 1 is integer");
  EXPECT_EQ(UsageMessage(Parse(Job("[metrics]\nbind = 127\n"))),
            "t.toml:8:1: metrics.bind: expected a string, got integer");
  EXPECT_THAT(UsageMessage(Parse(Job("[job]\n"))), HasSubstr("TOML syntax error"));  // a table defined twice
}

TEST(ParseJob, IntegerOutsideTheMemberTypeIsRejected) {
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nepochs = 3000000000\n"))),
            "t.toml:8:1: train.epochs: must be between -2147483648 and 2147483647, got 3000000000");
  EXPECT_EQ(UsageMessage(Parse(Job("[partition]\nseed = -1\n"))),
            "t.toml:8:1: partition.seed: must be between 0 and 9223372036854775807, got -1");
}

TEST(ParseJob, NonFiniteFloatIsRejected) {
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nlr = nan\n"))), "t.toml:8:1: train.lr: expected a finite number, got nan");
}

TEST(ParseJob, EnumValueOutsideTheChoicesListsThem) {
  EXPECT_EQ(UsageMessage(Parse(Job("device = \"gpu\"\n"))),
            "t.toml:7:1: unknown key 'data.device' (did you mean 'job.device'?)");
  const std::string text =
      "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\ndevice = \"gpu\"\n[data]\nformat = \"synthetic\"\n";
  EXPECT_EQ(UsageMessage(Parse(text)),
            "t.toml:5:1: job.device: \"gpu\" is not allowed; allowed values: \"auto\", \"cpu\", \"cuda\"");
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\noptimizer = \"lbfgs\"\n"))),
            "t.toml:8:1: train.optimizer: \"lbfgs\" is not allowed; allowed values: \"adam\", \"sgd\", \"adamw\"");
  EXPECT_THAT(UsageMessage(Parse(Job("[partition]\nmethod = \"spectral\"\n"))),
              HasSubstr("allowed values: \"metis\", \"random\", \"range\""));
  EXPECT_EQ(UsageMessage(Parse(Job("order = \"random\"\n"))),
            "t.toml:7:1: data.order: \"random\" is not allowed; allowed values: \"sequential\", \"shuffled\"");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"data.format=tokens"})),
            "--set data.format=tokens: data.format: \"tokens\" is not allowed; allowed values: \"graph\", \"rdf\", "
            "\"edges\", \"synthetic\", \"partitions\", \"text\", \"llmc\", \"generated_text\"");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"data.feature_store=memory"})),
            "--set data.feature_store=memory: data.feature_store: \"memory\" is not allowed; allowed values: \"auto\", "
            "\"mapped\", \"pinned\"");
}

TEST(ParseJob, OutOfRangeValuesNameTheRange) {
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nepochs = -3\n"))), "t.toml:8:1: train.epochs: must be >= 1, got -3");
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nlr = 0\n"))), "t.toml:8:1: train.lr: must be > 0, got 0");
  EXPECT_EQ(UsageMessage(Parse(Job("[train]\nlr = -0.5\n"))), "t.toml:8:1: train.lr: must be > 0, got -0.5");
  EXPECT_EQ(UsageMessage(Parse(Job("[resources]\nworkers = 0\n"))),
            "t.toml:8:1: resources.workers: must be >= 1, got 0");
  EXPECT_EQ(UsageMessage(Parse(Job("[metrics]\nport_base = 70000\n"))),
            "t.toml:8:1: metrics.port_base: must be 0 .. 65535, got 70000");
  EXPECT_EQ(UsageMessage(Parse(Job("[synthetic]\n"))),
            "t.toml:7:2: unknown section '[synthetic]' (did you mean '[data.synthetic]'?)");
  EXPECT_EQ(UsageMessage(Parse(Job("[data.synthetic]\ntrain_fraction = 1.0\n"))),
            "t.toml:8:1: data.synthetic.train_fraction: must be > 0, < 1, got 1");
  EXPECT_EQ(UsageMessage(Parse(Job("[metrics]\nbind = \"\"\n"))), "t.toml:8:1: metrics.bind: must not be empty");
}

TEST(ParseJob, ByteSizesTakeUnits) {
  const auto bytes = [](const std::string& v) -> Result<int64_t> {
    Result<JobSpec> r = Parse(Job("[resources]\nmemory_budget_bytes = " + v + "\n"));
    if (!r.ok()) return r.status();
    return r->resources.memory_budget_bytes;
  };
  EXPECT_EQ(*bytes("4096"), 4096);
  EXPECT_EQ(*bytes("\"64GiB\""), int64_t{64} << 30);
  EXPECT_EQ(*bytes("\"512 MiB\""), int64_t{512} << 20);
  EXPECT_EQ(*bytes("\"1.5GB\""), 1500000000);
  EXPECT_EQ(*bytes("\"10B\""), 10);
  EXPECT_EQ(*bytes("\"0\""), 0);
  EXPECT_THAT(bytes("\"64 gigs\"").status().message(),
              HasSubstr("t.toml:8:1: resources.memory_budget_bytes: expected a byte count such as \"64GiB\""));
  EXPECT_THAT(bytes("\"9999999TiB\"").status().message(), HasSubstr("is too large"));
  EXPECT_EQ(bytes("-1").status().message(), "t.toml:8:1: resources.memory_budget_bytes: must be >= 0, got -1");
  EXPECT_EQ(bytes("1.5").status().message(),
            "t.toml:8:1: resources.memory_budget_bytes: expected a byte count (an integer, or a string such as "
            "\"64GiB\"), got float");
}

TEST(ParseJob, MissingRequiredKeyWithoutItsSectionNamesTheFile) {
  const std::string text = "version = 1\n[data]\nformat = \"synthetic\"\n";
  EXPECT_EQ(UsageMessage(Parse(text)),
            "t.toml: missing required key 'job.name'\nt.toml: missing required key 'job.kind'");
}

TEST(ParseJob, MissingRequiredKeyInItsSectionNamesTheSection) {
  const std::string text = "version = 1\n[job]\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n";
  EXPECT_EQ(UsageMessage(Parse(text)), "t.toml:2:2: missing required key 'job.name' in [job]");
  EXPECT_EQ(UsageMessage(Parse("version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\n")),
            "t.toml: missing required key 'data.format'");
}

TEST(ParseJob, VersionIsRequiredAndMustBeOne) {
  EXPECT_EQ(UsageMessage(Parse("[job]\nname = \"t\"\n")),
            "t.toml: missing required key 'version' (add `version = 1` at the top of the file)");
  EXPECT_EQ(UsageMessage(Parse("version = 2\n[job]\nname = \"t\"\n")),
            "t.toml:1:11: version = 2 is not supported; this build reads job files of version 1");
  EXPECT_EQ(UsageMessage(Parse("version = \"1\"\n")), "t.toml:1:11: version: expected an integer, got string");
}

TEST(ParseJob, TomlSyntaxErrorGivesTomlsLocationAndDescription) {
  const std::string message = UsageMessage(Parse("version = 1\n[job]\nname = \"t\nkind = \"rgnn\"\n"));
  EXPECT_THAT(message, HasSubstr("t.toml:3:"));
  EXPECT_THAT(message, HasSubstr(": TOML syntax error: "));
  EXPECT_THAT(UsageMessage(Parse("version = 1\n[job\n")), HasSubstr("t.toml:2:"));
}

TEST(ParseJob, SeveralProblemsAreReportedTogether) {
  const std::string message = UsageMessage(Parse(Job("[train]\nepoch = 3\nlr = \"x\"\n[model]\nlayers = 0.5\n")));
  EXPECT_EQ(message,
            "t.toml:8:1: unknown key 'train.epoch' (did you mean 'train.epochs'?)\n"
            "t.toml:9:1: train.lr: expected a number, got string\n"
            "t.toml:11:1: model.layers: expected an integer, got float");
}

TEST(Overrides, TypedValuesAreParsedAsToml) {
  Result<JobSpec> r = Parse(Job(), {"job.seed=3", "train.lr=0.02", "metrics.bind=\"0.0.0.0\"", "data.add_inverse=false",
                                    "plugins.paths=[\"a.so\", \"b.so\"]", "resources.memory_budget_bytes=8GiB"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.seed, 3u);
  EXPECT_DOUBLE_EQ(r->train.lr, 0.02);
  EXPECT_EQ(r->metrics.bind, "0.0.0.0");
  EXPECT_FALSE(r->data.add_inverse);
  EXPECT_EQ(r->plugins.paths, (std::vector<std::string>{"a.so", "b.so"}));
  EXPECT_EQ(r->resources.memory_budget_bytes, int64_t{8} << 30);
  EXPECT_EQ(KeyOrigin(*r, "job.seed"), "--set job.seed=3");
}

TEST(Overrides, TextThatIsNotTomlIsABareString) {
  Result<JobSpec> r = Parse(Job(), {"job.output_dir=runs/seed3", "metrics.bind=0.0.0.0", "job.name=2024-05-01",
                                    "spill.dir= /scratch/spill "});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.output_dir, "runs/seed3");
  EXPECT_EQ(r->metrics.bind, "0.0.0.0");
  EXPECT_EQ(r->job.name, "2024-05-01");  // a string key keeps the text, though it reads as a TOML date
  EXPECT_EQ(r->spill.dir, "/scratch/spill");
}

TEST(Overrides, UnknownKeyNamesTheOverride) {
  EXPECT_EQ(UsageMessage(Parse(Job(), {"train.epoch=3"})),
            "--set train.epoch=3: unknown key 'train.epoch' (did you mean 'train.epochs'?)");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"train=3"})),
            "--set train=3: 'train' is a section; set its keys one by one (--set train.KEY=VALUE)");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"train.epochs"})), "--set train.epochs: expected key.path=value");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"version=2"})),
            "--set version=2: version is the schema version of the file and cannot be overridden");
}

TEST(Overrides, WrongTypeAndRangeNameTheOverride) {
  EXPECT_EQ(UsageMessage(Parse(Job(), {"train.epochs=ten"})),
            "--set train.epochs=ten: train.epochs: expected an integer, got string");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"train.epochs=0"})), "--set train.epochs=0: train.epochs: must be >= 1, got 0");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"job.device=gpu"})),
            "--set job.device=gpu: job.device: \"gpu\" is not allowed; allowed values: \"auto\", \"cpu\", \"cuda\"");
  EXPECT_EQ(UsageMessage(Parse(Job(), {"plugins.paths=a.so"})),
            "--set plugins.paths=a.so: plugins.paths: expected an array of strings, got string");
}

TEST(Overrides, WinOverTheFileInOrderAndMayAddKeys) {
  Result<JobSpec> r = Parse(Job("[train]\nepochs = 10\n"), {"train.epochs=20", "train.epochs=30", "model.hidden=64"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->train.epochs, 30);
  EXPECT_EQ(r->model.hidden, 64);
  EXPECT_EQ(KeyOrigin(*r, "train.epochs"), "--set train.epochs=30");
}

TEST(Overrides, MaySupplyARequiredKey) {
  const std::string text = "version = 1\n[job]\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n";
  Result<JobSpec> r = Parse(text, {"job.name=from-cli"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.name, "from-cli");
}

TEST(Overrides, CanFixAnInvalidFile) {
  EXPECT_FALSE(Parse(Job("[resources]\nworkers = 0\n")).ok());
  EXPECT_TRUE(Parse(Job("[resources]\nworkers = 0\n"), {"resources.workers=2"}).ok());
}

TEST(FormatJobToml, RoundTripsToAnEqualSpec) {
  Result<JobSpec> first =
      Parse(Job(), {"job.seed=42", "job.output_dir=runs/x \"quoted\"\\", "train.lr=0.0005", "train.l2=0",
                    "data.edges=[\"e.tsv\"]", "data.synthetic.avg_degree=2.5", "resources.memory_budget_bytes=1GiB",
                    "job.time_limit_seconds=3600", "partition.method=random", "plugins.search_dirs=[\"/opt/p\"]",
                    "metrics.targets_file=/srv/prom/targets/t.json"});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string text = FormatJobToml(*first);
  EXPECT_THAT(text, HasSubstr("\n[data.synthetic]\n"));
  EXPECT_THAT(text, HasSubstr("\nlr = 5e-4\n"));
  EXPECT_THAT(text, HasSubstr("\navg_degree = 2.5\n"));
  EXPECT_THAT(text, HasSubstr("\nl2 = 0.0\n"));
  Result<JobSpec> second = ParseJob(text, "resolved.toml", {});
  ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << text;
  EXPECT_EQ(second->job, first->job);
  EXPECT_EQ(second->resources, first->resources);
  EXPECT_EQ(second->data, first->data);
  EXPECT_EQ(second->model, first->model);
  EXPECT_EQ(second->train, first->train);
  EXPECT_EQ(second->partition, first->partition);
  EXPECT_EQ(second->pipeline, first->pipeline);
  EXPECT_EQ(second->spill, first->spill);
  EXPECT_EQ(second->checkpoint, first->checkpoint);
  EXPECT_EQ(second->plugins, first->plugins);
  EXPECT_EQ(second->metrics, first->metrics);
  EXPECT_EQ(second->timeouts, first->timeouts);
}

TEST(FormatJobToml, LeavesPipelineOutOfAnRgnnJob) {
  // An rgnn job refuses [pipeline], even at its defaults, so the resolved file must not have one.
  Result<JobSpec> first = Parse(Job());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string text = FormatJobToml(*first);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("[pipeline]")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\nstages = ")));
  EXPECT_TRUE(ParseJob(text, "resolved.toml", {}).ok()) << text;
}

TEST(FormatJobToml, RoundTripsAnLlmJob) {
  const std::string llm =
      "version = 1\n[job]\nname = \"g\"\nkind = \"llm\"\n[data]\nformat = \"llmc\"\n"
      "train_tokens = \"train.bin\"\nval_tokens = \"val.bin\"\norder = \"shuffled\"\n"
      "[resources]\nworkers = 6\n[model]\nname = \"gpt2\"\nlayers = 12\nhidden = 768\nheads = 12\n"
      "context = 1024\nvocab_size = 50257\ninit_from = \"gpt2_124M.bin\"\n"
      "[train]\noptimizer = \"adamw\"\nsteps = 40\nbatch_size = 16\nseq_len = 512\nlr = 6e-4\n"
      "weight_decay = 0.1\ngrad_clip = 1\nwarmup_steps = 4\nfinal_lr_fraction = 0\n"
      "[pipeline]\nstages = 3\nmicrobatches = 4\ndata_parallel = 2\nlayers = [3, 5, 4]\n"
      "[spill]\npolicy = \"recompute\"\nlayer_policies = [\"recompute\", \"recompute\", \"keep\", \"keep\", "
      "\"keep\", \"keep\", \"keep\", \"keep\", \"keep\", \"keep\", \"keep\", \"offload\"]\n";
  Result<JobSpec> first = Parse(llm);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string text = FormatJobToml(*first);
  EXPECT_THAT(text, HasSubstr("\n[pipeline]\nstages = 3\nmicrobatches = 4\ndata_parallel = 2\nlayers = [3, 5, 4]\n"));
  Result<JobSpec> second = ParseJob(text, "resolved.toml", {});
  ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << text;
  EXPECT_EQ(second->job, first->job);
  EXPECT_EQ(second->resources, first->resources);
  EXPECT_EQ(second->data, first->data);
  EXPECT_EQ(second->model, first->model);
  EXPECT_EQ(second->train, first->train);
  EXPECT_EQ(second->pipeline, first->pipeline);
  EXPECT_EQ(second->spill, first->spill);
  EXPECT_EQ(second->spill.layer_policies.back(), SpillPolicy::kOffload);
}

TEST(LoadJobFile, UnreadableFileIsAUsageError) {
  Result<JobSpec> r = LoadJobFile("/nonexistent/job.toml", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUsage);
  EXPECT_EQ(r.status().message(), "cannot read job file '/nonexistent/job.toml': No such file or directory");
}

// Issue 32 row 8: a job file must be a regular file of at most 1 MiB, and what else it is gets named.
TEST(LoadJobFile, ADirectoryIsNamedAsOne) {
  const std::string dir = ::testing::TempDir() + "/job-dir-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  EXPECT_THAT(UsageMessage(LoadJobFile(dir, {})), HasSubstr("' is a directory, not a TOML file"));
  std::filesystem::remove(dir);
}

TEST(LoadJobFile, ADeviceIsNotRead) {
  EXPECT_EQ(UsageMessage(LoadJobFile("/dev/null", {})),
            "job file '/dev/null' is a character device, not a TOML file: give the path of a .toml file");
}

// Opening a FIFO for reading blocks until a writer comes: the load must refuse it without opening it.
TEST(LoadJobFile, AFifoDoesNotBlock) {
  const std::string fifo = ::testing::TempDir() + "/job-fifo-" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto loaded = std::async(std::launch::async, [&] { return LoadJobFile(fifo, {}); });
  if (loaded.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // releases the blocked open
    if (writer >= 0) ::close(writer);
    ADD_FAILURE() << "LoadJobFile blocked on a FIFO";
  }
  EXPECT_THAT(UsageMessage(loaded.get()), HasSubstr("is a FIFO (named pipe), not a TOML file"));
  std::filesystem::remove(fifo);
}

TEST(LoadJobFile, AFileOverTheCapIsRefusedUnread) {
  const std::string path = ::testing::TempDir() + "/job-big-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path).close();
  std::filesystem::resize_file(path, kMaxJobFileBytes + 1);  // sparse: nothing written
  EXPECT_THAT(UsageMessage(LoadJobFile(path, {})),
              HasSubstr(StrCat(kMaxJobFileBytes + 1, " bytes, over the limit of 1048576 bytes (1 MiB)")));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessel::jobs
