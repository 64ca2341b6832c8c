// The host's op table, built from <tessel/ops/*.h>: every schema parses, is written in canonical form,
// names its own op and takes T as its first input; the tables answer by name and family.
#include "workers/plugin_host/op_table.h"

#include <gtest/gtest.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <set>

namespace tessel::workers {
namespace {

TEST(OpTable, EveryDeclaredSchemaIsCanonicalNamesItsOpAndHasAT) {
  ASSERT_GE(HostOps().size(), 13u);
  std::set<std::string> names;
  for (const tessel_op_decl* decl : HostOps()) {
    EXPECT_TRUE(names.insert(decl->name).second) << "declared twice: " << decl->name;
    Result<Schema> schema = ParseSchema(decl->schema);
    ASSERT_TRUE(schema.ok()) << decl->name << ": " << schema.status().ToString();
    EXPECT_EQ(schema->op, decl->name);
    EXPECT_EQ(schema->ToString(), decl->schema) << "not canonical";
    ASSERT_FALSE(schema->inputs.empty()) << decl->name;
    // The call's T is its first T argument's dtype (<tessel/ops/op.h>): every op has one, and A (T's
    // accumulation type) means nothing without it.
    bool has_t = false;
    for (const auto* args : {&schema->inputs, &schema->outputs}) {
      for (const SchemaArg& arg : *args) has_t = has_t || arg.type == SchemaType::kFloating;
    }
    EXPECT_TRUE(has_t) << decl->name << ": no T argument";
  }
}

TEST(OpTable, LooksUpByNameAndFamily) {
  ASSERT_NE(FindOp("optim.adam.step"), nullptr);
  EXPECT_STREQ(FindOp("optim.adam.step")->schema, tessel_op_optim_adam_step.schema);
  EXPECT_EQ(FindOp("optim.adam.step")->params_size, sizeof(tessel_adam_params));
  EXPECT_EQ(FindOp("no.such.op"), nullptr);
  EXPECT_TRUE(ExpectedSchema("no.such.op").empty());
  const std::vector<std::string> nn = OpsOfFamily("nn");
  EXPECT_NE(std::find(nn.begin(), nn.end(), "nn.gemm"), nn.end());
  for (const std::string& op : nn) EXPECT_EQ(op.rfind("nn.", 0), 0u) << op;
  EXPECT_EQ(OpsOfFamily("gather"), std::vector<std::string>{"gather.rows"});
  EXPECT_TRUE(OpsOfFamily("n").empty());
  EXPECT_TRUE(OpsOfFamily("nosuch").empty());
}

TEST(OpTable, OnlyTheFirstLayerInputGradientMayBeSkipped) {
  EXPECT_EQ(OutputRowsFor("rgnn.typed_linear.bwd"),
            (std::vector<OutputRows>{OutputRows::kMayBeEmpty, OutputRows::kRequired}));
  EXPECT_EQ(OutputRowsFor("rgnn.aggregate.fwd"), (std::vector<OutputRows>{OutputRows::kRequired}));
  EXPECT_TRUE(OutputRowsFor("no.such.op").empty());
}

}  // namespace
}  // namespace tessel::workers
