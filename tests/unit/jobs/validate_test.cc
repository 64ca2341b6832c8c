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

TEST(ValidateJob, LlmKindIsParsedButNotSupportedYet) {
  EXPECT_EQ(Problem(Job("", "llm")), "t.toml:4:1: job.kind = \"llm\" is not supported by this build yet");
  EXPECT_EQ(Problem(Job("[pipeline]\nstages = 4\n", "llm")),
            "t.toml:4:1: job.kind = \"llm\" is not supported by this build yet");
  EXPECT_EQ(Problem(Job(), {"job.kind=llm"}),
            "--set job.kind=llm: job.kind = \"llm\" is not supported by this build yet");
}

TEST(ValidateJob, PipelineSectionIsAnErrorForRgnn) {
  EXPECT_EQ(Problem(Job("[pipeline]\nstages = 4\n")),
            "t.toml:7:2: [pipeline] is for job.kind = \"llm\"; an rgnn job is split across workers by [partition]");
}

TEST(ValidateJob, ModelNamesAreChoices) {
  EXPECT_TRUE(Valid(Job("[model]\nname = \"rgcn\"\n")));
  EXPECT_TRUE(Valid(Job("[model]\nname = \"rgat\"\n")));
  EXPECT_TRUE(Valid(Job("[model]\nname = \"hgt\"\nhidden = 16\nheads = 4\n")));
  EXPECT_EQ(Problem(Job("[model]\nname = \"gcn\"\n")),
            "t.toml:8:1: model.name: \"gcn\" is not allowed; allowed values: \"rgcn\", \"rgat\", \"hgt\"");
}

TEST(ValidateJob, HeadsMustSplitTheHiddenWidth) {
  EXPECT_EQ(Problem(Job("[model]\nname = \"hgt\"\nhidden = 10\nheads = 4\n")),
            "t.toml:10:1: model.hidden = 10 is not divisible by model.heads = 4: \"hgt\" splits the hidden width "
            "across the heads");
  EXPECT_THAT(Problem(Job("[model]\nname = \"rgat\"\nhidden = 10\nheads = 4\n")),
              HasSubstr("with head_merge = \"concat\""));
  // Averaged heads each have the full width; a one-layer RGAT has no hidden layer to split.
  EXPECT_TRUE(Valid(Job("[model]\nname = \"rgat\"\nhidden = 10\nheads = 4\nhead_merge = \"mean\"\n")));
  EXPECT_TRUE(Valid(Job("[model]\nname = \"rgat\"\nlayers = 1\nhidden = 10\nheads = 4\n")));
  EXPECT_THAT(Problem(Job("[model]\nheads = 2\n")), HasSubstr("RGCN has no attention heads"));
}

TEST(ValidateJob, DecompositionsAreForRgcnAndExclusive) {
  EXPECT_TRUE(Valid(Job("[model]\nnum_bases = 30\n")));
  EXPECT_TRUE(Valid(Job("[model]\nnum_blocks = 4\n")));
  EXPECT_THAT(Problem(Job("[model]\nnum_bases = 3\nnum_blocks = 4\n")),
              HasSubstr("choose one decomposition of the relation weights"));
  EXPECT_THAT(Problem(Job("[model]\nname = \"rgat\"\nnum_bases = 3\n")),
              HasSubstr("model.num_bases decomposes RGCN's relation weights; model.name = \"rgat\" has none"));
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
  EXPECT_THAT(Problem(base, {"train.optimizer=sgd"}), HasSubstr("train.optimizer = \"sgd\" is not supported by this build yet"));
  EXPECT_THAT(Problem(base, {"checkpoint.every_steps=5"}), HasSubstr("checkpoint.every_steps = 5 is not supported"));
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

}  // namespace
}  // namespace tessel::jobs
