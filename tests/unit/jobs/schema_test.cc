// The field table (jobs/schema.cc): unique, documented keys, defaults read from the structs. That
// jobs/README.md lists exactly the keys of the `tessel` binary is tests/unit/orchestrator/job_reference_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

TEST(FieldTable, KeysAreUniqueAndDocumented) {
  std::set<std::string> seen;
  for (const FieldInfo& f : DescribeFields()) {
    SCOPED_TRACE(f.key);
    EXPECT_TRUE(seen.insert(f.key).second) << "declared twice";
    EXPECT_NE(f.key.find('.'), std::string::npos) << "every key belongs to a section";
    EXPECT_FALSE(f.doc.empty());
    EXPECT_EQ(f.doc.find_first_of("|\n<"), std::string::npos) << "the doc goes into a Markdown table row";
    EXPECT_FALSE(f.type.empty());
    EXPECT_FALSE(f.default_value.empty());
  }
}

TEST(FieldTable, DescribesDefaultsFromTheStructs) {
  std::map<std::string, FieldInfo> by_key;
  for (const FieldInfo& f : DescribeFields()) by_key[f.key] = f;
  EXPECT_EQ(by_key.at("job.name").default_value, "required");
  EXPECT_EQ(by_key.at("job.kind").default_value, "required");
  EXPECT_EQ(by_key.at("job.kind").allowed, "\"rgnn\", \"llm\"");
  EXPECT_EQ(by_key.at("data.format").default_value, "required");
  EXPECT_EQ(by_key.at("data.format").allowed,
            "\"graph\", \"rdf\", \"edges\", \"synthetic\", \"partitions\", \"text\", \"llmc\", \"generated_text\"");
  EXPECT_EQ(by_key.at("data.order").allowed, "\"sequential\", \"shuffled\"");
  EXPECT_EQ(by_key.at("data.generated_bytes").type, "bytes");
  EXPECT_EQ(by_key.at("data.generated_bytes").default_value, "1048576");
  EXPECT_EQ(by_key.at("model.name").allowed, "non-empty");  // the registered models: the planners check them
  EXPECT_EQ(by_key.at("data.feature_store").allowed, "\"auto\", \"mapped\", \"pinned\"");  // not "memory"
  EXPECT_EQ(by_key.at("model.vocab_size").allowed, "2 .. 65536");
  EXPECT_EQ(by_key.at("train.optimizer").allowed, "\"adam\", \"sgd\", \"adamw\"");
  EXPECT_EQ(by_key.at("train.final_lr_fraction").allowed, "0 .. 1");
  EXPECT_EQ(by_key.at("train.eps").default_value, "1e-8");
  EXPECT_EQ(by_key.at("pipeline.stages").default_value, "1");
  EXPECT_EQ(by_key.at("pipeline.stages").allowed, ">= 1");
  EXPECT_EQ(by_key.at("pipeline.layers").type, "array of integers");
  EXPECT_EQ(by_key.at("pipeline.layers").default_value, "[]");
  EXPECT_EQ(by_key.at("job.device").default_value, "\"auto\"");
  EXPECT_EQ(by_key.at("train.epochs").default_value, "50");
  EXPECT_EQ(by_key.at("train.epochs").type, "integer");
  EXPECT_EQ(by_key.at("train.epochs").allowed, ">= 1");
  EXPECT_EQ(by_key.at("train.lr").default_value, "0.01");
  EXPECT_EQ(by_key.at("train.lr").type, "float");
  EXPECT_EQ(by_key.at("train.lr").allowed, "> 0");
  EXPECT_EQ(by_key.at("train.l2").default_value, "5e-4");
  EXPECT_EQ(by_key.at("data.synthetic.avg_degree").default_value, "8.0");
  EXPECT_EQ(by_key.at("data.synthetic.train_fraction").allowed, "> 0, < 1");
  EXPECT_EQ(by_key.at("metrics.port_base").allowed, "0 .. 65535");
  EXPECT_EQ(by_key.at("resources.memory_budget_bytes").type, "bytes");
  EXPECT_EQ(by_key.at("plugins.paths").default_value, "[]");
  EXPECT_EQ(by_key.at("plugins.paths").type, "array of strings");
  EXPECT_EQ(by_key.at("job.output_dir").default_value, "\"\"");
  EXPECT_EQ(by_key.at("data.add_inverse").default_value, "true");
}

TEST(FieldTable, EnumNamesAreTheTomlSpellings) {
  EXPECT_EQ(NameOf(JobKind::kRgnn), "rgnn");
  EXPECT_EQ(NameOf(JobKind::kLlm), "llm");
  EXPECT_EQ(NameOf(DeviceChoice::kCuda), "cuda");
  EXPECT_EQ(NameOf(DataFormat::kRdf), "rdf");
  EXPECT_EQ(NameOf(DataFormat::kText), "text");
  EXPECT_EQ(NameOf(DataFormat::kLlmc), "llmc");
  EXPECT_EQ(NameOf(DataFormat::kGeneratedText), "generated_text");
  EXPECT_EQ(NameOf(OptimizerName::kAdamw), "adamw");
  EXPECT_EQ(NameOf(BatchOrder::kSequential), "sequential");
  EXPECT_EQ(NameOf(BatchOrder::kShuffled), "shuffled");
  EXPECT_EQ(NameOf(PartitionMethod::kMetis), "metis");
}

}  // namespace
}  // namespace tessel::jobs
