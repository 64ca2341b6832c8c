// An RGNN model's own rules (workers/rgnn/model.h, RgnnModel::Check) as the graph planner reports them:
// the key's origin and the problem, exit 2 (kUsage), before any data is read; and a model.name that no
// registered model has.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jobs/spec.h"
#include "orchestrator/planners/graph_planner.h"

namespace tessel::orchestrator {
namespace {

using ::testing::HasSubstr;

// Line 1 version, 2 [job], 3 name, 4 kind, 5 [data], 6 format; `extra` starts at line 7.
std::string Job(const std::string& extra = "") {
  return "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\n[data]\nformat = \"synthetic\"\n" + extra;
}

// The planner's verdict on a job the job file's own rules accept.
Status Check(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Result<jobs::JobSpec> spec = jobs::ParseJob(text, "t.toml", overrides);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (!spec.ok()) return spec.status();
  return GraphPlanner().Check(*spec);
}

std::string Problem(const std::string& text, const std::vector<std::string>& overrides = {}) {
  const Status st = Check(text, overrides);
  EXPECT_FALSE(st.ok()) << "expected a model rule to fail";
  EXPECT_EQ(st.code(), Code::kUsage);
  return st.message();
}

TEST(ModelRules, ModelNamesAreTheRegisteredModels) {
  EXPECT_TRUE(Check(Job("[model]\nname = \"rgcn\"\n")).ok());
  EXPECT_TRUE(Check(Job("[model]\nname = \"rgat\"\n")).ok());
  EXPECT_TRUE(Check(Job("[model]\nname = \"hgt\"\nhidden = 16\nheads = 4\n")).ok());
  EXPECT_EQ(Problem(Job("[model]\nname = \"gcn\"\n")),
            "t.toml:8:1: model.name = \"gcn\" is not an RGNN model of this build (it has \"rgcn\", \"rgat\", \"hgt\")");
}

TEST(ModelRules, HeadsMustSplitTheHiddenWidth) {
  EXPECT_EQ(Problem(Job("[model]\nname = \"hgt\"\nhidden = 10\nheads = 4\n")),
            "t.toml:10:1: model.hidden = 10 is not divisible by model.heads = 4: \"hgt\" splits the hidden width "
            "across the heads");
  // Blamed on model.hidden when only it was set.
  EXPECT_THAT(Problem(Job("[model]\nname = \"hgt\"\nhidden = 10\n"), {"model.heads=4"}),
              HasSubstr("--set model.heads=4: model.hidden = 10"));
  EXPECT_THAT(Problem(Job("[model]\nname = \"rgat\"\nhidden = 10\nheads = 4\n")),
              HasSubstr("with head_merge = \"concat\""));
  // Averaged heads each have the full width; a one-layer RGAT has no hidden layer to split.
  EXPECT_TRUE(Check(Job("[model]\nname = \"rgat\"\nhidden = 10\nheads = 4\nhead_merge = \"mean\"\n")).ok());
  EXPECT_TRUE(Check(Job("[model]\nname = \"rgat\"\nlayers = 1\nhidden = 10\nheads = 4\n")).ok());
  EXPECT_EQ(Problem(Job("[model]\nheads = 2\n")), "t.toml:8:1: model.heads = 2: RGCN has no attention heads; use 1");
}

TEST(ModelRules, AStreamedHaloIsForModelsThatSumOverTheirInputRows) {
  EXPECT_TRUE(Check(Job("[train]\nhalo = \"streamed\"\n")).ok());
  EXPECT_THAT(Problem(Job("[model]\nreorder = false\n[train]\nhalo = \"streamed\"\n")),
              HasSubstr("t.toml:10:1: train.halo = \"streamed\" runs a layer one block of input rows at a time"));
  EXPECT_THAT(
      Problem(Job("[model]\nname = \"rgat\"\n"), {"train.halo=streamed"}),
      HasSubstr("--set train.halo=streamed: train.halo = \"streamed\" runs a layer one block of input rows at a "
                "time, as a sum, which model \"rgat\" with these settings cannot"));
}

TEST(ModelRules, DecompositionsAreForRgcnAndExclusive) {
  EXPECT_TRUE(Check(Job("[model]\nnum_bases = 30\n")).ok());
  EXPECT_TRUE(Check(Job("[model]\nnum_blocks = 4\n")).ok());
  EXPECT_EQ(Problem(Job("[model]\nnum_bases = 3\nnum_blocks = 4\n")),
            "t.toml:9:1: model.num_bases = 3 and model.num_blocks = 4: choose one decomposition of the relation "
            "weights");
  EXPECT_EQ(Problem(Job("[model]\nname = \"rgat\"\nnum_bases = 3\n")),
            "t.toml:9:1: model.num_bases decomposes RGCN's relation weights; model.name = \"rgat\" has none");
  // Several problems, one line each.
  EXPECT_EQ(Problem(Job("[model]\nname = \"hgt\"\nnum_blocks = 2\nhidden = 9\nheads = 2\n")),
            "t.toml:9:1: model.num_blocks decomposes RGCN's relation weights; model.name = \"hgt\" has none\n"
            "t.toml:11:1: model.hidden = 9 is not divisible by model.heads = 2: \"hgt\" splits the hidden width "
            "across the heads");
}

TEST(ModelRules, BiasesAreHgtsAndAnyModelTakesEitherInitialisation) {
  EXPECT_TRUE(Check(Job("[model]\nname = \"hgt\"\nbias = true\nweight_init = \"torch_linear\"\n")).ok());
  EXPECT_TRUE(Check(Job("[model]\nname = \"rgat\"\nweight_init = \"torch_linear\"\n")).ok());
  // model.bias is a key HGT declares for itself (core/model_keys.h): the job's own rules refuse it for another
  // model, unless it holds its default.
  const auto refused = [](const std::string& text, const std::vector<std::string>& overrides = {}) {
    Result<jobs::JobSpec> spec = jobs::ParseJob(text, "t.toml", overrides);
    EXPECT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), Code::kUsage);
    return spec.status().message();
  };
  EXPECT_EQ(refused(Job("[model]\nname = \"rgcn\"\nbias = true\n")),
            "t.toml:9:1: model.bias = true is a key of model.name = \"hgt\", and this job trains \"rgcn\"; leave it "
            "out or set it to its default, false");
  EXPECT_THAT(refused(Job("[model]\nname = \"rgat\"\n"), {"model.bias=true"}),
              HasSubstr("--set model.bias=true: model.bias = true is a key of model.name = \"hgt\""));
  EXPECT_TRUE(Check(Job("[model]\nname = \"rgcn\"\nbias = false\n")).ok());
}

}  // namespace
}  // namespace tessel::orchestrator
