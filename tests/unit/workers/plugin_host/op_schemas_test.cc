// The host's op table: every schema parses, is written in canonical form, and names its own op.
#include "workers/plugin_host/op_schemas.h"

#include <gtest/gtest.h>

namespace tessel::workers {
namespace {

TEST(OpSchemas, EveryExpectedSchemaIsCanonicalAndNamesItsOp) {
  ASSERT_EQ(KnownOps().size(), 10u);
  for (const std::string& op : KnownOps()) {
    Result<Schema> schema = ParseSchema(ExpectedSchema(op));
    ASSERT_TRUE(schema.ok()) << op << ": " << schema.status().ToString();
    EXPECT_EQ(schema->op, op);
    EXPECT_EQ(schema->ToString(), ExpectedSchema(op));
  }
}

TEST(OpSchemas, RgcnOpsAreAllKnown) {
  for (const std::string& op : RgcnOps()) EXPECT_FALSE(ExpectedSchema(op).empty()) << op;
  EXPECT_TRUE(ExpectedSchema("no.such.op").empty());
}

TEST(OpSchemas, OnlyTheFirstLayerInputGradientMayBeSkipped) {
  EXPECT_EQ(OutputRowsFor("rgnn.typed_linear.bwd"),
            (std::vector<OutputRows>{OutputRows::kMayBeEmpty, OutputRows::kRequired}));
  EXPECT_EQ(OutputRowsFor("rgnn.aggregate.fwd"), (std::vector<OutputRows>{OutputRows::kRequired}));
  EXPECT_TRUE(OutputRowsFor("no.such.op").empty());
}

}  // namespace
}  // namespace tessel::workers
