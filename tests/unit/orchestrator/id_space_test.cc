// 64-bit id paths of the distributed partitioner (issue 34, acceptance 6), exercised at ids above 2^31 and
// 2^32 without materialising a node: the id space and its homes, the packed edge, the baselines' parts,
// the range book, and the chunk reader's range checks against a node type of five billion nodes that
// metadata.json declares and nothing stores.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "orchestrator/graph_partitioner.h"
#include "orchestrator/partitioning/home_graph.h"
#include "orchestrator/partitioning/part_builder.h"
#include "storage/chunked_import.h"
#include "storage/partition.h"

namespace tessel::orchestrator {
namespace {

constexpr int64_t kBig = 5'000'000'000;  // above 2^32

storage::HeteroGraph Skeleton() {
  storage::HeteroGraph g;
  g.node_types.push_back({});
  g.node_types.back().name = "small";
  g.node_types.back().count = 10;
  g.node_types.push_back({});
  g.node_types.back().name = "huge";
  g.node_types.back().count = kBig;
  return g;
}

TEST(IdSpace, HomesAndTypesPastTwoToTheThirtyTwo) {
  const Layout layout(Skeleton(), 3);
  EXPECT_EQ(layout.n, kBig + 10);
  EXPECT_EQ(layout.home[1], (kBig + 10) / 3);
  EXPECT_EQ(layout.home[3], kBig + 10);
  EXPECT_EQ(layout.HomeOf(kBig + 9), 2);
  EXPECT_EQ(layout.HomeOf(layout.home[2]), 2);
  EXPECT_EQ(layout.HomeOf(layout.home[2] - 1), 1);
  EXPECT_EQ(layout.TypeOf(9), 0);
  EXPECT_EQ(layout.TypeOf(10), 1);
  EXPECT_EQ(layout.TypeOf(kBig + 9), 1);
}

TEST(IdSpace, PackedEdgesKeepFortyEightBitIds) {
  const int64_t top = kMaxPackedId - 1;
  Edge e(kBig * 1000, top, static_cast<int32_t>(kMaxPackedRelations - 1));
  EXPECT_EQ(e.src, kBig * 1000);
  EXPECT_EQ(e.dst(), top);
  EXPECT_EQ(e.rel(), kMaxPackedRelations - 1);
  e.set_dst(kBig + 3);
  EXPECT_EQ(e.dst(), kBig + 3);
  EXPECT_EQ(e.rel(), kMaxPackedRelations - 1);  // the relation survives a new destination
}

TEST(IdSpace, BaselinePartsAndTheRangeBookAtLargeIds) {
  EXPECT_EQ(RangePartOf(kBig - 1, kBig, 7), 6);
  EXPECT_EQ(RangePartOf(kBig / 2, kBig, 2), 1);
  EXPECT_EQ(RangePartOf((kBig / 2) - 1, kBig, 2), 0);
  const int32_t p = RandomPartOf(kBig + 123, 16, 5);
  EXPECT_GE(p, 0);
  EXPECT_LT(p, 16);
  EXPECT_EQ(p, RandomPartOf(kBig + 123, 16, 5));
  const std::vector<int64_t> offsets = {0, 3'000'000'000, 3'000'000'000, kBig};
  EXPECT_EQ(storage::LookupRangeBook(offsets, 3'000'000'000).part, 2);  // the empty part is skipped
  EXPECT_EQ(storage::LookupRangeBook(offsets, 3'000'000'001).local, 1);
  EXPECT_EQ(storage::LookupRangeBook(offsets, kBig - 1).local, kBig - 1 - 3'000'000'000);
  EXPECT_EQ(OwnerOfPart(2'000'000'001, 3), 0);
}

// A chunked graph of five billion featureless nodes: its edges are read and range-checked as 64-bit ids,
// and no array of the node type is ever allocated (the test would need 40 GB).
TEST(IdSpace, ChunkReaderChecksIdsOfAHugeType) {
  const std::filesystem::path dir =
      std::filesystem::path(TESSEL_BINARY_DIR) / "test-scratch" / ("IdSpace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "edges");
  std::ofstream(dir / "edges" / "e.csv") << "4999999999 0\n0 4999999998\n4294967296 4294967297\n";
  std::ofstream(dir / "edges" / "bad.csv") << "5000000000 1\n";
  std::ofstream(dir / "metadata.json") << R"({"graph_name": "huge", "node_type": ["huge"],
    "num_nodes_per_type": [5000000000], "edge_type": ["huge:e:huge", "huge:f:huge"],
    "num_edges_per_type": [3, 1],
    "edges": {"huge:e:huge": {"format": {"name": "csv", "delimiter": " "}, "data": ["edges/e.csv"]},
              "huge:f:huge": {"format": {"name": "csv", "delimiter": " "}, "data": ["edges/bad.csv"]}}})";
  Result<storage::ChunkedGraph> g = storage::ReadChunkedMetadata(dir.string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->node_types[0].count, kBig);
  std::vector<int64_t> src, dst;
  ASSERT_TRUE(storage::ReadEdgeChunk(*g, 0, 0, &src, &dst).ok());
  EXPECT_EQ(src, (std::vector<int64_t>{4'999'999'999, 0, 4'294'967'296}));
  EXPECT_EQ(dst, (std::vector<int64_t>{0, 4'999'999'998, 4'294'967'297}));
  const Status bad = storage::ReadEdgeChunk(*g, 1, 0, &src, &dst);
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("source id 5000000000 is out of range"));
  const storage::HeteroGraph skeleton = storage::ChunkedSkeleton(*g, true, true);
  const Layout layout(skeleton, 4);
  EXPECT_EQ(layout.n, kBig);
  EXPECT_EQ(layout.HomeOf(4'999'999'999), 3);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace tessel::orchestrator
