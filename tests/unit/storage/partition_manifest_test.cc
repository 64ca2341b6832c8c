// partition.json and the graph identity (storage/partition_manifest.*): the hash sees every part of a
// graph, the manifest reads back what was written, and each malformed manifest is refused naming the key.
#include "storage/partition_manifest.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/json.h"
#include "core/logging.h"
#include "storage/generator.h"
#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using testing::ScratchDir;
using testing::WriteText;

HeteroGraph Small(uint64_t seed = 1) {
  GenerateOptions o;
  o.nodes = 300;
  o.feature_dim = 4;
  o.seed = seed;
  Result<HeteroGraph> g = GenerateGraph(o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

TEST(GraphHash, EqualGraphsHashEqualAndEveryPartCounts) {
  const HeteroGraph g = Small();
  const std::string h = GraphHash(g);
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(GraphHash(Small()), h);
  EXPECT_NE(GraphHash(Small(2)), h);
  {
    HeteroGraph c = g;
    c.relations[1].dst[0] = (c.relations[1].dst[0] + 1) % c.node_types[c.relations[1].dst_type].count;
    EXPECT_NE(GraphHash(c), h) << "one edge's destination";
  }
  {
    HeteroGraph c = g;
    uint32_t bits;
    std::memcpy(&bits, &c.node_types[2].features[5], 4);
    bits ^= 1u;  // the lowest mantissa bit
    std::memcpy(&c.node_types[2].features[5], &bits, 4);
    EXPECT_NE(GraphHash(c), h) << "one feature bit";
  }
  ASSERT_FALSE(g.node_types[0].labels.empty());
  ASSERT_FALSE(g.node_types[0].train_mask.empty());
  {
    HeteroGraph c = g;
    c.node_types[0].labels[0] = c.node_types[0].labels[0] == 0 ? 1 : 0;
    EXPECT_NE(GraphHash(c), h) << "one label";
  }
  {
    HeteroGraph c = g;
    c.node_types[0].train_mask[3] ^= 1;
    EXPECT_NE(GraphHash(c), h) << "one mask entry";
  }
  {
    HeteroGraph c = g;
    c.relations[0].name += "x";
    EXPECT_NE(GraphHash(c), h) << "a relation's name";
  }
  {
    HeteroGraph c = g;
    c.source_fingerprint = "elsewhere";  // where it came from is not what it is
    EXPECT_EQ(GraphHash(c), h);
  }
}

PartitionManifest TwoParts() {
  PartitionManifest m;
  m.graph = "g.h5";
  m.graph_name = "synthetic";
  m.graph_hash = "0123456789abcdef";
  m.nodes = 300;
  m.edges = 1200;
  m.relations = 9;
  m.classes = 4;
  m.feature_dim = 4;
  m.method = "metis";
  m.parts = 2;
  m.seed = 0;
  m.edge_cut = 100;
  m.random_edge_cut = 400;
  m.constraints = {"train", "edges"};
  m.imbalance = {1.01, 1.03};
  m.seconds = 0.25;
  for (int32_t p = 0; p < 2; ++p) {
    m.per_part.push_back({p, StrCat("part-", p, ".h5"), 150, 40 + p, 600, 500, 15, 190 * 4});
    m.files.push_back(m.per_part.back().file);
  }
  m.files.push_back(kPartitionManifestName);
  return m;
}

TEST(PartitionManifest, ReadsBackWhatWasWritten) {
  ScratchDir dir;
  const PartitionManifest m = TwoParts();
  WriteText(dir.File(kPartitionManifestName), FormatPartitionManifest(m));
  Result<PartitionManifest> back = ReadPartitionManifest(dir.path().string());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->graph_hash, m.graph_hash);
  EXPECT_EQ(back->parts, 2);
  EXPECT_EQ(back->feature_dim, 4);
  EXPECT_EQ(back->imbalance, m.imbalance);
  ASSERT_EQ(back->per_part.size(), 2u);
  EXPECT_EQ(back->per_part[1].halo, 41);
  EXPECT_EQ(back->per_part[1].pairs, 500);
  EXPECT_EQ(back->PartFile(dir.path().string(), 1), dir.File("part-1.h5"));
}

// Each edit of a good manifest, and the words its error must hold.
struct BadCase {
  const char* what;
  void (*edit)(Json&);
  const char* error;
};

TEST(PartitionManifest, RefusesEachMalformedManifestNamingTheKey) {
  const BadCase cases[] = {
      {"no graph_hash (an older Tessel)", [](Json& d) { d.erase("graph_hash"); }, "graph_hash: missing"},
      {"stop 42's manifest: no format either",
       [](Json& d) {
         d.erase("graph_hash");
         d.erase("format");
       },
       "graph_hash: missing: an older `tessel partition` wrote it"},
      {"another format", [](Json& d) { d["format"] = "dgl"; }, "format: "},
      {"a newer version", [](Json& d) { d["format_version"] = 9; }, "format_version: 9 is not supported"},
      {"parts against per_part", [](Json& d) { d["parts"] = 3; }, "per_part: expected a list of 3 parts"},
      {"a negative count", [](Json& d) { d["per_part"][1]["owned"] = -1; }, "per_part[1].owned: expected a count"},
      {"a part out of order", [](Json& d) { d["per_part"][1]["part"] = 0; }, "per_part[1].part: 0, expected 1"},
      {"a part file not listed", [](Json& d) { d["files"].erase(1); }, "files: does not list part-1.h5"},
      {"another file name", [](Json& d) { d["per_part"][0]["file"] = "../x.h5"; }, "per_part[0].file"},
      {"an imbalance per constraint", [](Json& d) { d["imbalance"].erase(0); }, "imbalance: expected a list of 2"},
      {"a string count", [](Json& d) { d["edges"] = "many"; }, "edges: expected a count"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    ScratchDir dir;
    Result<Json> doc = ParseJson(FormatPartitionManifest(TwoParts()), "manifest");
    ASSERT_TRUE(doc.ok());
    c.edit(*doc);
    WriteText(dir.File(kPartitionManifestName), FormatJson(*doc, JsonLayout::kIndented));
    Result<PartitionManifest> r = ReadPartitionManifest(dir.path().string());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kBadData);
    EXPECT_NE(r.status().message().find(dir.File(kPartitionManifestName)), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().message();
  }
}

TEST(PartitionManifest, MissingOrTruncatedIsBadDataNamingTheFile) {
  ScratchDir dir;
  Result<PartitionManifest> r = ReadPartitionManifest(dir.path().string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kBadData);
  EXPECT_NE(r.status().message().find("partition.json: cannot open"), std::string::npos) << r.status().message();
  WriteText(dir.File(kPartitionManifestName), FormatPartitionManifest(TwoParts()).substr(0, 80));
  r = ReadPartitionManifest(dir.path().string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("invalid JSON"), std::string::npos) << r.status().message();
}

TEST(PartitionManifest, SizesOfCountsPairsAndTraining) {
  const HeteroGraph g = Small();
  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < part_of.size(); ++i) part_of[i] = static_cast<int32_t>(i % 2);
  Result<std::vector<WorkerPartition>> parts = BuildWorkerPartitions(g, part_of, 2);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  int64_t edges = 0, train = 0;
  for (const WorkerPartition& p : *parts) {
    const PartSizes s = SizesOf(p);
    EXPECT_EQ(s.owned + s.halo, p.num_rows());
    EXPECT_GT(s.pairs, 0);
    EXPECT_LE(s.pairs, s.edges);
    EXPECT_EQ(s.features, p.num_owned * 4);  // the owned rows' only
    edges += s.edges;
    train += s.train;
  }
  EXPECT_EQ(edges, g.num_edges());  // every edge is an in-edge of exactly one part
  EXPECT_EQ(train, parts->front().total_train);
}

TEST(PartitionFile, KeepsTheGraphHash) {
  ScratchDir dir;
  const HeteroGraph g = Small();
  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()), 0);
  Result<std::vector<WorkerPartition>> parts = BuildWorkerPartitions(g, part_of, 1);
  ASSERT_TRUE(parts.ok());
  WorkerPartition& p = parts->front();
  p.graph_hash = GraphHash(g);
  ASSERT_TRUE(WritePartitionFile(p, dir.File("part-0.h5")).ok());
  Result<WorkerPartition> back = ReadPartitionFile(dir.File("part-0.h5"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->graph_hash, p.graph_hash);
  const std::vector<uint8_t> bytes = EncodePartition(p);
  Result<WorkerPartition> decoded = DecodePartition(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->graph_hash, p.graph_hash);
}

}  // namespace
}  // namespace tessel::storage
